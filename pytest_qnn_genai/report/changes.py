"""What moved between two runs: figures beyond noise and verdicts that flipped.

A speed figure (a rate or a duration) moved when its speed-up leaves the ``--qnn-perf-noise`` band
(:func:`pytest_qnn_genai.report.diff.compare`); any other number (SQNR, agreement, cosine, bytes)
is deterministic for a given build, so it moved when it differs by more than
:data:`ACCURACY_NOISE` (relative). A verdict that changed is always listed, whatever the value
did. Figures are matched by model, target, suite and name (the latest record of a key wins).
"""
from __future__ import annotations

from dataclasses import dataclass

from pytest_qnn_genai import text
from pytest_qnn_genai.figures import HIGHER, LOWER, Figure, Scalar
from pytest_qnn_genai.report.diff import NOISE, FigureDiff, compare
from pytest_qnn_genai.report.results import KINDS, ResultsFile, rate_or_time

ACCURACY_NOISE = 1e-3  # relative: rounding of the recorded figures, not a tolerance
MoveKey = tuple[str, str, str, str]  # (model, target, suite, figure name)


@dataclass(frozen=True)
class Move:
    """One figure in two runs, and what its change was."""

    model: str
    target: str
    kind: str
    figure: str
    previous: Scalar
    current: Scalar
    change: str  # "≥1.2x slower", "+0.52 (better)", "pass → fail", ...
    verdict: str  # the current verdict
    moved: bool  # beyond noise, or its verdict changed

    @property
    def key(self) -> MoveKey:
        return (self.model, self.target, self.kind, self.figure)


def _latest(run: ResultsFile) -> dict[MoveKey, Figure]:
    return {(r.model, r.target, r.kind, f.name): f for r, f in run.figures()}


def _numeric_change(prev: Figure, cur: Figure) -> tuple[str, bool]:
    a, b = prev.number, cur.number
    if a is None or b is None:
        same = prev.value == cur.value
        return ("same" if same else f"{text.cell(prev.value)} → {text.cell(cur.value)}"), not same
    delta = b - a
    if a == b:
        return "same", False
    if abs(delta) <= ACCURACY_NOISE * max(abs(a), abs(b)):
        return NOISE, False
    word = ""
    if cur.better in (HIGHER, LOWER):
        word = " (better)" if (delta > 0) == (cur.better == HIGHER) else " (worse)"
    return f"{delta:+.4g}{word}", True


def moves(current: ResultsFile, previous: ResultsFile, noise: float) -> list[Move]:
    """Every figure present in both runs with its change (``moved`` says whether to list it)."""
    speed: dict[tuple[str, str, str], FigureDiff] = {
        d.key: d for d in compare(current.perf_figures(KINDS), previous.perf_figures(KINDS),
                                  noise)}
    before, now = _latest(previous), _latest(current)
    out = []
    for key in [k for k in now if k in before]:
        prev, cur = before[key], now[key]
        model, target, _kind, name = key
        if (cur.number is not None and rate_or_time(name, cur.number)
                and (model, target, name) in speed):
            d = speed[(model, target, name)]
            change, moved = d.bucket, d.bucket != NOISE
        else:
            change, moved = _numeric_change(prev, cur)
        if prev.verdict != cur.verdict:
            change, moved = f"{change}; {prev.verdict} → {cur.verdict}", True
        out.append(Move(*key, prev.value, cur.value, change, cur.verdict, moved))
    return out

