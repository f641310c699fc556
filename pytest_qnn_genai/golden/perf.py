"""Golden performance floors: ``golden/perf/<model>.json``, one file per model case.

A file holds the workload its floors were measured on and, per SoC × backend, the tok/s floors a
phone run of that workload must reach, each entry saying where its numbers come from::

    {"model": "stories260k",
     "workload": {"prompt": "Once", "seq_len": 128,
                  "build": {"model_mode": "hybrid", "prefill_ar_len": 32, ...},
                  "source": "..."},
     "targets": {"SM8650": {"htp": {"prefill_tok_s": null, "decode_tok_s": 1600,
                                    "inference_speed_tok_s": 1600, "provenance": "..."}}}}

The workload uses qnn_llama_runner's semantics: ``--seq_len`` S counts prompt + output, so a
P-token prompt (BOS included) yields S - P tokens unless a decode step yields EOS. ``build`` names
the case fields (:data:`BUILD_KEYS`) the floors' .pte was built with: a floor says nothing about a
case built otherwise, so :meth:`GoldenWorkload.mismatches` lists every difference.

``prefill_tok_s`` and ``decode_tok_s`` are required (``null`` = no known floor);
``inference_speed_tok_s`` (upstream's decode steps over total inference time) is optional. There
is no tolerance in the file: the caller passes one (the plugin's ``--qnn-perf-noise``) and a
figure passes when ``value >= floor * (1 - tolerance)``. Loading is strict: any damage raises
:class:`GoldenFileError` with one line naming the file. Writing needs ``allow_write=True`` (the
plugin passes it only under ``--qnn-update-golden``).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pytest_qnn_genai import figures
from pytest_qnn_genai.golden import updates
from pytest_qnn_genai.golden.updates import GoldenWriteRefused
from pytest_qnn_genai.targets import BACKENDS, SOCS

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase

REQUIRED_FLOORS = ("prefill_tok_s", "decode_tok_s")
OPTIONAL_FLOORS = ("inference_speed_tok_s",)
FLOOR_FIGURES = REQUIRED_FLOORS + OPTIONAL_FLOORS
_FILE_KEYS = ("model", "workload", "targets")
_WORKLOAD_KEYS = ("prompt", "seq_len", "build", "source")
# ModelCase fields that shape the measured .pte (what a floor's "build" may pin)
BUILD_KEYS = ("decoder_model", "model_mode", "prefill_ar_len", "max_seq_len", "max_context_len",
              "quant_recipe", "kv_io_bit_width")

Fail = Callable[[str], NoReturn]


class GoldenFileError(ValueError):
    """A golden file is unreadable or malformed (the message is one line naming the file)."""


@dataclass(frozen=True)
class GoldenWorkload:
    """What the floors were measured on: a prompt, a runner ``--seq_len`` and the build."""

    prompt: str
    seq_len: int
    build: dict[str, str | int]
    source: str

    @classmethod
    def from_case(cls, case: ModelCase) -> GoldenWorkload:
        """A new file's workload: the case's perf prompt (else eval prompt) up to its
        ``max_seq_len``, built as the case builds."""
        return cls(case.extra.get("perf_prompt") or case.eval_prompt, case.max_seq_len,
                   {k: getattr(case, k) for k in BUILD_KEYS},
                   f"{case.name}'s case.json (no upstream workload; written by "
                   "--qnn-update-golden)")

    def mismatches(self, case: ModelCase) -> list[str]:
        """One line per build field where ``case`` differs from the floors' build."""
        return [f"the floors were measured on {k} {v!r} but {case.name} builds "
                f"{getattr(case, k, None)!r}" for k, v in self.build.items()
                if getattr(case, k, None) != v]

    def judge_build(self, case: ModelCase, source: str) -> list[figures.Figure]:
        """:meth:`mismatches` as the run report's failed rows (``source``: the golden file)."""
        return [figures.problem("floors_build", m, f"the floors' build ({source})")
                for m in self.mismatches(case)]

    def max_new_tokens(self, prompt_tokens: int) -> int:
        """Tokens a ``prompt_tokens``-token prompt yields under ``--seq_len`` (S - P)."""
        if prompt_tokens >= self.seq_len:
            raise ValueError(f"workload prompt {self.prompt!r} is {prompt_tokens} tokens, not "
                             f"fewer than seq_len {self.seq_len}")
        return self.seq_len - prompt_tokens

    def to_dict(self) -> dict[str, object]:
        return {"prompt": self.prompt, "seq_len": self.seq_len, "build": dict(self.build),
                "source": self.source}


@dataclass(frozen=True)
class GoldenEntry:
    """The floors of one SoC × backend. ``floors[figure]`` is None when no floor is known."""

    floors: dict[str, float | None]
    provenance: str


