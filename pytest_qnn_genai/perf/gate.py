"""The A/B gate: two builds run interleaved in one session, judged by the ratio of medians.

:func:`relative_gate` judges a candidate B against a reference A measured in the same session in
interleaved rounds (see :func:`interleave`). It uses the ratio of medians: on a shared machine a
round can be hit by an unrelated burst of load, and a median ignores such a round where a mean is
dragged by it; interleaving makes slow drift (thermal, other jobs) hit A and B alike.
:func:`ab_gate` runs two contenders that way until both meet the minimum work.
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


@dataclass(frozen=True)
class Contender:
    """One side of an A/B comparison."""

    name: str
    generate: Generate


@dataclass
class ABOutcome:
    """Interleaved rounds of A and B and the gate verdict per rate figure (B/A medians)."""

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
        """Ratios and both sides' medians (what an A/B perf record stores)."""
        out: dict[str, Any] = {"rounds": len(self.a_rounds)}
        for fig, v in self.verdicts.items():
            out |= {f"{fig}_ratio": round(v.ratio, 4), f"{self.a}_{fig}": v.median_a,
                    f"{self.b}_{fig}": v.median_b}
        return out


def ab_gate(a: Contender, b: Contender, rounds: int, floor: float, minimum: Minimum,
            warmup: int = 1) -> ABOutcome:
    """Run A B, B A, ... (``warmup`` discarded pairs, ``rounds`` pairs, then more pairs until both
    sides meet ``minimum``, bounded by ``minimum.max_rounds``) and gate B/A on each rate."""
    a_stats: list[PerfStats] = []
    b_stats: list[PerfStats] = []

    def run(c: Contender, into: list[PerfStats]) -> float:
        into.append(c.generate())
        return into[-1].decode_tok_s

    interleave(lambda: run(a, a_stats), lambda: run(b, b_stats), rounds, warmup)
    a_stats, b_stats = a_stats[warmup:], b_stats[warmup:]
    while ((minimum.shortfall(a_stats) or minimum.shortfall(b_stats))
           and len(a_stats) < minimum.max_rounds):
        first, second = ((b, b_stats), (a, a_stats)) if len(a_stats) % 2 else (
            (a, a_stats), (b, b_stats))  # keep the ABBA order going
        interleave(lambda f=first: run(*f), lambda s=second: run(*s), 1, 0)
    verdicts = {fig: relative_gate([getattr(s, fig) for s in a_stats],
                                   [getattr(s, fig) for s in b_stats], floor) for fig in GATED}
    return ABOutcome(a.name, b.name, a_stats, b_stats, verdicts,
                     minimum.shortfall(a_stats) + minimum.shortfall(b_stats))
