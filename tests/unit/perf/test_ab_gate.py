"""The interleaved A/B gate, on a fake clock."""
from __future__ import annotations

import math

import pytest

from pytest_qnn_genai.perf.gate import interleave, relative_gate


class FakeMachine:
    """A deterministic clock; every run costs ``tokens * seconds_per_token * load`` fake seconds."""

    def __init__(self, drift_per_call: float = 0.0) -> None:
        self.now = 0.0
        self.load = 1.0
        self.drift = drift_per_call
        self.calls: list[str] = []

    def runner(self, name: str, seconds_per_token: float, extra_sleep: float = 0.0,
               tokens: int = 100):
        def run() -> float:
            self.calls.append(name)
            start = self.now
            self.now += tokens * seconds_per_token * self.load + extra_sleep  # fake "sleep"
            self.load += self.drift  # the machine gets slower as it heats up
            return tokens / (self.now - start)
        return run


def test_interleave_alternates_after_discarded_warmup() -> None:
    m = FakeMachine()
    a, b = interleave(m.runner("A", 0.001), m.runner("B", 0.001), rounds=3, warmup=2)
    assert m.calls == ["A", "B"] * 2 + ["A", "B", "B", "A", "A", "B"]  # warm-up, then ABBA
    assert len(a) == len(b) == 3


def test_relative_gate_fails_for_a_slowed_b() -> None:
    m = FakeMachine()
    a, b = interleave(m.runner("A", 0.001), m.runner("B", 0.001, extra_sleep=0.1), rounds=5)
    verdict = relative_gate(a, b, floor=0.9)
    assert verdict.ratio == pytest.approx(0.5)
    assert not verdict.passed and "FAIL" in str(verdict)


def test_relative_gate_passes_an_equal_b_under_drift() -> None:
    # The machine slows 5 % per call. Interleaved, A and B see the same drift and stay within
    # the floor; run back to back (all A, then all B), B would look about 1.3x slower.
    m = FakeMachine(drift_per_call=0.05)
    a, b = interleave(m.runner("A", 0.001), m.runner("B", 0.001), rounds=8, warmup=1)
    assert relative_gate(a, b).passed
    m2 = FakeMachine(drift_per_call=0.05)
    a2 = [m2.runner("A", 0.001)() for _ in range(8)]
    b2 = [m2.runner("B", 0.001)() for _ in range(8)]
    assert not relative_gate(a2, b2).passed


def test_relative_gate_uses_medians_so_one_disturbed_round_does_not_fail_it() -> None:
    a = [1000.0] * 5
    b = [980.0, 990.0, 50.0, 1000.0, 970.0]  # one round hit by another job on the machine
    verdict = relative_gate(a, b, floor=0.9)
    assert verdict.passed and verdict.ratio == pytest.approx(0.98)
    assert sum(b) / sum(a) < 0.9  # a ratio of means would have failed


@pytest.mark.parametrize("a,b,match", [([], [], "equal, non-empty"),
                                       ([1.0, 2.0], [1.0], "got 2 A and 1 B"),
                                       ([1.0], [-1.0], "positive and finite, got -1.0"),
                                       ([math.nan], [1.0], "got nan")])
def test_relative_gate_rejects_bad_input(a: list[float], b: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        relative_gate(a, b)


def test_interleave_rejects_bad_counts() -> None:
    with pytest.raises(ValueError, match="rounds >= 1"):
        interleave(lambda: 1.0, lambda: 1.0, rounds=0)
