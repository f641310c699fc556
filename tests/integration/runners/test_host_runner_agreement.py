"""The Python host runner held to ExecuTorch's own qnn_llama_runner (built for x86 from the
session's --executorch-src), run the way the x86-runner target runs it: through the local
transport, with the plugin's pushes and its runner contract.

For every prompt / new-token combination the suites use (the gate's and parity's eval prompt, the
perf workload, the phone perf floors' workload, a run to the compiled context) and a build whose
``max_context_len`` exceeds its ``max_seq_len`` (stories260k@ctx160: the C++ runner never reads
``get_max_seq_len``), both runners produce the same number of tokens, the same tokens, and logits
within the tolerance of the two runners' prompt passes (the host runner's prefill graph against
the upstream kv-mode run's AR-1 steps)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_qnn_genai.checks import numerics
from pytest_qnn_genai.perf.benchmark import PERF_MAX_NEW_TOKENS, Workload
from pytest_qnn_genai.runtime.host_runner import HybridRunner
from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer, stop_ids
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc
from tests.support.cases import default_cases as available

MIN_ROW_COSINE = 0.995
TARGET = Target(soc("SM8650"), "htp", X86_RUNNER)


def _combinations() -> list[tuple[str, str, str, int | None]]:
    """(case, variant or "", prompt, new tokens; None: up to the context)."""
    out = []
    for name, case in available().items():
        perf = Workload.for_case(case).prompt
        out += [(name, "", case.eval_prompt, case.max_new_tokens),
                (name, "", perf, PERF_MAX_NEW_TOKENS),
                (name, "", "Once", None)]  # the golden phone workload: --seq_len 128 = context
    out.append(("stories260k", "ctx160", "Once", 150))  # past max_seq_len 128, within 160
    return out


@pytest.mark.parametrize(("name", "variant", "prompt", "new"), _combinations(),
                         ids=lambda v: str(v)[:12].replace(" ", "_"))
def test_host_runner_matches_upstreams(qnn_pipeline, qnn_sdk, sm8650_emulator, x86_runner_session,
                                       name, variant, prompt, new) -> None:
    case = available()[name]
    case = case.variant(variant) if variant else case
    pte = qnn_pipeline.pte(case, sm8650_emulator).pte
    tokenizer = load_tokenizer(case.path("tokenizer_model"))
    version = qnn_pipeline.decoder_model_version(case)
    host = HybridRunner(pte)
    ids = encode(tokenizer, prompt)[:host.max_prompt_len]  # as the perf workload is fitted
    n = min(new or host.context_len, host.context_len - len(ids))
    mine = host.generate(ids, n, eos_ids=stop_ids(tokenizer, version))
    theirs = x86_runner_session.generate(
        pte, case.path("tokenizer_model"), case.path("tokenizer_bin"), prompt, n, TARGET,
        logits=True, decoder_model_version=version, prompt_ids=ids)
    assert theirs.prompt_tokens == ids
    assert len(mine.tokens) == len(theirs.tokens) == theirs.perf.generated_tokens
    assert mine.tokens == theirs.tokens
    cos = numerics.rowwise_cosine(mine.logits, theirs.logits)
    assert float(cos.min()) >= MIN_ROW_COSINE, np.round(cos, 4)
    if variant:  # the case this combination exists for: past max_seq_len, within the context
        assert len(ids) + len(theirs.tokens) > host.max_seq_len
