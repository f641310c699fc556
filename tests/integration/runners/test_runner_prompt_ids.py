"""The gate's ``--prompt`` check (``checks.generation.runner_reads_harness_prompt``) against
upstream's qnn_llama_runner: its own template and tokenizer read the harness's ids (every
kv-mode logits row equal), and one id changed at position 0 fails the ids row at position 0
while the count and echo rows still pass (qwen3_toy's BOS once differed so, 0 in the harness and
768 in the runner, and the three other rows passed it)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai.checks.generation import runner_reads_harness_prompt
from pytest_qnn_genai.runtime.chat import format_prompt, runner_prompt_ids
from pytest_qnn_genai.runtime.tokenizer import load_tokenizer
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc
from tests.support.cases import default_cases as available

if TYPE_CHECKING:
    from pytest_qnn_genai.runtime.result import RunResult

TARGET = Target(soc("SM8650"), "htp", X86_RUNNER)


@pytest.mark.parametrize("name", sorted(available()))
def test_the_runner_reads_the_harness_ids_and_one_other_id_fails(qnn_pipeline, sm8650_emulator,
                                                                 x86_runner_session,
                                                                 name) -> None:
    case = available()[name]
    pte = qnn_pipeline.pte(case, sm8650_emulator).pte
    version = qnn_pipeline.decoder_model_version(case)
    formatted = format_prompt(version, case.eval_prompt)
    ids = runner_prompt_ids(load_tokenizer(case.path("tokenizer_model")), version,
                            case.eval_prompt)

    def run(prompt: str, runner_prompt: bool = False,
            prompt_ids: list[int] | None = None) -> RunResult:
        return x86_runner_session.generate(pte, case.path("tokenizer_model"),
                                           case.path("tokenizer_bin"), prompt,
                                           case.max_new_tokens, TARGET, logits=True,
                                           decoder_model_version=version,
                                           runner_prompt=runner_prompt, prompt_ids=prompt_ids)

    by_text = run(case.eval_prompt, runner_prompt=True)
    by_ids = run(formatted, prompt_ids=ids)
    checks = runner_reads_harness_prompt(by_text, by_ids, ids, formatted)
    assert [c.name for c in checks][-1] == "runner_prompt_ids"
    assert all(c.ok for c in checks), [c.detail for c in checks if not c.ok]

    other = [0 if ids[0] != 0 else 1, *ids[1:]]  # as many ids, the first another
    by_other = run(formatted, prompt_ids=other)
    rows = runner_reads_harness_prompt(by_text, by_other, other, formatted)
    assert [c.ok for c in rows][:2] == [True, True] and not rows[-1].ok
    assert rows[-1].delta == "position 0"
