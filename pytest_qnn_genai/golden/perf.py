"""Golden performance floors: ``golden/perf/<model>.json``, one file per model case.

A file holds, per SoC × backend, the tok/s floors a phone run must reach and where each floor
comes from::

    {"model": "stories260k", "tolerance": 0.0,
     "targets": {"SM8650": {"htp": {"prefill_tok_s": null, "decode_tok_s": 1600,
                                    "inference_speed_tok_s": 1600, "provenance": "..."}}}}

``prefill_tok_s`` and ``decode_tok_s`` are required (``null`` = no known floor);
``inference_speed_tok_s`` (upstream's generated tokens over total inference time) and a per-entry
``tolerance`` are optional. A figure passes when ``value >= floor * (1 - tolerance)``.
Loading is strict: any damage raises :class:`GoldenFileError` with one line naming the file.
Writing needs ``allow_write=True`` (the plugin passes it only under ``--qnn-update-golden``).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

from pytest_qnn_genai import golden
from pytest_qnn_genai.golden import GoldenWriteRefused
from pytest_qnn_genai.targets import BACKENDS, SOCS

REQUIRED_FLOORS = ("prefill_tok_s", "decode_tok_s")
OPTIONAL_FLOORS = ("inference_speed_tok_s",)
FLOOR_FIGURES = REQUIRED_FLOORS + OPTIONAL_FLOORS
_FILE_KEYS = ("model", "tolerance", "targets")

Fail = Callable[[str], NoReturn]


class GoldenFileError(ValueError):
    """A golden file is unreadable or malformed (the message is one line naming the file)."""


@dataclass(frozen=True)
class GoldenEntry:
    """The floors of one SoC × backend. ``floors[figure]`` is None when no floor is known."""

    floors: dict[str, float | None]
    provenance: str
    tolerance: float | None = None  # overrides the file's default when set


@dataclass(frozen=True)
class GoldenPerf:
    """A model's golden floors, keyed by ``(soc, backend)``."""

    model: str
    tolerance: float
    entries: dict[tuple[str, str], GoldenEntry] = field(default_factory=dict)

    def entry(self, soc: str, backend: str) -> GoldenEntry | None:
        """The entry for a SoC × backend, or None."""
        return self.entries.get((soc, backend))

    def floor(self, soc: str, backend: str, figure: str) -> float | None:
        """The floor of one figure, or None when there is none."""
        e = self.entry(soc, backend)
        return None if e is None else e.floors.get(figure)

    def tolerance_for(self, soc: str, backend: str) -> float:
        """The entry's tolerance, else the file default."""
        e = self.entry(soc, backend)
        return self.tolerance if e is None or e.tolerance is None else e.tolerance

    def check(self, soc: str, backend: str, figures: Mapping[str, float]) -> list[str]:
        """One message per floor the measured ``figures`` miss (empty list: all floors met)."""
        e = self.entry(soc, backend)
        if e is None:
            return []
        tol, failures = self.tolerance_for(soc, backend), []
        for name, floor in e.floors.items():
            if floor is None:
                continue
            value = figures.get(name)
            if value is None:
                failures.append(f"{self.model} {soc}/{backend}: {name} was not measured "
                                f"(floor {floor:g})")
            elif value < floor * (1 - tol):
                failures.append(f"{self.model} {soc}/{backend}: {name} {value:.1f} < floor "
                                f"{floor:g} (tolerance {tol:.0%})")
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
        entry = GoldenEntry(merged, provenance, old.tolerance if old else None)
        return replace(self, entries={**self.entries, (soc, backend): entry})

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object (SoCs and backends sorted, floors in a fixed order)."""
        out: dict[str, dict[str, Any]] = {}
        for (soc, backend), e in sorted(self.entries.items()):
            body: dict[str, Any] = {f: e.floors[f] for f in FLOOR_FIGURES if f in e.floors}
            if e.tolerance is not None:
                body["tolerance"] = e.tolerance
            body["provenance"] = e.provenance
            out.setdefault(soc, {})[backend] = body
        return {"model": self.model, "tolerance": self.tolerance, "targets": out}

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _keys(obj: dict[str, Any], allowed: tuple[str, ...], required: tuple[str, ...],
          fail: Fail) -> None:
    for k in obj:
        if k not in allowed:
            fail(f"unknown key {k!r} (allowed: {', '.join(allowed)})")
    for k in required:
        if k not in obj:
            fail(f"missing key {k!r}")


def _tolerance(value: Any, fail: Fail) -> float:
    if not _is_number(value) or not 0 <= value < 1:
        fail(f"'tolerance' must be a number in [0, 1), got {_show(value)}")
    return value


def _entry(body: Any, fail: Fail) -> GoldenEntry:
    if not isinstance(body, dict):
        fail(f"entry must be an object, got {_show(body)}")
    _keys(body, FLOOR_FIGURES + ("tolerance", "provenance"), REQUIRED_FLOORS + ("provenance",),
          fail)
    floors: dict[str, float | None] = {}
    for name in FLOOR_FIGURES:
        if name in body:
            v = body[name]
            if v is not None and (not _is_number(v) or v <= 0):
                fail(f"{name!r} must be a positive number or null, got {_show(v)}")
            floors[name] = v
    prov = body["provenance"]
    if not isinstance(prov, str) or not prov.strip():
        fail(f"'provenance' must be a non-empty string, got {_show(prov)}")
    tol = _tolerance(body["tolerance"], fail) if "tolerance" in body else None
    return GoldenEntry(floors, prov, tol)


def parse_golden(data: Any, source: str, expected_model: str | None = None) -> GoldenPerf:
    """Validate a decoded golden file; problems raise :class:`GoldenFileError` ``source: ...``."""
    def fail_at(where: str) -> Fail:
        def fail(problem: str) -> NoReturn:
            raise GoldenFileError(f"{source}: {where + ': ' if where else ''}{problem}")
        return fail

    fail = fail_at("")
    if not isinstance(data, dict):
        fail(f"top level must be an object, got {_show(data)}")
    _keys(data, _FILE_KEYS, _FILE_KEYS, fail)
    model = data["model"]
    if not isinstance(model, str) or not model:
        fail(f"'model' must be a non-empty string, got {_show(model)}")
    if expected_model is not None and model != expected_model:
        fail(f"'model' is {model!r} but the file is named for {expected_model!r}")
    tolerance = _tolerance(data["tolerance"], fail)
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
    return GoldenPerf(model, tolerance, entries)


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
    return golden.diff(Path(path), new.to_json())


def update_golden(path: Path | str, new: GoldenPerf, *, allow_write: bool = False) -> str:
    """Atomically replace the golden file with ``new`` and return the unified diff.

    Refuses (:class:`GoldenWriteRefused`) unless ``allow_write=True``. ``new`` is re-validated
    first, so a file this function writes always loads. Nothing is written when unchanged.
    """
    path = Path(path)
    if not allow_write:
        raise GoldenWriteRefused(f"{path}: refusing to rewrite a golden file without "
                                 "--qnn-update-golden")
    parse_golden(json.loads(new.to_json()), str(path), expected_model=path.stem)
    return golden.rewrite(path, new.to_json(), allow_write=True)
