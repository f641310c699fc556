"""Performance deltas between two runs (bucketed like qai-hub-models' perf diff) and A/B gates.

``compare`` takes figures keyed by ``(model, target id, figure name)``. Its ``ratio`` is a
speed-up: ``current / previous`` for rates (``*tok_s``), ``previous / current`` for times
(``*_s``, ``*_ms``), so ``ratio > 1`` always means faster.

``relative_gate`` judges a candidate B against a reference A measured in the same session in
interleaved rounds (see :func:`interleave`). It uses the ratio of medians: on a shared machine a
round can be hit by an unrelated burst of load, and a median ignores such a round where a mean is
dragged by it; interleaving makes slow drift (thermal, other jobs) hit A and B alike.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

FigureKey = tuple[str, str, str]  # (model, target id, figure name)
THRESHOLDS = (1.1, 1.2, 1.5, 2.0, 5.0, 10.0)  # plus ∞: a figure started or stopped working
DEFAULT_NOISE = 0.10
STARTED = "started working"
STOPPED = "stopped working"
NOISE = "within noise"


def higher_is_better(figure: str) -> bool:
    """True for rates (``*tok_s``, ``*_per_s``), False for durations (``*_s``, ``*_ms``)."""
    if figure.endswith(("tok_s", "_per_s")):
        return True
    if figure.endswith(("_s", "_ms")):
        return False
    raise ValueError(f"figure {figure!r}: unknown direction (rates end in 'tok_s', "
                     "durations in '_s' or '_ms')")


def speedup(figure: str, current: float, previous: float) -> float:
    """How many times faster ``current`` is than ``previous`` (both positive)."""
    return current / previous if higher_is_better(figure) else previous / current


def bucket(ratio: float, noise: float = DEFAULT_NOISE) -> str:
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
            noise: float = DEFAULT_NOISE) -> list[FigureDiff]:
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


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _ratio(ratio: float) -> str:
    return "∞" if math.isinf(ratio) else f"{ratio:.2f}x"


def render_table(diffs: Sequence[FigureDiff]) -> str:
    """A markdown table of the diffs (a one-line note when there are none)."""
    if not diffs:
        return "_No figures to show._\n"
    lines = ["| model | target | figure | previous | current | speed-up | change |",
             "|---|---|---|---:|---:|---:|---|"]
    lines += [f"| {d.model} | {d.target} | {d.figure} | {_num(d.previous)} | {_num(d.current)} "
              f"| {_ratio(d.ratio)} | {d.bucket} |" for d in diffs]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class GateVerdict:
    """The outcome of an A/B gate on rates: ``ratio = median(B) / median(A)``."""

    ratio: float
    floor: float
    median_a: float
    median_b: float
    rounds: int

    @property
    def passed(self) -> bool:
        return self.ratio >= self.floor

    def __str__(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        return (f"B/A = {self.ratio:.3f} (median B {self.median_b:.4g}, median A "
                f"{self.median_a:.4g}, {self.rounds} rounds) vs floor {self.floor:g}: {verdict}")


def relative_gate(a_figures: Sequence[float], b_figures: Sequence[float],
                  floor: float = 0.9) -> GateVerdict:
    """Judge candidate B against reference A from per-round rates (higher is better)."""
    if not a_figures or len(a_figures) != len(b_figures):
        raise ValueError(f"relative_gate: need equal, non-empty round lists, got {len(a_figures)} "
                         f"A and {len(b_figures)} B figures")
    bad = [v for v in (*a_figures, *b_figures) if not (math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"relative_gate: rates must be positive and finite, got {bad[0]!r}")
    med_a, med_b = statistics.median(a_figures), statistics.median(b_figures)
    return GateVerdict(med_b / med_a, floor, med_a, med_b, len(a_figures))


def interleave(run_a: Callable[[], float], run_b: Callable[[], float], rounds: int,
               warmup: int = 1) -> tuple[list[float], list[float]]:
    """Alternate A and B: ``warmup`` discarded pairs, then ``rounds`` recorded pairs.

    Recorded pairs run in ABBA order (A B, B A, A B, ...), so neither contender always runs
    second (right after the other warmed or cooled the caches): order effects cancel and slow
    drift of the machine hits both alike.
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"interleave: need rounds >= 1 and warmup >= 0, got rounds={rounds} "
                         f"warmup={warmup}")
    for _ in range(warmup):
        run_a()
        run_b()
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        if i % 2:
            b.append(run_b())
            a.append(run_a())
        else:
            a.append(run_a())
            b.append(run_b())
    return a, b
