"""Legacy-vs-new parity as plain functions: program signatures, bytes, outputs, the table.

Every comparison returns :class:`Check` rows (check, legacy, new, delta, verdict, detail) that a
test asserts on, the session's :class:`ParityTable` prints and the run report records
(:meth:`Check.figure`: the row's value, its judge and its verdict, from the row itself). Nothing
here depends on pytest, so the comparisons can be called directly on any two flows' artifacts
(e.g. a perturbed variant).

Two builds of one recipe run the same program on the same inputs, so their outputs are judged
bit for bit (:func:`compare_runs`); a case may opt a pair into SQNR/cosine floors instead
(:class:`pytest_qnn_genai.models.spec.ParityTolerance`, with its reason). Hazard: a 30 dB /
0.995 cosine floor passed a real gap between the flows (a skipped SeqMSE search: 27.4 dB) only
because it was a little too wide; a milder gap would have passed.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai import figures, text
from pytest_qnn_genai.checks import numerics, program_bytes
from pytest_qnn_genai.checks.program_bytes import ProgramDiff
from pytest_qnn_genai.hybrid import GRAPH_METHODS
from pytest_qnn_genai.models.spec import EXACT, ParityTolerance
from pytest_qnn_genai.untyped import Json

if TYPE_CHECKING:
    from pytest_qnn_genai.runtime.result import RunResult

SAME = "same as legacy"
SCALE_RTOL = 1e-3  # constant-method scales (logits, KV outputs) of the two flows
PTE_SIZE_RTOL = 0.05  # a pair with a case's reasoned tolerance (identity otherwise)


@dataclass(frozen=True)
class Check:
    """One check: the reference's value (``legacy``: the legacy flow, A, or what the value is
    held to), the value under test (``new``), their difference, and whether it passes.

    ``judge`` names what ``new`` is held to (``≥ 30 dB``, ``same as legacy``); ``name`` is the
    stable name of its figure in the run report, ``bound``/``rule``/``better`` its threshold, kind
    and direction (:class:`pytest_qnn_genai.figures.Figure`)."""

    check: str
    legacy: object  # JSON-serializable values, shown as text
    new: object
    delta: object = ""
    ok: bool = True
    detail: str = ""
    info: bool = False  # a figure reported, judged by nothing
    judge: str = ""
    name: str = ""
    bound: float | None = None
    rule: str = ""
    better: str | None = None
    tolerance: str = ""  # why a case lets this pair differ (its spec's reason; empty: exact)

    @property
    def verdict(self) -> str:
        if self.info:
            return "info"
        verdict = "ok" if self.ok else "FAIL"
        return f"{verdict} (tolerance: {self.tolerance})" if self.tolerance else verdict

    def figure(self) -> figures.Figure:
        """This row as a judged figure of the run report (``new`` is its value, ``legacy`` its
        reference); a judged row without a ``judge`` is refused (ValueError)."""
        verdict = figures.INFO if self.info else figures.PASS if self.ok else figures.FAIL
        context = {"delta": figures.scalar(self.delta)} if self.delta not in ("", None) else {}
        if self.tolerance:
            context["tolerance"] = self.tolerance
        return figures.Figure(self.name or _slug(self.check), figures.scalar(self.new), verdict,
                              self.judge, self.rule, self.bound, self.better,
                              figures.scalar(self.legacy), self.check, context)

    def row(self) -> dict[str, str]:
        return {"check": self.check, "legacy": _fmt(self.legacy), "new": _fmt(self.new),
                "delta": _fmt(self.delta), "verdict": self.verdict}


def _slug(words: str) -> str:
    return "_".join("".join(c if c.isalnum() else " " for c in words.lower()).split())


def _fmt(v: object) -> str:
    return text.value(v, digits=6)  # scales need six digits to show a 1e-3 relative change


def _given(v: object) -> bool:
    return v not in ("", None)


def _say(v: object) -> str:
    """A value in a sentence: text whose edges are spaces (or that is empty) quoted."""
    return repr(v) if isinstance(v, str) and (not v or v != v.strip()) else _fmt(v)


def sentence(c: Check) -> str:
    """A row's verdict as one sentence: the figure, its value, the reference's value and the
    difference when the row has them, and what it was held to (the threshold and whose it is,
    from ``judge``). A reference that only names what the value is measured against (``fp32``,
    ``QDQ graph``: already in the figure's name) is not repeated."""
    names_only = isinstance(c.legacy, str) and (c.legacy in c.check or c.legacy == "ref")
    parts = []
    if _given(c.legacy) and not names_only:
        parts.append(f"against {_say(c.legacy)}")
    if _given(c.delta):
        parts.append(f"difference {_say(c.delta)}")
    seen = f" ({'; '.join(parts)})" if parts else ""
    if c.info:
        return f"{c.check} is {_say(c.new)}{seen}, judged by nothing (info)."
    held = c.judge or "a check that names no threshold"
    verdict = "which meets" if c.ok else "which fails"
    return f"{c.check} is {_say(c.new)}{seen}, {verdict} {held}."


def failures(checks: Iterable[Check]) -> str:
    """A readable message for the failing checks (empty when all pass): one sentence each
    (:func:`sentence`), then its detail, indented."""
    lines = []
    for c in checks:
        if c.ok:
            continue
        lines.append(sentence(c))
        lines += [f"    {line}" for line in c.detail.splitlines()]
    return "\n".join(lines)


class ParityTable:
    """Rows collected during a session, printed in the terminal summary (shippable as dicts)."""

    COLUMNS = ("check", "legacy", "new", "delta", "verdict")
    # an A/B pair's rows (suites/perf, --qnn-ab) put A where legacy goes and B where new goes
    HEADERS = ("check", "legacy / A", "new / B", "delta", "verdict")

    def __init__(self) -> None:
        self.rows: list[dict[str, str]] = []

    def add(self, checks: Iterable[Check], prefix: str = "") -> None:
        for c in checks:
            row = c.row()
            row["check"] = f"{prefix}{row['check']}"
            if row not in self.rows:
                self.rows.append(row)

    def merge(self, rows: Iterable[dict[str, str]]) -> None:
        for row in rows:
            if row not in self.rows:
                self.rows.append(dict(row))

    def to_dicts(self) -> list[dict[str, str]]:
        return [dict(r) for r in self.rows]

    def format(self, max_width: int = 48, check_width: int = 80) -> list[str]:
        # the verdict is never cut: a tolerance's reason is part of it
        width = {"check": check_width, "verdict": None}
        cells = [[r[c][:width.get(c, max_width)] for c in self.COLUMNS] for r in self.rows]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.HEADERS)]

        def line(vals: Sequence[str]) -> str:
            return "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()
        return [line(self.HEADERS), line(["-" * w for w in widths])] + [line(r) for r in cells]


