"""The harness's SQNR held to llama.py's own ``sqnr_eval`` on the same program: for every default
case's kv build, upstream's evaluator (``--pre_gen_pte``, upstream's x86 runner, its tokenizer
and its FP32 ``nn.Module``) and the harness (its fp32 and QDQ calibration graphs, its emulator
run, its SQNR) measure the prompt's rows alike to the printed digits, on the same ids.

Shown failing on the faults it guards: the harness's target rows one position off, and its fp32
figure taken against the QDQ graph, each disagree with llama.py and fail naming both figures."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_qnn_genai.checks import numerics
from pytest_qnn_genai.checks.upstream_oracle import held_to_upstream
from pytest_qnn_genai.hybrid import CALIBRATION
from pytest_qnn_genai.stages.prepare import run_calibration_graph
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc
from tests.support.cases import default_cases

VARIANT = "kv"


X86 = Target(soc("SM8650"), "htp", X86_RUNNER)


@pytest.fixture(scope="module", params=sorted(default_cases()))
def measured(request, qnn_pipeline, qnn_sdk, sm8650_emulator, x86_runners):  # noqa: ANN001, ANN201
    """(case, llama.py's figures, the harness's fp32 / QDQ / target rows of the same ids)."""
    case = default_cases()[request.param].variant(VARIANT)
    pte = qnn_pipeline.pte(case, sm8650_emulator).pte
    qdq = qnn_pipeline.qdq(case, sm8650_emulator)
    upstream = qnn_pipeline.upstream_sqnr(case, X86, pte, qdq.path(CALIBRATION))
    ids = upstream.prompt_ids
    prepared = qnn_pipeline.prepared(case)
    rows = {"fp32": prepared.reference_logits(ids),
            "qdq": run_calibration_graph(qdq.graph(CALIBRATION), prepared, ids),
            "target": qnn_pipeline.target_logits(case, sm8650_emulator, pte, ids)}
    return case, upstream, rows


def test_llama_py_evaluates_the_prompt_as_the_harness_reads_it(qnn_pipeline, measured) -> None:
    """llama.py's ids are its chat template's (the family's, if any) and its tokenizer's: the
    harness's reading of what llama.py feeds (the calibration ids of one prompt)."""
    case, upstream, rows = measured
    assert upstream.prompt_ids == qnn_pipeline.prepared(case).calibration_ids(case.eval_prompt)
    assert {k: v.shape for k, v in rows.items()} == {
        k: (len(upstream.prompt_ids), rows["fp32"].shape[1]) for k in rows}


def test_the_harness_sqnr_is_llama_pys(measured) -> None:
    case, upstream, rows = measured
    assert upstream.qdq_vs_qnn is not None and upstream.fp32_vs_qdq is not None
    checks = [held_to_upstream("fp32_vs_qnn", "FP32 vs QNN, prompt rows",
                               upstream=upstream.fp32_vs_qnn,
                               harness=numerics.sqnr_db(rows["fp32"], rows["target"])),
              held_to_upstream("qdq_vs_qnn", "CPU QDQ vs QNN, prompt rows",
                               upstream=upstream.qdq_vs_qnn,
                               harness=numerics.sqnr_db(rows["qdq"], rows["target"])),
              held_to_upstream("fp32_vs_qdq", "FP32 vs CPU QDQ, prompt rows",
                               upstream=upstream.fp32_vs_qdq,
                               harness=numerics.sqnr_db(rows["fp32"], rows["qdq"]))]
    print(case.name, [(c.check, c.legacy, c.new) for c in checks])
    assert all(c.ok for c in checks), [c.detail for c in checks if not c.ok]


def test_a_harness_off_by_a_row_or_graph_fails(measured) -> None:
    _, upstream, rows = measured
    shifted = np.concatenate([rows["target"][1:], rows["target"][-1:]])
    wrong = {"rows one position off": numerics.sqnr_db(rows["fp32"], shifted),
             "QDQ graph as the fp32 reference": numerics.sqnr_db(rows["qdq"], rows["target"])}
    for what, figure in wrong.items():
        check = held_to_upstream("fp32_vs_qnn", what, upstream=upstream.fp32_vs_qnn,
                                 harness=figure)
        assert not check.ok, what
        assert f"{figure:.4f}" in check.detail and f"{upstream.fp32_vs_qnn:.4f}" in check.detail
