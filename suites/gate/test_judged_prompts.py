"""The target judged on every prompt its case names besides the eval prompt
(``"judged_prompts"`` in ``case.json``): the same floors as the eval prompt's
(:func:`test_gate.test_target_runs_the_qdq_graph`), then each figure and the generated tokens
held to the accepted record under the prompt's name. (No length floor: a short true answer, "The
capital of France is Paris.", ends at its end-of-turn token.)

Hazard: a prompt on which the target once fell short is the one that shows the gap; it stays
judged (the case's floors say why they sit where they do), it is never swapped for a kinder one.
A case that names no other prompt has nothing here (deselected, ``suites/gate/conftest.py``).
"""
from __future__ import annotations

from dataclasses import replace

from pytest_qnn_genai.checks import agreement, bounds, parity
from pytest_qnn_genai.golden.accepted import Measured
from pytest_qnn_genai.models.case import ModelCase
from pytest_qnn_genai.targets import Target


def APPLIES(case: ModelCase, target: Target) -> bool:  # noqa: N802 - the suites' hook reads it
    return bool(case.judged_prompts)


def test_target_runs_the_qdq_graph_on_each_judged_prompt(qnn_pipeline, qnn_case, qnn_target,
                                                         qnn_record, qnn_accepted) -> None:
    cosine = bounds.bound(qnn_case, "min_target_row_cosine")
    sqnr = bounds.bound(qnn_case, "min_target_sqnr_db")
    judged: list[parity.Check] = []
    tokens = []
    for name, prompt in qnn_case.judged_prompts.items():
        run = qnn_pipeline.run(qnn_case, qnn_target, prompt, logits=True, judged=True)
        qdq = qnn_pipeline.qdq_logits(qnn_case, qnn_target, run.prompt_tokens, run.tokens)
        assert run.logits is not None and run.logits.shape == qdq.shape
        checks = [replace(c, check=f"{c.check} ({name}: {prompt!r})", name=f"{c.name}_{name}")
                  for c in agreement.target_runs_qdq(qdq, run.logits, run.tokens, cosine.value,
                                                     sqnr.value, (cosine.source, sqnr.source))]
        qnn_record("gate", checks, note=f"{name}: {run.text!r}")
        judged += checks
        tokens.append(Measured(f"target_tokens_{name}", tuple(run.tokens),
                               label=f"the target's greedy tokens on {prompt!r}"))
    assert all(c.ok for c in judged), parity.failures(judged)
    qnn_accepted.hold(judged, *tokens)
