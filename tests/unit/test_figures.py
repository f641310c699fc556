"""Judged figures: a verdict always names its judge; unjudged speed is info unless unmeasured."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.figures import Figure


def test_a_judged_figure_without_its_judge_is_refused() -> None:
    for verdict in ("pass", "fail", "inconclusive"):
        with pytest.raises(ValueError, match="names no judge"):
            Figure("decode_tok_s", 31.4, verdict)
    assert Figure("decode_tok_s", 31.4).verdict == "info"  # nothing judged it
    with pytest.raises(ValueError, match="verdict must be one of"):
        Figure("decode_tok_s", 31.4, "ok", "≥ 1")
    with pytest.raises(ValueError, match="unknown rule"):
        Figure("x", 1, "pass", "≥ 1", "floor")


def test_measured_is_info_unless_nothing_was_measured() -> None:
    assert figures.measured("decode_tok_s", 31.4).verdict == "info"
    assert figures.measured("decode_tok_s", 31.4).better == "higher"
    assert figures.measured("ttft_s", 0.13).better == "lower"
    for bad in (0.0, -1.0, math.nan):
        f = figures.measured("decode_tok_s", bad)
        assert f.verdict == "fail" and f.judge == "a measurement is > 0"


def test_scalar_json_values() -> None:
    assert figures.scalar(np.float32(0.5)) == 0.5 and isinstance(figures.scalar(np.int64(3)), int)
    assert figures.scalar((1, 2)) == "(1, 2)" and figures.scalar(None) is None


def test_round_trip_and_counts() -> None:
    f = Figure("decode_tok_s_ratio", 0.99, "inconclusive", "B/A ≥ 0.9 at 95%", "ratio", 0.9,
               "higher", context={"low": 0.8, "high": None, "rounds": 12})
    assert Figure.from_dict(f.to_dict()) == f and f.failed and not f.passed
    assert figures.counts([f, figures.info("x", 1)]) == {"pass": 0, "fail": 0,
                                                         "inconclusive": 1, "info": 1,
                                                         "updated": 0}
    assert Figure("x", "text").number is None and Figure("x", True).number is None


def test_a_figure_reads_as_one_sentence() -> None:
    """The figure, its value, and the threshold with its source (or that nothing judged it)."""
    from pytest_qnn_genai import figures

    failed = figures.measured("decode_tok_s", 0.0)
    assert str(failed) == "decode_tok_s is 0.0, which fails a measurement is > 0."
    floor = figures.Figure("decode_tok_s", 800.0, figures.FAIL,
                           "floor 1600 (SM8650 phone, -10% noise)", figures.PHONE_FLOOR, 1600.0)
    assert str(floor) == ("decode_tok_s is 800.0, which fails floor 1600 (SM8650 phone, -10% "
                          "noise).")
    assert str(figures.info("decode_tok_s", 30.1)) == (
        "decode_tok_s is 30.1, judged by nothing (info).")
