"""The runner's own ``--prompt`` path, as upstream's CI and device evaluator drive it.

Every other run hands the runner the prompt as ids (``--tokenized_prompt``), the very ids the
references use. Here the runner formats the case's eval prompt with its chat template
(``--decoder_model_version``) and encodes it with its own tokenizer, so this is where the
harness's copy of both is held to upstream's runner: the ids the harness expects
(``runtime.chat.runner_prompt_ids``) must be as many as the runner read (its observer line), its
echo must be the harness's formatted text, its generation must be the one it makes from the
harness's ids, and the ids themselves must be the harness's: both runs dump their kv-mode logits
(``--eval_mode 0 --dump_logits_path``, every prompt position's row), which are equal row for row
only up to the first position whose id differs. Upstream's runners only: the host runner takes
ids.
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import parity
from pytest_qnn_genai.checks.generation import runner_reads_harness_prompt
from pytest_qnn_genai.runtime.chat import format_prompt, runner_prompt_ids
from pytest_qnn_genai.runtime.tokenizer import load_tokenizer


def test_the_runners_own_prompt_path_reads_the_harness_ids(qnn_pipeline, qnn_case, qnn_target,
                                                           qnn_pte, qnn_record) -> None:
    if qnn_target.is_emulator:
        pytest.skip(f"{qnn_target.id}: the host runner takes ids; the --prompt path is upstream's "
                    "runners' (the x86-runner target, a phone)")
    version = qnn_pipeline.decoder_model_version(qnn_case)
    formatted = format_prompt(version, qnn_case.eval_prompt)
    ids = runner_prompt_ids(load_tokenizer(qnn_case.path("tokenizer_model")), version,
                            qnn_case.eval_prompt)
    n = qnn_case.max_new_tokens
    by_text = qnn_pipeline.run_pte(qnn_case, qnn_target, qnn_pte.pte, qnn_case.eval_prompt, n,
                                   runner_prompt=True, logits=True, judged=True)
    by_ids = qnn_pipeline.run_pte(qnn_case, qnn_target, qnn_pte.pte, formatted, n,
                                  prompt_ids=ids, logits=True, judged=True)
    checks = runner_reads_harness_prompt(by_text, by_ids, ids, formatted)
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), parity.failures(checks)
