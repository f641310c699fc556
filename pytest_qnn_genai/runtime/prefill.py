"""The inputs of a hybrid program's first prompt pass, from its metadata alone.

What qnn_llama_runner's prompt processor feeds ``prefill_forward`` for the first chunk of a
prompt (runner/prompt_processor.cpp, smart-mask KV layout, as :mod:`.host_runner` reproduces it):
the chunk's token ids padded to the AR length, the attention mask with only the causal block of
the new tokens open (the last AR columns; 65535 attends), positions ``0 .. AR-1``, and every KV
cache empty (zeros). Built from :class:`~pytest_qnn_genai.runtime.pte_info.MethodInfo` (no
program load), so a phone build, which this machine cannot load, gets its inputs too: the gate
judges ``prefill_forward`` on a phone through ``qnn_executor_runner`` with them.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pytest_qnn_genai.runtime.pte_info import MethodInfo


class PrefillInputError(ValueError):
    """The method is not a hybrid prefill graph, or the prompt does not fit one chunk."""


def first_chunk_inputs(meta: MethodInfo, prompt_ids: Sequence[int]) -> list[np.ndarray]:
    """``meta``'s inputs for the first ``len(prompt_ids)`` tokens of a prompt (one AR chunk)."""
    ins = meta.inputs
    if len(ins) < 5 or (len(ins) - 3) % 2 or len(ins[1].shape) < 2:
        raise PrefillInputError(f"{meta.name}: {len(ins)} inputs are not the hybrid layout")
    ar, ctx = ins[0].shape[-1], ins[1].shape[-1]
    if not 1 <= len(prompt_ids) <= ar:
        raise PrefillInputError(f"{meta.name}: a {len(prompt_ids)}-token prompt is not one "
                                f"chunk of AR {ar}")
    tokens = np.zeros(ins[0].shape, dtype=np.dtype(ins[0].dtype))
    tokens.reshape(-1)[:len(prompt_ids)] = prompt_ids
    mask_type = np.dtype(ins[1].dtype)
    mask = np.zeros(ins[1].shape, dtype=mask_type)
    rows = mask.reshape(-1, ar, ctx)
    rows[:, :, ctx - ar:][:, np.tril(np.ones((ar, ar), dtype=bool))] = np.iinfo(mask_type).max
    positions = np.arange(ar, dtype=np.dtype(ins[2].dtype)).reshape(ins[2].shape)
    caches = [np.zeros(t.shape, dtype=np.dtype(t.dtype)) for t in ins[3:]]
    return [tokens, mask, positions, *caches]
