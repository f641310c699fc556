"""The A/B gate: two builds run interleaved in one session, judged by their paired ratios.

:func:`interleave` runs A and B in adjacent pairs (A B, B A, ...), so each pair sees the same
machine. :func:`relative_gate` takes the per-pair ratios ``b_i / a_i`` and judges their median
with a distribution-free confidence interval (order statistics of the ratios, binomial ranks): B
passes only when the interval's lower bound is at or above the floor, fails when its upper bound
is below it, and is *inconclusive* otherwise. :func:`ab_gate` runs more pairs while a figure is
inconclusive (or rests on too little work), up to the round cap; still inconclusive there, it
fails and says so: a gate that could not tell is never a pass.

Measured hazard (2 shared cores, stories260k, identical legacy and new programs): per-round
decode rates jumped between ~11.5 and ~17 tok/s with nothing else of ours running; a CI run's
median(B)/median(A) over 7 rounds came out 0.887 against the 0.9 floor, a false fail. Under a
bursty CPU hog the paired decode ratios of identical programs spread 0.50..1.67 over 15 pairs: no
estimator is reliable there, which is why the gate reports inconclusive instead of guessing.
Process CPU time is no remedy: the runtime's threads spin, it measured noisier than wall time.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_qnn_genai.perf.minimum import GATED

if TYPE_CHECKING:
    from pytest_qnn_genai.perf.benchmark import Generate, Minimum
    from pytest_qnn_genai.runtime.result import PerfStats

CONFIDENCE = 0.95  # one-sided, for each of the two bounds


def median_bounds(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free one-sided bounds on the median of ``values``: the k-th smallest and k-th
    largest, k the largest rank with P(Binomial(n, 1/2) < k) <= 1 - confidence. With too few
    values for any bound (n < 5 at 95 %) the bounds are (0, inf)."""
    n, alpha = len(values), 1.0 - confidence
    k, tail = 0, 0.0
    while k < n and tail + math.comb(n, k) / 2 ** n <= alpha:
        tail += math.comb(n, k) / 2 ** n
        k += 1
    if k == 0:
        return 0.0, math.inf
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def least_pairs(confidence: float = CONFIDENCE) -> int:
    """The fewest paired rounds for which :func:`median_bounds` gives a bound (5 at 95 %)."""
    n = 1
    while 0.5 ** n > 1.0 - confidence:
        n += 1
    return n


@dataclass(frozen=True)
class GateVerdict:
    """The outcome of an A/B gate on rates: ``ratio`` is the median of the paired ratios
    ``b_i / a_i``, ``low``/``high`` its one-sided confidence bounds."""

    ratio: float
    low: float
    high: float
    floor: float
    median_a: float
    median_b: float
    rounds: int

    @property
    def state(self) -> str:
        """``pass`` (low bound >= floor), ``fail`` (high bound < floor) or ``inconclusive``."""
        if self.low >= self.floor:
            return "pass"
        return "fail" if self.high < self.floor else "inconclusive"

    @property
    def passed(self) -> bool:
        return self.state == "pass"

    def __str__(self) -> str:
        high = "inf" if math.isinf(self.high) else f"{self.high:.3f}"
        text = (f"B/A = {self.ratio:.3f} (median of {self.rounds} paired rounds, "
                f"{CONFIDENCE:.0%} bounds {self.low:.3f}..{high}; median B {self.median_b:.4g}, "
                f"median A {self.median_a:.4g}) vs floor {self.floor:g}: ")
        if self.state == "inconclusive":
            return text + ("INCONCLUSIVE: the rounds spread too much to tell (a busy machine); "
                           "rerun on a quieter one or raise --qnn-perf-rounds")
        return text + ("pass" if self.passed else "FAIL")


