"""transformers as the independent fp32 reference, for every default case: it agrees with the
project's fp32 implementations (llama2c.Transformer for stories260k, static_llama's calibration
graph for every family: ``LlamaForCausalLM`` for llama2.c and Llama 3, ``Qwen3ForCausalLM`` for
Qwen3), and a perturbed weight makes the agreement fail."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_qnn_genai.models import hf, registry
from pytest_qnn_genai.models.families import llama2c

CASES = ["stories260k", "llama3_2_toy", "qwen3_toy"]
PROMPT = "Once upon a time, there was a little boy named Tom."
# one row of an attention and of an MLP weight (every family's load_checkpoint uses these names)
PERTURBED = [("layers.2.attention.wk.weight", 1.5), ("layers.0.feed_forward.w2.weight", 0.8)]


@pytest.fixture(scope="module", params=CASES)
def model_case(request: pytest.FixtureRequest) -> registry.ModelCase:
    return registry.available()[request.param]


@pytest.fixture(scope="module")
def reference(model_case):
    return hf.reference_model(model_case)


@pytest.fixture(scope="module")
def tokens(model_case, qnn_pipeline, qnn_sdk) -> list[int]:
    ids = qnn_pipeline.prepared(model_case).encode(PROMPT)
    return ids + list(range(40, 60))


def _checkpoint(case: registry.ModelCase) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in case.family.load_checkpoint(case).items()}


def test_transformers_agrees_with_the_llama2c_model(case) -> None:
    reference = hf.reference_model(case)
    tokens = [1, 403, 261, 333, 276, 297, 265, 259, 348, 286, 1] + list(range(40, 60))
    with torch.no_grad():
        ours = llama2c.load_model(case)(torch.tensor([tokens]))[0].numpy()
    theirs = hf.logits(reference, tokens)
    assert np.abs(ours - theirs).max() < 1e-4
    assert (ours.argmax(1) == theirs.argmax(1)).all()


def test_transformers_agrees_with_static_llama(qnn_pipeline, model_case, reference,
                                               tokens) -> None:
    ours = qnn_pipeline.prepared(model_case).reference_logits(tokens)
    assert np.abs(ours - hf.logits(reference, tokens)).max() < 1e-4


@pytest.mark.parametrize("key,scale", PERTURBED)
def test_a_perturbed_weight_breaks_the_agreement(model_case, reference, tokens, key: str,
                                                 scale: float) -> None:
    sd = _checkpoint(model_case)
    sd[key][3] *= scale
    perturbed = hf.reference_model(model_case, sd)
    diff = np.abs(hf.logits(perturbed, tokens) - hf.logits(reference, tokens)).max()
    assert diff > 1e-2, f"perturbing {key} moved the logits by only {diff:.3g}"
    unperturbed = hf.reference_model(model_case, _checkpoint(model_case))
    assert np.abs(hf.logits(unperturbed, tokens) - hf.logits(reference, tokens)).max() < 1e-5


def test_the_reference_is_the_family_s_transformers_class(model_case, reference) -> None:
    assert type(reference).__name__ == model_case.family.HF_CLASS


def test_a_perturbed_qk_norm_breaks_the_qwen3_agreement() -> None:
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

    case = registry.available()["qwen3_toy"]
    tokens = encode(load_tokenizer(case.path("tokenizer_bin")), PROMPT + " He loved to run.")
    sd = _checkpoint(case)
    same = hf.logits(hf.reference_model(case, sd), tokens)
    assert np.abs(same - hf.logits(hf.reference_model(case), tokens)).max() < 1e-5
    sd["layers.0.attention.k_norm_fn.weight"][3] *= 2.0  # one channel of one key QK-norm
    assert np.abs(hf.logits(hf.reference_model(case, sd), tokens) - same).max() > 1e-1
