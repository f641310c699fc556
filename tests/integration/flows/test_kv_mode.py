"""llama.py's kv mode (``--model_mode kv``: the decode graph alone, the prompt through it one
token per call) for every default case, as its ``kv`` variant.

The staged flow's kv build is llama.py's: one graph method (``kv_forward``), the settings llama.py
was given read back out of the build, and the same program byte for byte (build stamps aside).
The two programs generate the same tokens with bit-equal logits on the emulator, and upstream's
own ``qnn_llama_runner`` (x86, ``--eval_mode 0``, one run for text and logits) generates the host
runner's tokens with bit-equal logits. A hybrid build is not a kv build: the same byte
comparison tells them apart."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_qnn_genai.checks import program_bytes
from pytest_qnn_genai.flows import config
from pytest_qnn_genai.hybrid import DECODE, KV_MODE
from pytest_qnn_genai.runtime.pte_info import compile_options, inspect_pte
from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc
from tests.support.cases import default_cases

VARIANT = "kv"
X86 = Target(soc("SM8650"), "htp", X86_RUNNER)


@pytest.fixture(scope="module", params=sorted(default_cases()))
def kv_case(request):  # noqa: ANN001, ANN201
    case = default_cases()[request.param]
    assert VARIANT in case.variants, f"{case.name} declares no {VARIANT!r} variant"
    return case.variant(VARIANT)


@pytest.fixture(scope="module")
def builds(qnn_pipeline, qnn_sdk, kv_case, sm8650_emulator):  # noqa: ANN001, ANN201
    return {flow: qnn_pipeline.artifacts(flow, kv_case, sm8650_emulator)
            for flow in ("legacy", "new")}


def test_a_kv_build_is_llama_pys_byte_for_byte(builds, kv_case) -> None:
    assert kv_case.model_mode == KV_MODE and kv_case.lowered_graphs == (DECODE,)
    for flow, artifacts in builds.items():
        assert inspect_pte(artifacts.pte).graph_methods == [DECODE], flow
    diff = program_bytes.compare(builds["legacy"].pte, builds["new"].pte, ("legacy", "new"))
    assert diff.identical, diff.parts


def test_the_staged_kv_build_carries_what_llama_py_was_told(qnn_pipeline, builds, kv_case,
                                                            sm8650_emulator) -> None:
    legacy = qnn_pipeline.legacy(kv_case, sm8650_emulator)
    args = config.parse_legacy_argv(legacy.argv)
    told = config.legacy_settings(args, legacy.pte.parent, config.llama_recipe(args.decoder_model))
    pte = builds["new"].pte
    built = config.staged_settings(inspect_pte(pte), compile_options(pte),
                                   qnn_pipeline.qdq(kv_case, sm8650_emulator).data)
    assert built["model_mode"][0] == told["model_mode"][0] == KV_MODE
    assert "prefill_ar_len" not in built and "prefill_ar_len" not in told
    assert config.disagreements(config.agreement_of(built, told)) == []


def test_both_kv_builds_generate_alike_on_the_emulator(qnn_pipeline, builds, kv_case,
                                                       sm8650_emulator) -> None:
    runs = {flow: qnn_pipeline.run_pte(kv_case, sm8650_emulator, a.pte)
            for flow, a in builds.items()}
    legacy, new = runs["legacy"], runs["new"]
    assert new.extra["prefill_chunks"] == len(new.prompt_tokens)  # a token per prompt call
    assert len(new.tokens) == kv_case.max_new_tokens
    assert legacy.tokens == new.tokens
    assert np.array_equal(legacy.logits, new.logits)


def test_upstreams_runner_runs_the_kv_build(qnn_pipeline, builds, kv_case, sm8650_emulator,
                                            x86_runner_session) -> None:
    pte = builds["new"].pte
    ids = encode(load_tokenizer(kv_case.path("tokenizer_model")), kv_case.eval_prompt)
    host = qnn_pipeline.run_pte(kv_case, sm8650_emulator, pte)
    assert host.prompt_tokens == ids
    theirs = x86_runner_session.generate(
        pte, kv_case.path("tokenizer_model"), kv_case.path("tokenizer_bin"), kv_case.eval_prompt,
        len(host.tokens), X86, logits=True,
        decoder_model_version=qnn_pipeline.decoder_model_version(kv_case), prompt_ids=ids)
    assert theirs.extra["eval_mode"] == 0  # one run: its text and its logits dump
    assert theirs.tokens == host.tokens
    assert np.array_equal(theirs.logits, host.logits)


def test_a_hybrid_build_is_told_apart(qnn_pipeline, builds, kv_case, sm8650_emulator) -> None:
    base = kv_case.name.split("@")[0]
    hybrid = qnn_pipeline.pte(default_cases()[base], sm8650_emulator).pte
    diff = program_bytes.compare(hybrid, builds["new"].pte, ("hybrid", "kv"))
    assert not diff.identical and diff.parts