def relative_gate(a_figures: Sequence[float], b_figures: Sequence[float],
                  floor: float = 0.9, confidence: float = CONFIDENCE) -> GateVerdict:
    """Judge candidate B against reference A from paired per-round rates (higher is better)."""
    if not a_figures or len(a_figures) != len(b_figures):
        raise ValueError(f"relative_gate: need equal, non-empty round lists, got {len(a_figures)} "
                         f"A and {len(b_figures)} B figures")
    bad = [v for v in (*a_figures, *b_figures) if not (math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"relative_gate: rates must be positive and finite, got {bad[0]!r}")
    ratios = [b / a for a, b in zip(a_figures, b_figures)]
    low, high = median_bounds(ratios, confidence)
    return GateVerdict(statistics.median(ratios), low, high, floor,
                       statistics.median(a_figures), statistics.median(b_figures), len(ratios))


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


@dataclass(frozen=True)
class Contender:
    """One side of an A/B comparison."""

    name: str
    generate: Generate


@dataclass
class ABOutcome:
    """Interleaved rounds of A and B and the gate verdict per rate figure (paired B/A ratios)."""

    a: str
    b: str
    a_rounds: list[PerfStats]
    b_rounds: list[PerfStats]
    verdicts: dict[str, GateVerdict]
    shortfall: list[str]

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts.values())

    def failures(self) -> list[str]:
        return [f"{self.b} vs {self.a} {fig}: {v}" for fig, v in self.verdicts.items()
                if not v.passed]

    def values(self) -> dict[str, Any]:
        """Ratios with their bounds and both sides' medians (what an A/B perf record stores)."""
        out: dict[str, Any] = {"rounds": len(self.a_rounds)}
        for fig, v in self.verdicts.items():
            out |= {f"{fig}_ratio": round(v.ratio, 4), f"{fig}_ratio_low": round(v.low, 4),
                    f"{fig}_ratio_high": round(v.high, 4) if math.isfinite(v.high) else None,
                    f"{fig}_verdict": v.state, f"{self.a}_{fig}": v.median_a,
                    f"{self.b}_{fig}": v.median_b}
        return out


def _verdicts(a_stats: Sequence[PerfStats], b_stats: Sequence[PerfStats],
              floor: float) -> dict[str, GateVerdict]:
    return {fig: relative_gate([getattr(s, fig) for s in a_stats],
                               [getattr(s, fig) for s in b_stats], floor) for fig in GATED}


def ab_gate(a: Contender, b: Contender, rounds: int, floor: float, minimum: Minimum,
            warmup: int = 1) -> ABOutcome:
    """Run A B, B A, ... (``warmup`` discarded pairs, ``rounds`` pairs, then one more pair at a
    time while a side misses ``minimum`` or a figure's verdict is inconclusive, up to
    ``minimum.max_rounds`` pairs, never fewer than :func:`least_pairs`) and gate B/A on each
    rate."""
    a_stats: list[PerfStats] = []
    b_stats: list[PerfStats] = []

    def run(c: Contender, into: list[PerfStats]) -> float:
        into.append(c.generate())
        return into[-1].decode_tok_s

    interleave(lambda: run(a, a_stats), lambda: run(b, b_stats), rounds, warmup)
    a_stats, b_stats = a_stats[warmup:], b_stats[warmup:]
    verdicts = _verdicts(a_stats, b_stats, floor)
    while ((minimum.shortfall(a_stats) or minimum.shortfall(b_stats)
            or any(v.state == "inconclusive" for v in verdicts.values()))
           and len(a_stats) < max(minimum.max_rounds, least_pairs())):
        first, second = ((b, b_stats), (a, a_stats)) if len(a_stats) % 2 else (
            (a, a_stats), (b, b_stats))  # keep the ABBA order going
        interleave(lambda f=first: run(*f), lambda s=second: run(*s), 1, 0)
        verdicts = _verdicts(a_stats, b_stats, floor)
    return ABOutcome(a.name, b.name, a_stats, b_stats, verdicts,
                     minimum.shortfall(a_stats) + minimum.shortfall(b_stats))
