"""genai_pipeline's inference stage on the target: upstream's ``ExecuTorchInferenceStrategy``
with the harness's ``DeviceRunnerAdapter`` (flows/genai_inference.py) runs llama.py's program,
and what it reports is held to the harness's own run of the same program on the same target:
the same prompt ids, the same greedy tokens, the same text (one program, one target, greedy:
identity). Its speed figures are reported beside the harness's, judged by nothing.
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import parity
from pytest_qnn_genai.flows.genai_inference import RESULT_FILE, run_inference_stage

pytestmark = [pytest.mark.parity, pytest.mark.flow("legacy", "genai")]


def test_genai_inference_runs_legacy_program(qnn_pipeline, qnn_case, qnn_target,
                                             legacy_artifacts, legacy_run, parity_table,
                                             qnn_record, tmp_path) -> None:
    def generate(pte, prompt, n):  # noqa: ANN001, ANN202 - the adapter's injected runner
        return qnn_pipeline.run_pte(qnn_case, qnn_target, pte, prompt, n)

    out = run_inference_stage(qnn_case, qnn_target, legacy_artifacts.pte, generate, tmp_path)
    metrics = out.performance_metrics
    checks = [
        parity.Check("genai inference: prompt ids", len(legacy_run.prompt_tokens),
                     len(metrics["prompt_token_ids"]),
                     ok=metrics["prompt_token_ids"] == legacy_run.prompt_tokens,
                     judge="identical to the harness's run", name="genai_inference_prompt_ids",
                     rule="equal"),
        parity.Check("genai inference: greedy tokens", len(legacy_run.tokens),
                     len(metrics["token_ids"]), ok=metrics["token_ids"] == legacy_run.tokens,
                     judge="identical to the harness's run", name="genai_inference_tokens",
                     rule="equal"),
        parity.Check("genai inference: text", legacy_run.text[:40], out.inference_results[0][:40],
                     ok=out.inference_results == [legacy_run.text],
                     judge="identical to the harness's run", name="genai_inference_text",
                     rule="equal"),
        parity.Check("genai inference: decode tok/s", round(legacy_run.perf.decode_tok_s, 1),
                     round(float(metrics["decode_tok_s"]), 1), info=True,
                     name="genai_inference_decode_tok_s", better="higher"),
    ]
    parity_table.add(checks, prefix=f"[{qnn_case.name} {qnn_target.id}] ")
    qnn_record("parity", checks)
    assert (tmp_path / "inference_output" / RESULT_FILE).is_file()
    assert all(c.ok for c in checks), parity.failures(checks)