# -- program signatures -------------------------------------------------------------------------
@dataclass(frozen=True)
class Signature:
    """Methods, IO (dtype, shape) of the graph methods, and constant-method values of a .pte."""

    methods: tuple[str, ...]
    io: dict[str, dict[str, list[tuple[str, tuple[int, ...]]]]]
    constants: dict[str, Json]
    size_bytes: int


def program_signature(pte: Path | str) -> Signature:
    """Read a .pte's signature through the host runner's process-wide program cache, the same
    load :class:`~pytest_qnn_genai.runtime.host_runner.HybridRunner` uses (a QNN .pte must not be
    loaded through two code paths in one process). Graph methods are not loaded here."""
    from pytest_qnn_genai.runtime import programs
    from pytest_qnn_genai.runtime.pte_info import constant_values, dtype_name

    pte = Path(pte)
    program = programs.load(pte)[0].program
    io: dict[str, dict[str, list[tuple[str, tuple[int, ...]]]]] = {}
    for name in sorted(program.method_names):
        meta = program.metadata(name)
        if meta.num_inputs() == 0:
            continue
        io[name] = {
            "inputs": [(dtype_name(meta.input_tensor_meta(i).dtype()),
                        tuple(int(s) for s in meta.input_tensor_meta(i).sizes()))
                       for i in range(meta.num_inputs())],
            "outputs": [(dtype_name(meta.output_tensor_meta(i).dtype()),
                         tuple(int(s) for s in meta.output_tensor_meta(i).sizes()))
                        for i in range(meta.num_outputs())]}
    return Signature(tuple(sorted(program.method_names)), io, constant_values(program),
                     pte.stat().st_size)


