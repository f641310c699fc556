"""Run-to-run perf buckets, the interleaved A/B gate (on fake clocks) and minimum measured work."""
from __future__ import annotations

import math

import pytest

from pytest_qnn_genai.perf.compare import (FigureDiff, bucket, compare, higher_is_better,
                                           interleave, relative_gate, render_table)
from pytest_qnn_genai.perf.minimum import Work, check_minimum, measured_work
from pytest_qnn_genai.results import PerfStats


@pytest.mark.parametrize("ratio,label", [
    (2.5, "≥2x faster"), (2.0, "≥2x faster"), (1.6, "≥1.5x faster"), (1.3, "≥1.2x faster"),
    (1.1, "≥1.1x faster"), (1.05, "within noise"), (1.0, "within noise"), (0.95, "within noise"),
    (0.8, "≥1.2x slower"), (0.6, "≥1.5x slower"), (0.45, "≥2x slower"), (0.19, "≥5x slower"),
    (12.0, "≥10x faster"), (0.05, "≥10x slower"), (math.inf, "started working"),
    (0.0, "stopped working"),
])
def test_bucket_labels(ratio: float, label: str) -> None:
    assert bucket(ratio) == label


def test_noise_band_is_configurable() -> None:
    assert bucket(1.15, noise=0.2) == "within noise"
    assert bucket(1 / 1.15, noise=0.2) == "within noise"
    assert bucket(1.25, noise=0.2) == "≥1.2x faster"
    assert bucket(1.07, noise=0.05) == "<1.1x faster"
    assert bucket(1.0, noise=0.0) == "within noise"


@pytest.mark.parametrize("figure,up", [("decode_tok_s", True), ("prefill_tok_s", True),
                                       ("inference_speed_tok_s", True), ("ttft_s", False),
                                       ("model_load_s", False), ("step_ms", False)])
def test_direction_of_figures(figure: str, up: bool) -> None:
    assert higher_is_better(figure) is up


def test_unknown_figure_direction_is_an_error() -> None:
    with pytest.raises(ValueError, match="'generated_tokens': unknown direction"):
        higher_is_better("generated_tokens")


def test_compare_inverts_time_figures_and_flags_failures() -> None:
    t = "SM8650-htp-emulator"
    previous = {("s", t, "decode_tok_s"): 100.0, ("s", t, "prefill_tok_s"): 1000.0,
                ("s", t, "ttft_s"): 0.10, ("s", t, "model_load_s"): 2.0,
                ("s", t, "gone_tok_s"): 50.0, ("s", t, "back_tok_s"): None,
                ("s", t, "dead_tok_s"): None, ("s", t, "only_before_tok_s"): 1.0}
    current = {("s", t, "decode_tok_s"): 250.0, ("s", t, "prefill_tok_s"): 800.0,
               ("s", t, "ttft_s"): 0.20, ("s", t, "model_load_s"): 1.0,
               ("s", t, "gone_tok_s"): None, ("s", t, "back_tok_s"): 60.0,
               ("s", t, "dead_tok_s"): None, ("s", t, "only_now_tok_s"): 1.0}
    got = {d.figure: (round(d.ratio, 3), d.bucket) for d in compare(current, previous)}
    assert got == {
        "decode_tok_s": (2.5, "≥2x faster"),
        "prefill_tok_s": (0.8, "≥1.2x slower"),
        "ttft_s": (0.5, "≥2x slower"),  # 0.10 s -> 0.20 s: time doubled
        "model_load_s": (2.0, "≥2x faster"),  # 2 s -> 1 s
        "gone_tok_s": (0.0, "stopped working"),
        "back_tok_s": (math.inf, "started working"),
    }
    diffs = compare(current, previous)
    assert [d.key for d in diffs] == sorted(d.key for d in diffs)


def test_render_table_is_markdown() -> None:
    diffs = [FigureDiff("stories260k", "SM8650-htp-R5CX", "decode_tok_s", 1600.0, 1800.0, 1.125,
                        "≥1.1x faster"),
             FigureDiff("stories260k", "SM8650-htp-R5CX", "ttft_s", None, 0.02, math.inf,
                        "started working")]
    table = render_table(diffs).splitlines()
    assert table[0] == "| model | target | figure | previous | current | speed-up | change |"
    assert table[2] == ("| stories260k | SM8650-htp-R5CX | decode_tok_s | 1600 | 1800 | 1.12x "
                        "| ≥1.1x faster |")
    assert table[3].endswith("| — | 0.02 | ∞ | started working |")
    assert "No figures to show" in render_table([])


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


def test_minimum_work() -> None:
    short = check_minimum(Work(48, 0.03), figure="decode_tok_s")
    assert short == ("decode_tok_s rests on too little work (48 tokens < 64; 0.030 s measured "
                     "< 1 s): not gated")
    assert "tokens" not in check_minimum(Work(2000, 0.5))
    assert check_minimum(Work(2000, 1.25)) is None
    assert check_minimum(Work(10, 0.2), min_tokens=8, min_seconds=0.1) is None


def _stats(prompt: int, generated: int, prefill: float, decode: float) -> PerfStats:
    return PerfStats(prompt_tokens=prompt, generated_tokens=generated, model_load_s=0.1,
                     prefill_tok_s=prefill, decode_tok_s=decode, ttft_s=0.01)


def test_measured_work_pools_runs() -> None:
    runs = [_stats(4, 100, 400.0, 200.0), _stats(4, 300, 200.0, 100.0)]
    decode = measured_work(runs, "decode_tok_s")
    assert (decode.tokens, decode.seconds) == (400, pytest.approx(3.5))
    assert decode.rate == pytest.approx(400 / 3.5)
    prefill = measured_work(runs, "prefill_tok_s")
    assert (prefill.tokens, prefill.seconds) == (8, pytest.approx(0.03))
    assert check_minimum(prefill, figure="prefill_tok_s").startswith("prefill_tok_s rests on")
    assert measured_work([_stats(4, 10, 0.0, 0.0)], "decode_tok_s") == Work(0, 0.0)
    with pytest.raises(ValueError, match="got 'ttft_s'"):
        measured_work(runs, "ttft_s")