@dataclass(frozen=True)
class GoldenPerf:
    """A model's golden floors, keyed by ``(soc, backend)``, and the workload behind them."""

    model: str
    workload: GoldenWorkload
    entries: dict[tuple[str, str], GoldenEntry] = field(default_factory=dict)

    def entry(self, soc: str, backend: str) -> GoldenEntry | None:
        """The entry for a SoC × backend, or None."""
        return self.entries.get((soc, backend))

    def floor(self, soc: str, backend: str, figure: str) -> float | None:
        """The floor of one figure, or None when there is none."""
        e = self.entry(soc, backend)
        return None if e is None else e.floors.get(figure)

    def gated(self, soc: str, backend: str) -> tuple[str, ...]:
        """The figures with a floor for this SoC × backend."""
        e = self.entry(soc, backend)
        return () if e is None else tuple(f for f in FLOOR_FIGURES if e.floors.get(f) is not None)

    def judge(self, soc: str, backend: str, measured: Mapping[str, float],
              tolerance: float) -> list[figures.Figure]:
        """Each floor of this SoC x backend as a judged figure of a **phone's** ``measured``
        figures: ``pass`` when ``value >= floor * (1 - tolerance)``, ``fail`` below it or when the
        figure was not measured; the judge reads ``floor 1600 (SM8650 phone, -10 % noise)``. An
        empty list when there is no entry. (An emulator's figures are never judged here: the
        report refuses a phone floor on an emulator record.)"""
        if not 0 <= tolerance < 1:
            raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
        e = self.entry(soc, backend)
        if e is None:
            return []
        out = []
        for name, floor in e.floors.items():
            if floor is None:
                continue
            value = measured.get(name)
            ok = value is not None and value >= floor * (1 - tolerance)  # NaN fails
            out.append(figures.Figure(
                name, value, figures.PASS if ok else figures.FAIL,
                f"floor {floor:g} ({soc} phone, -{tolerance:.0%} noise)", figures.PHONE_FLOOR,
                float(floor), figures.HIGHER,
                context={"tolerance": tolerance, "vs_floor": None if value is None
                         else round(value / floor, 4)}))
        return out

    def check(self, soc: str, backend: str, measured: Mapping[str, float],
              tolerance: float) -> list[str]:
        """One message per floor the ``measured`` figures miss by more than ``tolerance`` (a
        fraction in [0, 1)); an empty list when all floors are met or there is no entry. The
        verdicts are :meth:`judge`'s."""
        failures = []
        for f in self.judge(soc, backend, measured, tolerance):
            if f.passed:
                continue
            where = f"{self.model} {soc}/{backend}: {f.name}"
            if f.value is None:
                failures.append(f"{where} was not measured (floor {f.bound or 0:g})")
            else:
                failures.append(f"{where} {f.value:.1f} < floor {f.bound or 0:g} "
                                f"(tolerance {tolerance:.0%})")
        return failures

    def with_floors(self, soc: str, backend: str, floors: Mapping[str, float | None],
                    provenance: str) -> GoldenPerf:
        """A copy with ``floors`` set for one SoC × backend (other floors of the entry kept)."""
        unknown = [f for f in floors if f not in FLOOR_FIGURES]
        if unknown:
            raise ValueError(f"with_floors: {unknown[0]!r} is not a floor figure "
                             f"({', '.join(FLOOR_FIGURES)})")
        old = self.entry(soc, backend)
        merged = {f: None for f in REQUIRED_FLOORS} | (dict(old.floors) if old else {})
        merged |= dict(floors)
        return replace(self, entries={**self.entries, (soc, backend): GoldenEntry(merged,
                                                                                  provenance)})

    def to_dict(self) -> dict[str, object]:
        """The file's JSON object (SoCs and backends sorted, floors in a fixed order)."""
        out: dict[str, dict[str, object]] = {}
        for (soc, backend), e in sorted(self.entries.items()):
            body: dict[str, object] = {f: e.floors[f] for f in FLOOR_FIGURES if f in e.floors}
            body["provenance"] = e.provenance
            out.setdefault(soc, {})[backend] = body
        return {"model": self.model, "workload": self.workload.to_dict(), "targets": out}

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _show(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_TOLERANCE_HINT = "there is no tolerance in the file: the tolerance is --qnn-perf-noise"


def _keys(obj: Mapping[str, object], allowed: tuple[str, ...], required: tuple[str, ...],
          fail: Fail) -> None:
    for k in obj:
        if k not in allowed:
            hint = f"; {_TOLERANCE_HINT}" if k == "tolerance" else ""
            fail(f"unknown key {k!r} (allowed: {', '.join(allowed)}){hint}")
    for k in required:
        if k not in obj:
            fail(f"missing key {k!r}")


def _text(obj: Mapping[str, object], key: str, fail: Fail) -> str:
    value = obj[key]
    if not isinstance(value, str) or not value.strip():
        fail(f"{key!r} must be a non-empty string, got {_show(value)}")
    return value


def _workload(body: object, fail: Fail) -> GoldenWorkload:
    if not isinstance(body, dict):
        fail(f"must be an object, got {_show(body)}")
    _keys(body, _WORKLOAD_KEYS, _WORKLOAD_KEYS, fail)
    seq_len = body["seq_len"]
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 2:
        fail(f"'seq_len' must be an integer >= 2, got {_show(seq_len)}")
    build = body["build"]
    if not isinstance(build, dict):
        fail(f"'build' must be an object, got {_show(build)}")
    for k, v in build.items():
        if k not in BUILD_KEYS:
            fail(f"build: unknown key {k!r} (allowed: {', '.join(BUILD_KEYS)})")
        if not isinstance(v, (str, int)) or isinstance(v, bool):
            fail(f"build: {k!r} must be a string or an integer, got {_show(v)}")
    return GoldenWorkload(_text(body, "prompt", fail), seq_len, dict(build),
                          _text(body, "source", fail))


def _entry(body: object, fail: Fail) -> GoldenEntry:
    if not isinstance(body, dict):
        fail(f"entry must be an object, got {_show(body)}")
    _keys(body, FLOOR_FIGURES + ("provenance",), REQUIRED_FLOORS + ("provenance",), fail)
    floors: dict[str, float | None] = {}
    for name in FLOOR_FIGURES:
        if name in body:
            v = body[name]
            if v is not None and (not _is_number(v) or v <= 0):
                fail(f"{name!r} must be a positive number or null, got {_show(v)}")
            floors[name] = v
    return GoldenEntry(floors, _text(body, "provenance", fail))


def parse_golden(data: object, source: str, expected_model: str | None = None) -> GoldenPerf:
    """Validate a decoded golden file; problems raise :class:`GoldenFileError` ``source: ...``."""
    def fail_at(where: str) -> Fail:
        def fail(problem: str) -> NoReturn:
            raise GoldenFileError(f"{source}: {where + ': ' if where else ''}{problem}")
        return fail

    fail = fail_at("")
    if not isinstance(data, dict):
        fail(f"top level must be an object, got {_show(data)}")
    _keys(data, _FILE_KEYS, _FILE_KEYS, fail)
    model = _text(data, "model", fail)
    if expected_model is not None and model != expected_model:
        fail(f"'model' is {model!r} but the file is named for {expected_model!r}")
    workload = _workload(data["workload"], fail_at("workload"))
    tgts = data["targets"]
    if not isinstance(tgts, dict) or not tgts:
        fail(f"'targets' must be a non-empty object, got {_show(tgts)}")
    entries: dict[tuple[str, str], GoldenEntry] = {}
    for soc, per_backend in tgts.items():
        if soc not in SOCS:
            fail(f"unknown SoC {soc!r} in 'targets'")
        if not isinstance(per_backend, dict) or not per_backend:
            fail_at(soc)(f"must be a non-empty object of backends, got {_show(per_backend)}")
        for backend, body in per_backend.items():
            if backend not in BACKENDS:
                fail_at(soc)(f"unknown backend {backend!r} (valid: {', '.join(BACKENDS)})")
            entries[(soc, backend)] = _entry(body, fail_at(f"{soc}/{backend}"))
    return GoldenPerf(model, workload, entries)


def load_golden(path: Path | str) -> GoldenPerf:
    """Read and validate one golden file; its ``model`` must match the file name."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise GoldenFileError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise GoldenFileError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: "
                              f"{e.msg}") from None
    return parse_golden(data, str(path), expected_model=path.stem)


def load_goldens(folder: Path | str) -> dict[str, GoldenPerf]:
    """Every ``<model>.json`` in ``folder`` by model name (an absent folder gives ``{}``)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {p.stem: load_golden(p) for p in files}


def golden_diff(path: Path | str, new: GoldenPerf) -> str:
    """Unified diff from the file on disk (empty if absent) to ``new``; "" when unchanged."""
    path = Path(path)
    return updates.unified_diff(path, path.read_text(encoding="utf-8") if path.exists() else "",
                                new.to_json())


def update_golden(path: Path | str, new: GoldenPerf, *, allow_write: bool = False,
                  ) -> updates.Update:
    """Atomically replace the golden file with ``new`` (:func:`~pytest_qnn_genai.golden.updates.
    write`: one line per changed floor, the test reports *updated*).

    Refuses (:class:`GoldenWriteRefused`) unless ``allow_write=True``. ``new`` is re-validated
    first, so a file this function writes always loads. Nothing is written when unchanged.
    """
    path = Path(path)
    if not allow_write:
        raise GoldenWriteRefused(f"{path}: refusing to rewrite a golden file without "
                                 "--qnn-update-golden")
    parse_golden(json.loads(new.to_json()), str(path), expected_model=path.stem)
    return updates.write(path, new.to_json(), allow_write=True)