def _close(a: Json, b: Json, rtol: float) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=0.0)
    return bool(a == b)  # integers, bools, strings: exact


def compare_signatures(legacy: Signature, new: Signature,
                       scale_rtol: float = SCALE_RTOL) -> list[Check]:
    """Method names, graph-method IO (count, shapes, dtypes) and constant values."""
    checks = [Check("method names", f"{len(legacy.methods)} methods", f"{len(new.methods)} methods",
                    ok=legacy.methods == new.methods, judge=SAME, name="method_names",
                    detail=f"only legacy: {sorted(set(legacy.methods) - set(new.methods))}\n"
                           f"only new: {sorted(set(new.methods) - set(legacy.methods))}")]
    for m in GRAPH_METHODS:
        a, b = legacy.io.get(m), new.io.get(m)
        if a is None or b is None:
            checks.append(Check(f"{m} IO", a is not None, b is not None, ok=False,
                                detail=f"{m} missing", judge=SAME, name=f"{m}_io"))
            continue
        for side in ("inputs", "outputs"):
            diffs = [f"{side}[{i}]: legacy {x} new {y}"
                     for i, (x, y) in enumerate(zip(a[side], b[side])) if x != y]
            n_a, n_b = len(a[side]), len(b[side])
            checks.append(Check(f"{m} {side} (count/shape/dtype)", n_a, n_b,
                                delta=f"{len(diffs)} differ", ok=n_a == n_b and not diffs,
                                detail="\n".join(diffs[:10]), judge=SAME, name=f"{m}_{side}"))
    bad, n = [], 0
    for name in sorted(set(legacy.constants) | set(new.constants)):
        a, b = legacy.constants.get(name), new.constants.get(name)
        n += 1
        if not _close(a, b, scale_rtol):
            bad.append(f"{name}: legacy {a} new {b}")
    checks.append(Check("constant methods (ints exact, scales rtol "
                        f"{scale_rtol:g})", f"{len(legacy.constants)}", f"{len(new.constants)}",
                        delta=f"{len(bad)} differ", ok=not bad, detail="\n".join(bad),
                        judge=f"same as legacy (ints exact, scales rtol {scale_rtol:g})",
                        name="constant_methods"))
    for name in ("get_logits_scale", "get_logits_zero_point"):
        a, b = legacy.constants.get(name), new.constants.get(name)
        if a is not None and b is not None:
            checks.append(Check(name, a, b, delta=(b - a) / a if a else b - a,
                                ok=_close(a, b, scale_rtol), judge=f"legacy's, rtol {scale_rtol:g}",
                                name=name))
    return checks


