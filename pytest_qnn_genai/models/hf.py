"""transformers as the independent fp32 reference of a model case.

The staged flow and the project's own references reuse ExecuTorch's ``static_llama`` (and the
llama2.c-layout :class:`~pytest_qnn_genai.models.families.llama2c.Transformer`), so a bug shared
by those is invisible to them. transformers is another implementation of the same architecture,
written by neither: each family names its class (``HF_CLASS``: ``LlamaForCausalLM`` for llama2.c
and Llama 3, ``Qwen3ForCausalLM`` for Qwen3) and loads the case's weights into it
(``reference_model``), from the case's own Hugging Face files where it has them.
Hazard: ``import transformers`` takes a few seconds; nothing imports this module at start-up.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from pytest_qnn_genai.models.case import ModelCase


def reference_model(case: ModelCase,
                    state_dict: dict[str, torch.Tensor] | None = None) -> PreTrainedModel:
    """``case``'s weights (or ``state_dict``, in the layout its family's ``load_checkpoint``
    returns) in the family's transformers class, fp32, eval mode."""
    return case.family.reference_model(case, state_dict)


@torch.no_grad()
def logits(model: PreTrainedModel, tokens: list[int]) -> np.ndarray:
    """fp32 logits ``[len(tokens), vocab]`` of one causal pass over ``tokens``."""
    out = model(torch.tensor([tokens], dtype=torch.long)).logits[0]
    result: np.ndarray = out.float().numpy()
    return result


def teacher_forced(model: PreTrainedModel, prompt_tokens: list[int],
                   tokens: list[int]) -> np.ndarray:
    """The logits that predict each of ``tokens`` after ``prompt_tokens`` (fed the true tokens)."""
    seq = list(prompt_tokens) + list(tokens[:-1])
    return logits(model, seq)[len(prompt_tokens) - 1:]
