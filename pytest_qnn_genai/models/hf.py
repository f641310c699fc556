"""transformers' ``LlamaForCausalLM`` as the independent fp32 reference of a model case.

The staged flow and the project's own references reuse ExecuTorch's ``static_llama`` (and the
llama2.c-layout :class:`~pytest_qnn_genai.models.llama2c.Transformer`), so a bug shared by those
is invisible to them. transformers is another implementation of the same architecture, written by
neither: the case's checkpoint goes into it through the conversion Meta's and HF's own scripts
use (wq/wk rows from interleaved to half-split RoPE order, :func:`llama3.meta_to_hf`).

- llama2.c cases (stories260k): RoPE theta 10000 without scaling, RMSNorm eps 1e-5, SwiGLU width
  by llama2.c's rule, untied ``output`` (llama2.c saves it as its own key), as
  :mod:`pytest_qnn_genai.models.llama2c` states them.
- Llama 3 cases (llama3_2_toy): the case's own Hugging Face copy (``config.json`` +
  ``model.safetensors`` beside the Meta checkpoint), loaded by ``from_pretrained`` as any HF
  checkpoint is: RoPE scaling, GQA and the tied head come from transformers' reading of its
  config, not from the project's.
Hazard: ``import transformers`` takes a few seconds; nothing imports this module at start-up.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from pytest_qnn_genai.models import llama2c, llama3

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

    from pytest_qnn_genai.models.registry import ModelCase


def llama2c_config(params: dict[str, int], max_positions: int) -> object:
    """The ``LlamaConfig`` of a llama2.c checkpoint's ``params``."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=params["vocab_size"], hidden_size=params["dim"],
        intermediate_size=llama2c.hidden_dim(params), num_hidden_layers=params["n_layers"],
        num_attention_heads=params["n_heads"], num_key_value_heads=params["n_kv_heads"],
        head_dim=params["dim"] // params["n_heads"], hidden_act="silu",
        max_position_embeddings=max_positions, rms_norm_eps=llama2c.NORM_EPS,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": llama2c.ROPE_THETA},
        bos_token_id=1, eos_token_id=2, architectures=["LlamaForCausalLM"])


def reference_model(case: ModelCase,
                    state_dict: dict[str, torch.Tensor] | None = None) -> LlamaForCausalLM:
    """``case``'s weights (or ``state_dict``, in the case's checkpoint layout) in transformers,
    fp32, eval mode."""
    from transformers import LlamaForCausalLM

    params = case.params_dict
    if case.family == "llama3":
        if state_dict is None:
            return llama3.load_hf(case.folder)
        model = LlamaForCausalLM(llama3.hf_config(params))
        model.load_state_dict(llama3.meta_to_hf(state_dict, params), strict=True)
        return model.float().eval()
    sd = state_dict if state_dict is not None else llama2c.load_checkpoint(
        case.path("checkpoint"), params)
    model = LlamaForCausalLM(llama2c_config(params, case.max_context_len))
    model.load_state_dict(llama3.meta_to_hf(sd, params), strict=True)
    return model.float().eval()


@torch.no_grad()
def logits(model: LlamaForCausalLM, tokens: list[int]) -> np.ndarray:
    """fp32 logits ``[len(tokens), vocab]`` of one causal pass over ``tokens``."""
    out = model(torch.tensor([tokens], dtype=torch.long)).logits[0]
    return out.float().numpy()


def teacher_forced(model: LlamaForCausalLM, prompt_tokens: list[int],
                   tokens: list[int]) -> np.ndarray:
    """The logits that predict each of ``tokens`` after ``prompt_tokens`` (fed the true tokens)."""
    seq = list(prompt_tokens) + list(tokens[:-1])
    return logits(model, seq)[len(prompt_tokens) - 1:]
