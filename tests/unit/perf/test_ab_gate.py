"""The A/B gate on a fake clock (whole rounds interleaved), and its confidence bounds against
simulation."""
from __future__ import annotations

import math
import random
import statistics

import pytest

from pytest_qnn_genai.perf.benchmark import Minimum
from pytest_qnn_genai.perf.gate import (
    Contender,
    Interleaved,
    ab_gate,
    least_pairs,
    median_bounds,
    relative_gate,
)
from pytest_qnn_genai.runtime.result import PerfStats

NO_MINIMUM = Minimum(0, 0.0)


class FakeMachine:
    """A deterministic clock; every run costs ``tokens * seconds_per_token * load`` fake seconds."""

    def __init__(self, drift_per_call: float = 0.0) -> None:
        self.now = 0.0
        self.load = 1.0
        self.drift = drift_per_call
        self.calls: list[str] = []

    def runner(self, name: str, seconds_per_token: float, extra_sleep: float = 0.0,
               tokens: int = 100) -> Contender:
        def run() -> PerfStats:
            self.calls.append(name)
            start = self.now
            self.now += tokens * seconds_per_token * self.load + extra_sleep  # fake "sleep"
            self.load += self.drift  # the machine gets slower as it heats up
            rate = tokens / (self.now - start)
            return PerfStats(prompt_tokens=tokens, generated_tokens=tokens + 1, model_load_s=0.0,
                             prefill_tok_s=rate, decode_tok_s=rate, ttft_s=0.0)
        return Contender(name, run)


def _decode(out) -> tuple[list[float], list[float]]:
    return [s.decode_tok_s for s in out.a_rounds], [s.decode_tok_s for s in out.b_rounds]


def test_interleaved_rounds_alternate_after_discarded_warmup() -> None:
    m = FakeMachine()
    out = ab_gate(Interleaved(m.runner("A", 0.001), m.runner("B", 0.001)), rounds=5,
                  floor=0.9, minimum=NO_MINIMUM, warmup=2)
    assert m.calls == ["A", "B"] * 2 + ["A", "B", "B", "A"] * 2 + ["A", "B"]  # warm-up, ABBA
    assert len(out.a_rounds) == len(out.b_rounds) == 5 and out.passed


def test_relative_gate_fails_for_a_slowed_b() -> None:
    m = FakeMachine()
    out = ab_gate(Interleaved(m.runner("A", 0.001), m.runner("B", 0.001, extra_sleep=0.1)),
                  rounds=5, floor=0.9, minimum=NO_MINIMUM)
    verdict = relative_gate(*_decode(out), floor=0.9)
    assert verdict == out.verdicts["decode_tok_s"]
    assert verdict.ratio == pytest.approx(0.5)
    assert not verdict.passed and "FAIL" in str(verdict)


def test_relative_gate_passes_an_equal_b_under_drift() -> None:
    # The machine slows 5 % per call. Interleaved, A and B see the same drift and stay within
    # the floor; run back to back (all A, then all B), B would look about 1.3x slower.
    m = FakeMachine(drift_per_call=0.05)
    out = ab_gate(Interleaved(m.runner("A", 0.001), m.runner("B", 0.001)), rounds=8,
                  floor=0.9, minimum=NO_MINIMUM)
    assert out.passed and relative_gate(*_decode(out), floor=0.9).passed
    m2 = FakeMachine(drift_per_call=0.05)
    a2 = [m2.runner("A", 0.001).generate().decode_tok_s for _ in range(8)]
    b2 = [m2.runner("B", 0.001).generate().decode_tok_s for _ in range(8)]
    assert not relative_gate(a2, b2, floor=0.9).passed


def test_one_disturbed_round_in_ten_does_not_fail_it() -> None:
    a = [1000.0] * 10
    b = [980.0, 990.0, 50.0, 1000.0, 970.0, 990.0, 1010.0, 985.0, 995.0, 975.0]  # one round hit
    verdict = relative_gate(a, b, floor=0.9)
    assert verdict.passed and verdict.ratio == pytest.approx(0.9875)
    assert verdict.low == pytest.approx(0.97)  # the 2nd smallest of 10 ratios
    assert sum(b) / sum(a) < 0.9  # a ratio of means would have failed


