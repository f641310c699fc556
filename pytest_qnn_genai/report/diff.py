"""Performance deltas between two runs, bucketed like qai-hub-models' perf diff.

``compare`` takes figures keyed by ``(model, target id, figure name)``. Its ``ratio`` is a
speed-up: ``current / previous`` for rates (``*tok_s``), ``previous / current`` for times
(``*_s``, ``*_ms``), so ``ratio > 1`` always means faster.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_qnn_genai import text
from pytest_qnn_genai.figures import HIGHER, direction

FigureKey = tuple[str, str, str]  # (model, target id, figure name)
THRESHOLDS = (1.1, 1.2, 1.5, 2.0, 5.0, 10.0)  # plus ∞: a figure started or stopped working
STARTED = "started working"
STOPPED = "stopped working"
NOISE = "within noise"


def higher_is_better(figure: str) -> bool:
    """True for rates (``*tok_s``, ``*_per_s``), False for durations (``*_s``, ``*_ms``)."""
    better = direction(figure)
    if better is not None:
        return better == HIGHER
    raise ValueError(f"figure {figure!r}: unknown direction (rates end in 'tok_s', "
                     "durations in '_s' or '_ms')")


def speedup(figure: str, current: float, previous: float) -> float:
    """How many times faster ``current`` is than ``previous`` (both positive)."""
    return current / previous if higher_is_better(figure) else previous / current


def bucket(ratio: float, noise: float) -> str:
    """The label of a speed-up: ``"≥1.5x faster"``, ``"within noise"``, ``"≥2x slower"``, ...

    A change is noise when the factor (``ratio`` or ``1/ratio``) is below ``1 + noise``.
    ``inf`` and ``0`` mean the figure started or stopped working.
    """
    if math.isinf(ratio):
        return STARTED
    if ratio <= 0:
        return STOPPED
    factor, word = (ratio, "faster") if ratio >= 1 else (1 / ratio, "slower")
    if factor == 1 or factor < 1 + noise:
        return NOISE
    reached = [t for t in THRESHOLDS if factor >= t]
    return f"≥{reached[-1]:g}x {word}" if reached else f"<{THRESHOLDS[0]:g}x {word}"


@dataclass(frozen=True)
class FigureDiff:
    """One figure in two runs. ``None`` or a non-positive value means the figure failed."""

    model: str
    target: str
    figure: str
    previous: float | None
    current: float | None
    ratio: float  # speed-up, > 1 is faster; inf = started working, 0 = stopped working
    bucket: str

    @property
    def key(self) -> FigureKey:
        return (self.model, self.target, self.figure)


def _ok(value: float | None) -> bool:
    return value is not None and value > 0


def compare(current: Mapping[FigureKey, float | None], previous: Mapping[FigureKey, float | None],
            noise: float) -> list[FigureDiff]:
    """Diffs of every figure present in both runs, sorted by key (both-failed figures skipped)."""
    diffs = []
    for key in sorted(current.keys() & previous.keys()):
        cur, prev = current[key], previous[key]
        if cur is not None and prev is not None and cur > 0 and prev > 0:
            ratio = speedup(key[2], cur, prev)
        elif _ok(cur):
            ratio = math.inf
        elif _ok(prev):
            ratio = 0.0
        else:
            continue
        diffs.append(FigureDiff(*key, previous=prev, current=cur, ratio=ratio,
                                bucket=bucket(ratio, noise)))
    return diffs


def _ratio(ratio: float) -> str:
    return "∞" if math.isinf(ratio) else f"{ratio:.2f}x"


def render_table(diffs: Sequence[FigureDiff]) -> str:
    """A markdown table of the diffs (a one-line note when there are none)."""
    if not diffs:
        return "_No figures to show._\n"
    lines = ["| model | target | figure | previous | current | speed-up | change |",
             "|---|---|---|---:|---:|---:|---|"]
    lines += [f"| {d.model} | {d.target} | {d.figure} | {text.number(d.previous)} "
              f"| {text.number(d.current)} | {_ratio(d.ratio)} | {d.bucket} |" for d in diffs]
    return "\n".join(lines) + "\n"
