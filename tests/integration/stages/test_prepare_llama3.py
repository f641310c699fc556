"""The staged flow's first stage on the Llama 3.2 family: ``stages.prepare`` builds the toy's
static-LLaMA graphs from its Meta-layout checkpoint (wq/wk permuted for half-split RoPE, llama3
rope scaling from params.json) and they agree with ``transformers.LlamaForCausalLM`` on the
Hugging Face copy of the weights; a perturbed checkpoint row breaks the agreement.

The perturbed control reads the case from a folder of links to the toy's files with its
checkpoint replaced.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_qnn_genai.hybrid import CALIBRATION
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.models.families import llama3
from pytest_qnn_genai.models.registry import ModelCase, load_case
from pytest_qnn_genai.models.train import greedy
from pytest_qnn_genai.stages.prepare import prepare, run_calibration_graph

FOLDER = registry.MODELS_DIR / "llama3_2_toy"
TOL = 1e-4  # fp32 vs fp32; the perturbed control moves logits by far more


def _case(folder: Path) -> ModelCase:
    for f in FOLDER.iterdir():
        if not (folder / f.name).exists():
            (folder / f.name).symlink_to(f)
    return load_case(folder)


@pytest.fixture(scope="module")
def case() -> ModelCase:
    return registry.available()["llama3_2_toy"]


@pytest.fixture(scope="module")
def hf_logits(case: ModelCase) -> tuple[list[int], np.ndarray]:
    """bos + the eval prompt + its greedy continuation (context length), and transformers'
    logits at every position."""
    model = llama3.load_hf(FOLDER)
    tok = llama3.load_tokenizer(case.path("tokenizer_model"))
    prompt = tok.encode(case.eval_prompt, bos=True, eos=False)
    tokens = prompt + greedy(lambda x: model(x).logits, prompt, case.max_context_len - len(prompt))
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0].float().numpy()
    return tokens, logits


def test_prepare_builds_the_llama3_family(case: ModelCase, hf_logits) -> None:
    assert case.family is llama3
    prepared = prepare(case)
    tokens, want = hf_logits
    assert prepared.encode(case.eval_prompt) == tokens[:5]  # tiktoken with bos 768
    got = run_calibration_graph(prepared.graphs[CALIBRATION], prepared, tokens)
    assert got.shape == want.shape == (case.max_context_len, 1024)
    assert np.abs(got - want).max() < TOL


def test_a_perturbed_checkpoint_row_breaks_the_agreement(case: ModelCase, hf_logits,
                                                         tmp_path: Path) -> None:
    _case(tmp_path)
    sd = llama3.read_checkpoint(FOLDER / "consolidated.00.pth", case.params_dict)
    sd["layers.1.attention.wk.weight"][3] += 0.05  # one row of one head, as a bad permute would
    (tmp_path / "consolidated.00.pth").unlink()
    llama3.save_checkpoint(sd, tmp_path / "consolidated.00.pth")
    prepared = prepare(load_case(tmp_path))
    tokens, want = hf_logits
    got = run_calibration_graph(prepared.graphs[CALIBRATION], prepared, tokens)
    assert np.abs(got - want).max() > 100 * TOL
