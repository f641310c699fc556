"""Run-to-run perf diffs: buckets, direction of figures, the markdown table."""
from __future__ import annotations

import math

import pytest

from pytest_qnn_genai.report.diff import FigureDiff, bucket, compare, higher_is_better, render_table


@pytest.mark.parametrize("ratio,label", [
    (2.5, "≥2x faster"), (2.0, "≥2x faster"), (1.6, "≥1.5x faster"), (1.3, "≥1.2x faster"),
    (1.1, "≥1.1x faster"), (1.05, "within noise"), (1.0, "within noise"), (0.95, "within noise"),
    (0.8, "≥1.2x slower"), (0.6, "≥1.5x slower"), (0.45, "≥2x slower"), (0.19, "≥5x slower"),
    (12.0, "≥10x faster"), (0.05, "≥10x slower"), (math.inf, "started working"),
    (0.0, "stopped working"),
])
def test_bucket_labels(ratio: float, label: str) -> None:
    assert bucket(ratio, noise=0.10) == label


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
    got = {d.figure: (round(d.ratio, 3), d.bucket) for d in compare(current, previous, noise=0.10)}
    assert got == {
        "decode_tok_s": (2.5, "≥2x faster"),
        "prefill_tok_s": (0.8, "≥1.2x slower"),
        "ttft_s": (0.5, "≥2x slower"),  # 0.10 s -> 0.20 s: time doubled
        "model_load_s": (2.0, "≥2x faster"),  # 2 s -> 1 s
        "gone_tok_s": (0.0, "stopped working"),
        "back_tok_s": (math.inf, "started working"),
    }
    diffs = compare(current, previous, noise=0.10)
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