def _leaves(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def compare_compile_options(legacy: dict[str, object], new: dict[str, object]) -> list[Check]:
    """The QNN compile options both programs carry (read from each .pte): one check that they are
    identical, naming every option that differs."""
    a, b = _leaves(legacy), _leaves(new)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>"))
    detail = "\n".join(f"{k}: legacy {a.get(k, '<absent>')!r} new {b.get(k, '<absent>')!r}"
                       for k in differ)
    return [Check(f"QNN compile options ({len(a)} fields)", len(a), len(b),
                  f"{len(differ)} differ", ok=not differ and bool(a), detail=detail, judge=SAME,
                  name="qnn_compile_options")]


def compare_pte(legacy: Path | str, new: Path | str,
                tolerance: ParityTolerance = EXACT) -> list[Check]:
    """Two builds' ``.pte`` files: their bytes (:func:`pte_sha256`) and their size
    (:func:`pte_size`), two rows; equal sizes are not identical programs."""
    diff = program_bytes.compare(legacy, new, labels=("legacy", "new"))
    return [pte_sha256(diff, tolerance), pte_size(*diff.sizes, tolerance)]


def pte_sha256(diff: ProgramDiff, tolerance: ParityTolerance = EXACT) -> Check:
    """Two builds' ``.pte`` bytes (:func:`pytest_qnn_genai.checks.program_bytes.compare`):
    identical sha256 digests (the QNN blobs' build stamps aside), or a failure whose detail names
    each part that differs. Under a
    case's reasoned ``tolerance`` the row is shown (info), judged by nothing: only its size is."""
    digests = [f"legacy sha256 {diff.sha256[0]} ({diff.sizes[0]} B)",
               f"new    sha256 {diff.sha256[1]} ({diff.sizes[1]} B)"]
    n = len(diff.parts)
    delta = "identical" if diff.identical else f"{n} {'part differs' if n == 1 else 'parts differ'}"
    detail = "\n".join(digests + list(diff.parts))
    short = (diff.sha256[0][:16], diff.sha256[1][:16])
    if tolerance.exact:
        return Check(".pte bytes (sha256)", *short, delta, ok=diff.identical, detail=detail,
                     judge="byte-identical to legacy's", name="pte_sha256", rule=figures.EQUAL)
    return Check(".pte bytes (sha256)", *short, delta, detail=detail, info=True,
                 name="pte_sha256", tolerance=tolerance.reason)


def pte_size(legacy_bytes: int, new_bytes: int, tolerance: ParityTolerance = EXACT) -> Check:
    """Two builds' ``.pte`` byte counts: equal (two builds of one recipe measure the same size),
    or, under a case's reasoned ``tolerance``, within :data:`PTE_SIZE_RTOL`. Equal counts say
    nothing of the bytes: :func:`pte_sha256` judges those."""
    delta = (new_bytes - legacy_bytes) / legacy_bytes
    if tolerance.exact:
        return Check(".pte size (equal)", legacy_bytes, new_bytes,
                     f"{new_bytes - legacy_bytes:+d} B ({delta:+.2%})", ok=new_bytes == legacy_bytes,
                     judge="the same byte count as legacy's", name="pte_bytes", bound=legacy_bytes,
                     rule=figures.EQUAL, better=figures.LOWER)
    return Check(f".pte size (within {PTE_SIZE_RTOL:.0%})", legacy_bytes, new_bytes, f"{delta:+.2%}",
                 ok=abs(delta) <= PTE_SIZE_RTOL,
                 judge=f"within {PTE_SIZE_RTOL:.0%} of legacy (case tolerance: {tolerance.reason})",
                 name="pte_bytes", better=figures.LOWER, tolerance=tolerance.reason)


# -- outputs on the target ------------------------------------------------------------------------
def bits_differ(legacy: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per element of two equally shaped arrays: whether their bits differ (a NaN equals the same
    NaN, 0.0 differs from -0.0: bit equality, not float equality)."""
    a, b = np.ascontiguousarray(legacy), np.ascontiguousarray(new)
    if a.dtype != b.dtype:
        return np.asarray(a != b)
    bytes_a = a.view(np.uint8).reshape(*a.shape, a.dtype.itemsize)
    bytes_b = b.view(np.uint8).reshape(*b.shape, b.dtype.itemsize)
    return np.asarray((bytes_a != bytes_b).any(axis=-1))


def first_difference(legacy: np.ndarray, new: np.ndarray) -> tuple[int, str]:
    """How many values of two arrays differ, and a line saying where the first one is (row,
    column), both its values, the max |diff| and the SQNR (``(0, "")`` when bit-equal)."""
    a, b = np.asarray(legacy), np.asarray(new)
    if a.shape != b.shape:
        return max(a.size, b.size), f"shapes differ: legacy {a.shape} new {b.shape}"
    differ = bits_differ(a, b)
    count = int(differ.sum())
    if not count:
        return 0, ""
    at = tuple(int(i) for i in np.argwhere(differ)[0])
    where = f"step {at[0]}, vocab index {at[1]}" if len(at) == 2 else f"index {at}"
    return count, (f"first at {where}: legacy {a[at].item()!r} new {b[at].item()!r}; {count} of "
                   f"{differ.size} values differ, max |diff| {numerics.max_abs(a, b):.6g}, "
                   f"SQNR {numerics.sqnr_db(a, b):.3f} dB")


def compare_logits(legacy: np.ndarray, new: np.ndarray, tolerance: ParityTolerance = EXACT,
                   what: str = "logits", name: str = "") -> list[Check]:
    """Two flows' logits of the same inputs (``[rows, vocab]``): bit-equal, or, under a case's
    ``tolerance``, the min per-row cosine and the SQNR above its floors (the rest shown).
    ``what`` labels the rows, ``name`` prefixes the figures' names."""
    la, lb = np.asarray(legacy), np.asarray(new)
    n = len(la)
    changed, differ = first_difference(la, lb)
    sqnr = numerics.sqnr_db(la, lb) if la.shape == lb.shape else -math.inf
    why = f" (case tolerance: {tolerance.reason})" if tolerance.reason else ""
    if tolerance.min_logits_sqnr_db is None and tolerance.min_row_cosine is None:
        size = (f"max |diff| {numerics.max_abs(la, lb):.3g}, SQNR {sqnr:.1f} dB"
                if changed and la.shape == lb.shape else "")
        return [Check(f"{what} values that differ (of {n} rows)", "", changed, size,
                      ok=not changed, detail=differ,
                      judge="bit-equal to legacy's", name=f"{name}logits_values_differing",
                      bound=0, rule=figures.EQUAL, better=figures.LOWER),
                Check(f"{what} SQNR dB", "ref", sqnr, info=True, name=f"{name}sqnr_db",
                      better=figures.HIGHER)]
    # a case's tolerance: floors on what it names, the rest shown
    cos = float(numerics.rowwise_cosine(la, lb).min()) if la.shape == lb.shape else -1.0
    min_cos, min_db = tolerance.min_row_cosine, tolerance.min_logits_sqnr_db
    return [Check(f"{what} per-row cosine (min, {n} rows)", "ref", cos,
                  "" if min_cos is None else f"floor {min_cos:g}",
                  ok=min_cos is None or cos >= min_cos, info=min_cos is None,
                  detail=differ, judge="" if min_cos is None else f"≥ {min_cos:g}{why}",
                  name=f"{name}min_row_cosine", bound=min_cos, tolerance=tolerance.reason,
                  rule="" if min_cos is None else figures.AT_LEAST, better=figures.HIGHER),
            Check(f"{what} SQNR dB", "ref", sqnr, "" if min_db is None else f"floor {min_db:g}",
                  ok=min_db is None or sqnr >= min_db, info=min_db is None, detail=differ,
                  judge="" if min_db is None else f"≥ {min_db:g} dB{why}", name=f"{name}sqnr_db",
                  bound=min_db, rule="" if min_db is None else figures.AT_LEAST,
                  better=figures.HIGHER, tolerance=tolerance.reason)]


def compare_runs(legacy: RunResult, new: RunResult, tolerance: ParityTolerance = EXACT,
                 require_same_tokens: bool = True) -> list[Check]:
    """Two ``RunResult``s of the same prompt: the dequantized logits of every step up to (and
    including) the first divergent token (:func:`compare_logits`: bit-equal unless a case's
    ``tolerance`` says otherwise), and the greedy tokens."""
    a, b = list(legacy.tokens), list(new.tokens)
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    n = min(same + 1, len(a), len(b))
    checks = compare_logits(np.asarray(legacy.logits)[:n], np.asarray(new.logits)[:n], tolerance)
    tok = Check("greedy tokens", f"{len(a)} tokens", f"{len(b)} tokens",
                "identical" if a == b else f"first differs at step {same}",
                ok=a == b or not require_same_tokens,
                detail="" if a == b else f"legacy {a[same:same + 8]}\nnew    {b[same:same + 8]}",
                judge="identical to legacy's" if require_same_tokens else "",
                info=not require_same_tokens, name="greedy_tokens", rule=figures.EQUAL)
    return checks + [tok]
