"""QNN's reason for refusing a graph, read from its log lines (the staged compile's descriptor 2,
llama.py's log): ``tests/data/qnn_refused_135m.log`` holds QAIRT 2.51's own lines from
SmolLM2-135M's refused compile."""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.stages.qnn_refusal import refusal_reason

REFUSED_135M = (Path(__file__).parents[2] / "data" / "qnn_refused_135m.log").read_text().splitlines()


def test_the_first_specific_reason_is_named() -> None:
    assert refusal_reason(REFUSED_135M) == "could not create op: q::ConvLayer_s1.opt"


def test_without_qnns_prepare_failing_there_is_no_refusal() -> None:
    harmless = [line for line in REFUSED_135M if "option 66" in line or "INFO" in line]
    assert refusal_reason(harmless) is None
    # the op's failure without QNN's finalize failing is not a refusal either (a log cut short)
    assert refusal_reason(REFUSED_135M[:4]) is None
    # a Python traceback mentioning the words is not QNN's log
    assert refusal_reason(["AssertionError: Failed to finalize Qnn Graph with error: 1002"]) is None


def test_a_refusal_without_a_known_reason_still_names_the_failure() -> None:
    assert refusal_reason(["[ERROR] [Qnn ExecuTorch]: Failed to finalize Qnn Graph with error: 1002"]
                          ) == "Failed to finalize Qnn Graph with error: 1002"
