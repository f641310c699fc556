"""The accepted record catches a calibration change the floors let through: stories260k's
calibration graph quantized on its first calibration prompt only (instead of all eight) keeps
the QDQ vs fp32 SQNR above the case's 15 dB floor yet loses more than 1 dB against the committed
accepted measurement (``golden/accepted/stories260k.json``), which fails naming old and new; the
staged flow's QDQ graph, calibrated as llama.py calibrates, equals the accepted figures. The
perturbed graph is the cache entry the other perturbation tests share (``tests/support/
perturbed.py``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.checks import agreement, bounds
from pytest_qnn_genai.golden import accepted as acc
from pytest_qnn_genai.golden import accepted_judge as judge
from tests.support.perturbed import one_prompt_calibration_module

REPO = Path(__file__).resolve().parents[3]
KEY = "SM8650-htp-emulator"


@pytest.fixture(scope="session")
def one_prompt_graph(qnn_pipeline, qnn_sdk, case, sm8650_emulator):  # noqa: ANN201
    return one_prompt_calibration_module(qnn_pipeline, case, sm8650_emulator)


def _measured(case, fp32: np.ndarray, qdq: np.ndarray) -> list[acc.Measured]:  # noqa: ANN001
    """What suites/gate test_qdq_keeps_the_fp32_model holds to the record."""
    sqnr, greedy = (bounds.bound(case, n) for n in ("min_qdq_sqnr_db", "min_qdq_greedy_agreement"))
    checks = agreement.qdq_keeps_fp32(fp32, qdq, sqnr.value, greedy.value)
    assert all(c.ok for c in checks), checks  # within the floors: only the record can tell
    return [*judge.measured_of(checks),
            acc.Measured("qdq_greedy_tokens", tuple(int(t) for t in np.argmax(qdq, axis=1)))]


def test_one_prompt_calibration_fails_against_the_accepted_qdq_figures(
        qnn_pipeline, case, sm8650_emulator, one_prompt_graph) -> None:
    from pytest_qnn_genai.stages.reference import teacher_forced

    path = acc.path_for(REPO / "golden", case.name)
    assert path.is_file(), f"{path}: no accepted record"
    record = acc.load(path, case.name)
    run = qnn_pipeline.run(case, sm8650_emulator)
    ref = qnn_pipeline.fp32_reference(case, run.prompt_tokens)
    staged = qnn_pipeline.qdq_logits(case, sm8650_emulator, ref.prompt_tokens, ref.tokens)
    broken = teacher_forced(one_prompt_graph, qnn_pipeline.prepared(case), ref.prompt_tokens,
                            ref.tokens).logits
    good = judge.compare(record, KEY, _measured(case, ref.logits, staged), "accepted",
                         "pytest")
    bad = judge.compare(record, KEY, _measured(case, ref.logits, broken), "accepted",
                        "pytest")
    print("\n".join(c.problem for c in bad if c.problem))
    assert [c.problem for c in good] == [None] * 3, [c.problem for c in good]
    sqnr = next(c for c in bad if c.figure.name == "qdq_sqnr_db_vs_accepted")
    old, new = record.figure(KEY, "qdq_sqnr_db").value, sqnr.figure.number
    assert isinstance(old, float) and new is not None and sqnr.problem is not None
    assert sqnr.figure.verdict == "fail" and new <= old - 1.0, sqnr.figure
    assert sqnr.problem.startswith(f"qdq_sqnr_db (QDQ vs fp32 logits SQNR dB) = "
                                   f"{new!r}, accepted {old!r}: -")
    assert ", worse; judged against accepted [SM8650-htp-emulator]" in sqnr.problem
