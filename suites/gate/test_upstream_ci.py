"""Upstream's own CI job for a model it gates, reproduced figure for figure: executorch's
``test_static_llm_model`` (``--model_mode kv --max_seq_len 1024 --max_context_len 1024
--enable_x86_64 --eval_methods sqnr_eval``), built here as the case's ``upstream-ci`` variant by
the staged flow and evaluated by llama.py itself (``--pre_gen_pte``) on upstream's x86 runner.

Its verdicts are upstream's assertions, judged: the ``.pte`` at most ``LlmSpecs.pte_size`` bytes
and llama.py's FP32-vs-QNN SQNR at least ``LlmSpecs.sqnr``; the harness's own SQNR on the same
rows is held to llama.py's, and both figures to the case's accepted record. What differs from
upstream's job (weights, calibration text) is the case's ``upstream.json``. A case that declares
no ``upstream-ci`` variant, or a target other than upstream's x86 runner, has no such job here.
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import numerics, parity
from pytest_qnn_genai.checks.upstream_oracle import upstream_ci_checks
from pytest_qnn_genai.checks.upstream_specs import (
    UPSTREAM_CI,
    counterpart,
    llm_specs,
    runs_upstream_ci,
)
from pytest_qnn_genai.hybrid import CALIBRATION

APPLIES = runs_upstream_ci  # the rest is deselected (suites/gate/conftest.py)


def test_upstream_ci_job(qnn_pipeline, qnn_case, qnn_target, qnn_record, qnn_accepted) -> None:
    assert runs_upstream_ci(qnn_case, qnn_target)  # the rest is deselected (module docstring)
    pair = counterpart(qnn_case.folder)
    specs = llm_specs(pair.llm_specs) if pair is not None else None
    if specs is None:
        pytest.fail(f"{qnn_case.name} declares an {UPSTREAM_CI!r} variant but names no "
                    "LlmSpecs entry of upstream's (its upstream.json)", pytrace=False)
    case = qnn_case.variant(UPSTREAM_CI)
    pte = qnn_pipeline.pte(case, qnn_target).pte
    qdq = qnn_pipeline.qdq(case, qnn_pipeline.build_target(qnn_target))
    upstream = qnn_pipeline.upstream_sqnr(case, qnn_target, pte, qdq.path(CALIBRATION))
    ids = upstream.prompt_ids
    harness = numerics.sqnr_db(qnn_pipeline.prepared(case).reference_logits(ids),
                               qnn_pipeline.target_logits(case, qnn_target, pte, ids))
    checks = upstream_ci_checks(specs.values.get("pte_size"), specs.values.get("sqnr"),
                                specs.source, pte.stat().st_size, upstream.fp32_vs_qnn, harness)
    qnn_record("gate", checks, values={"prompt_rows": len(ids),
                                       "qdq_vs_qnn_db": upstream.qdq_vs_qnn,
                                       "fp32_vs_qdq_db": upstream.fp32_vs_qdq})
    print(f"{case.name}: " + "; ".join(f"{c.check} {c.new} ({c.judge})" for c in checks)
          + f"; llama.py QDQ vs QNN {upstream.qdq_vs_qnn}, FP32 vs QDQ {upstream.fp32_vs_qdq}")
    assert all(c.ok for c in checks), parity.failures(checks)
    qnn_accepted.hold(checks[:2])