def test_too_few_or_too_spread_rounds_are_inconclusive_not_passed() -> None:
    four = relative_gate([100.0] * 4, [100.0] * 4)  # no 95 % bound exists below 5 pairs
    assert (four.state, four.low, four.high) == ("inconclusive", 0.0, math.inf)
    assert not four.passed and "INCONCLUSIVE" in str(four)
    one_hit = relative_gate([1000.0] * 5, [980.0, 990.0, 50.0, 1000.0, 970.0])
    assert one_hit.state == "inconclusive"  # in five pairs the hit round is the lower bound
    # decode B/A of identical programs, 15 pairs measured beside a bursty CPU hog on 2 cores
    hog = [0.499, 0.537, 0.567, 0.59, 0.72, 0.741, 0.79, 0.94, 0.942, 1.087, 1.297, 1.458, 1.51,
           1.52, 1.67]
    spread = relative_gate([10.0] * 15, [10.0 * r for r in hog])
    assert spread.ratio == pytest.approx(0.94) and spread.state == "inconclusive"


def test_a_clearly_slower_b_fails_on_its_high_bound() -> None:
    verdict = relative_gate([10.0] * 7, [7.0, 7.5, 6.8, 8.5, 7.2, 7.1, 6.9])
    assert verdict.state == "fail" and verdict.high == pytest.approx(0.85) and "FAIL" in str(verdict)


@pytest.mark.parametrize("n,rank", [(5, 1), (8, 2), (10, 2), (15, 4), (20, 6)])
def test_median_bounds_take_the_binomial_ranks(n: int, rank: int) -> None:
    # P(Binomial(n, 1/2) < rank) <= 5 % < P(Binomial(n, 1/2) <= rank), from the binomial table
    values = [float(i) for i in range(1, n + 1)]
    assert median_bounds(values) == (float(rank), float(n + 1 - rank))


def test_least_pairs_is_where_a_bound_first_exists() -> None:
    n = least_pairs()
    assert n == 5 and median_bounds([1.0] * (n - 1)) == (0.0, math.inf)
    assert median_bounds([1.0] * n) == (1.0, 1.0) and least_pairs(0.99) == 7


def test_median_bounds_cover_the_true_median_as_promised() -> None:
    # held against simulation, not against the formula: lognormal ratios around a known median
    rng = random.Random(20261202)
    for n in (5, 9, 16, 20):
        trials, low_above, high_below = 4000, 0, 0
        for _ in range(trials):
            sample = [math.exp(rng.gauss(0.0, 0.2)) for _ in range(n)]  # true median 1.0
            low, high = median_bounds(sample)
            low_above += low > 1.0
            high_below += high < 1.0
        assert low_above / trials <= 0.05 + 0.01 and high_below / trials <= 0.05 + 0.01, n
    assert statistics.median([0.5, 1.0, 2.0]) == 1.0


@pytest.mark.parametrize("a,b,match", [([], [], "equal, non-empty"),
                                       ([1.0, 2.0], [1.0], "got 2 A and 1 B"),
                                       ([1.0], [-1.0], "positive and finite, got -1.0"),
                                       ([math.nan], [1.0], "got nan")])
def test_relative_gate_rejects_bad_input(a: list[float], b: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        relative_gate(a, b)


def test_ab_gate_rejects_bad_counts() -> None:
    m = FakeMachine()
    with pytest.raises(ValueError, match="rounds >= 1"):
        ab_gate(Interleaved(m.runner("A", 0.001), m.runner("B", 0.001)), rounds=0, floor=0.9,
                minimum=NO_MINIMUM)


def test_a_verdict_is_the_report_row_it_judged() -> None:
    """B/A, its bounds, the floor, the rounds and the verdict: one row from the verdict itself;
    inconclusive stays inconclusive (never a pass)."""
    passed = relative_gate([100.0] * 6, [99.0, 100.0, 101.0, 99.5, 100.5, 100.0], floor=0.9)
    row = passed.figure("decode_tok_s", "legacy", "new")
    assert (row.name, row.verdict, row.judge, row.bound, row.rule) == (
        "decode_tok_s_ratio", "pass", "B/A ≥ 0.9 at 95%", 0.9, "ratio")
    assert row.value == round(passed.ratio, 4) and row.context["rounds"] == 6
    assert row.context["low"] == round(passed.low, 4) >= 0.9
    assert row.context["median_legacy"] == 100.0 and row.label == "decode_tok_s B/A (new vs legacy)"
    few = relative_gate([100.0] * 3, [99.0] * 3, floor=0.9).figure("decode_tok_s", "a", "b")
    assert few.verdict == "inconclusive" and few.failed and few.context["high"] is None
    slow = relative_gate([100.0] * 6, [50.0] * 6, floor=0.9).figure("decode_tok_s", "a", "b")
    assert slow.verdict == "fail"
