"""The A/B gate: two builds measured side by side in one session, judged by their paired ratios.

A *pairing* runs one round of A and B next to each other and returns a :class:`PairedRound`: each
side's figures and, per gated figure, the round's B/A rate ratio. :class:`Interleaved` pairs two
whole generations (A's round, then B's). :func:`ab_gate` alternates the order (A B, B A, ...), and
:func:`relative_gate` judges the median of the rounds' ratios with a distribution-free
confidence interval (order statistics of the ratios, binomial ranks): B passes only when the
interval's lower bound is at or above the floor, fails when its upper bound is below it, and is
*inconclusive* otherwise. :func:`ab_gate` runs more rounds while a figure is inconclusive (or
rests on too little work), up to the round cap; still inconclusive there, it fails and says so:
a gate that could not tell is never a pass.

The hazard (shared cores): per-round rates jump by tens of percent with nothing else of ours
running, so the paired ratios of identical programs can spread wider than the noise band:
inconclusive at the cap, a false fail; a bursty CPU hog spreads them further, and process CPU
time is no remedy (the runtime's threads spin). So this gate judges only where wall time is the
question, upstream's runners and phones; the emulator's speed is its counted work
(:mod:`pytest_qnn_genai.perf.work`), which does not move run to run.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_qnn_genai.figures import HIGHER, RATIO, Figure
from pytest_qnn_genai.perf.minimum import GATED, shortfall_figures

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

    @property
    def judge(self) -> str:
        """The rule this verdict applies, in words (``B/A ≥ 0.97 at 95 %``)."""
        return f"B/A ≥ {self.floor:g} at {CONFIDENCE:.0%}"

    def figure(self, name: str, a: str, b: str) -> Figure:
        """This verdict as the run report's row: B/A, its bounds, the floor, the rounds, the
        verdict (``inconclusive`` stays so: a failure that says it could not tell)."""
        return Figure(
            f"{name}_ratio", round(self.ratio, 4), self.state, self.judge, RATIO, self.floor,
            HIGHER, label=f"{name} B/A ({b} vs {a})",
            context={"low": round(self.low, 4),
                     "high": round(self.high, 4) if math.isfinite(self.high) else None,
                     "rounds": self.rounds, "confidence": CONFIDENCE, "a": a, "b": b,
                     f"median_{a}": self.median_a, f"median_{b}": self.median_b})

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
                  floor: float = 0.97, confidence: float = CONFIDENCE) -> GateVerdict:
    """Judge candidate B against reference A from paired per-round rates (higher is better)."""
    if not a_figures or len(a_figures) != len(b_figures):
        raise ValueError(f"relative_gate: need equal, non-empty round lists, got {len(a_figures)} "
                         f"A and {len(b_figures)} B figures")
    _check_positive("rates", (*a_figures, *b_figures))
    return ratio_gate([b / a for a, b in zip(a_figures, b_figures)], floor,
                      statistics.median(a_figures), statistics.median(b_figures), confidence)


def ratio_gate(ratios: Sequence[float], floor: float, median_a: float, median_b: float,
               confidence: float = CONFIDENCE) -> GateVerdict:
    """Judge B against A from per-round B/A rate ratios (``median_a``/``median_b``: reported)."""
    if not ratios:
        raise ValueError("ratio_gate: need at least one round's ratio")
    _check_positive("ratios", ratios)
    low, high = median_bounds(ratios, confidence)
    return GateVerdict(statistics.median(ratios), low, high, floor, median_a, median_b,
                       len(ratios))


def _check_positive(what: str, values: Sequence[float]) -> None:
    bad = [v for v in values if not (math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"relative_gate: {what} must be positive and finite, got {bad[0]!r}")


@dataclass(frozen=True)
class Contender:
    """One side of an A/B comparison: a name and its generation."""

    name: str
    generate: Generate


@dataclass(frozen=True)
class PairedRound:
    """One round of A next to B: each side's figures and, per gated figure, the B/A rate ratio."""

    a: PerfStats
    b: PerfStats
    ratios: Mapping[str, float]


class Pairing(Protocol):
    """Runs one round of A and B side by side (``b_first``: B goes first this round)."""

    a: str
    b: str

    def __call__(self, b_first: bool) -> PairedRound: ...


class Interleaved:
    """Whole generations paired: A's round then B's (or B's then A's); a round's ratio is the
    ratio of the two rounds' figures: a phone's qnn_llama_runner runs a whole generation per
    call (module docstring)."""

    def __init__(self, a: Contender, b: Contender) -> None:
        self.a, self.b = a.name, b.name
        self._a, self._b = a.generate, b.generate

    def __call__(self, b_first: bool) -> PairedRound:
        if b_first:
            b = self._b()
            a = self._a()
        else:
            a = self._a()
            b = self._b()
        return PairedRound(a, b, {fig: getattr(b, fig) / getattr(a, fig) for fig in GATED})


@dataclass
class ABOutcome:
    """The recorded rounds of A and B and the gate verdict per rate figure (paired ratios)."""

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

    def figures(self) -> list[Figure]:
        """One row per gated rate (:meth:`GateVerdict.figure`) and one per minimum-work
        shortfall: what an A/B perf record holds."""
        return ([v.figure(fig, self.a, self.b) for fig, v in self.verdicts.items()]
                + shortfall_figures(self.shortfall))


def _verdicts(rounds: Sequence[PairedRound], floor: float) -> dict[str, GateVerdict]:
    return {fig: ratio_gate([r.ratios[fig] for r in rounds], floor,
                            statistics.median(getattr(r.a, fig) for r in rounds),
                            statistics.median(getattr(r.b, fig) for r in rounds))
            for fig in GATED}


def ab_gate(pairing: Pairing, rounds: int, floor: float, minimum: Minimum,
            warmup: int = 1) -> ABOutcome:
    """Run ``warmup`` discarded rounds (A first), then ``rounds`` recorded ones in ABBA order (A
    first, B first, ...), then one more at a time while a side misses ``minimum`` or a figure's
    verdict is inconclusive, up to ``minimum.max_rounds`` (never fewer than
    :func:`least_pairs`); gate B/A on each rate."""
    if rounds < 1 or warmup < 0:
        raise ValueError(f"ab_gate: need rounds >= 1 and warmup >= 0, got rounds={rounds} "
                         f"warmup={warmup}")
    for _ in range(warmup):
        pairing(False)
    done = [pairing(bool(i % 2)) for i in range(rounds)]

    def short() -> list[str]:
        return (minimum.shortfall([r.a for r in done])
                + minimum.shortfall([r.b for r in done]))

    verdicts = _verdicts(done, floor)
    while ((short() or any(v.state == "inconclusive" for v in verdicts.values()))
           and len(done) < max(minimum.max_rounds, least_pairs())):
        done.append(pairing(bool(len(done) % 2)))  # keep the ABBA order going
        verdicts = _verdicts(done, floor)
    return ABOutcome(pairing.a, pairing.b, [r.a for r in done], [r.b for r in done], verdicts,
                     short())
