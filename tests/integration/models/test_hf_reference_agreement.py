"""transformers as the independent fp32 reference: it agrees with the project's two fp32
implementations of stories260k (llama2c.Transformer and static_llama's calibration graph), and a
perturbed weight makes the agreement fail."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_qnn_genai.models import hf, llama2c

TOKENS = [1, 403, 261, 333, 276, 297, 265, 259, 348, 286, 1] + list(range(40, 60))


@pytest.fixture(scope="module")
def reference(case):
    return hf.reference_model(case)


def test_transformers_agrees_with_the_llama2c_model(case, reference) -> None:
    with torch.no_grad():
        ours = llama2c.load_model(case)(torch.tensor([TOKENS]))[0].numpy()
    theirs = hf.logits(reference, TOKENS)
    assert np.abs(ours - theirs).max() < 1e-4
    assert (ours.argmax(1) == theirs.argmax(1)).all()


def test_transformers_agrees_with_static_llama(qnn_pipeline, qnn_sdk, case, reference) -> None:
    ours = qnn_pipeline.prepared(case).reference_logits(TOKENS)
    assert np.abs(ours - hf.logits(reference, TOKENS)).max() < 1e-4


@pytest.mark.parametrize("key,scale", [("layers.2.attention.wk.weight", 1.5),
                                       ("layers.0.feed_forward.w2.weight", 0.8)])
def test_a_perturbed_weight_breaks_the_agreement(case, reference, key: str, scale: float) -> None:
    sd = llama2c.load_checkpoint(case.path("checkpoint"), case.params_dict)
    sd = {k: v.clone() for k, v in sd.items()}
    sd[key][3] *= scale
    perturbed = hf.reference_model(case, sd)
    diff = np.abs(hf.logits(perturbed, TOKENS) - hf.logits(reference, TOKENS)).max()
    assert diff > 1e-2, f"perturbing {key} moved the logits by only {diff:.3g}"
