"""genai_pipeline's inference stage on the target: upstream's ``ExecuTorchInferenceStrategy``
with the harness's ``DeviceRunnerAdapter`` (flows/genai_inference.py) runs llama.py's program,
and what it reports is held to the harness's own run of the same program on the same target:
the same prompt ids, the same greedy tokens, the same text (one program, one target, greedy:
identity). Its speed figures are reported beside the harness's, judged by nothing.
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import parity
from pytest_qnn_genai.flows.genai_inference import RESULT_FILE, stage_matches_run

pytestmark = [pytest.mark.parity, pytest.mark.flow("legacy", "genai")]


def test_genai_inference_runs_legacy_program(qnn_pipeline, qnn_case, qnn_target,
                                             legacy_artifacts, legacy_run, parity_table,
                                             qnn_record, tmp_path) -> None:
    def generate(pte, prompt, n):  # noqa: ANN001, ANN202 - the adapter's injected runner
        return qnn_pipeline.run_pte(qnn_case, qnn_target, pte, prompt, n)

    checks = stage_matches_run(qnn_case, qnn_target, legacy_artifacts.pte, generate, legacy_run,
                               tmp_path)
    parity_table.add(checks, prefix=f"[{qnn_case.name} {qnn_target.id}] ")
    qnn_record("parity", checks)
    assert (tmp_path / "inference_output" / RESULT_FILE).is_file()
    assert all(c.ok for c in checks), parity.failures(checks)
