"""The vocabulary of a static LLM program, shared by every flow, runner and check.

A hybrid ``.pte`` (ExecuTorch's static LLaMA, ``--model_mode hybrid``) has two graph methods, the
prefill graph (AR = ``prefill_ar_len`` tokens per call) and the decode graph (AR = 1), plus
constant methods (``get_max_seq_len``, ``get_logits_scale``, ...). A kv-mode ``.pte``
(``--model_mode kv``) has the decode graph alone: the prompt goes through it one token per call,
as upstream's runner does with ``--eval_mode 0``. The flows also keep the
calibration-shaped QDQ graph (AR = ``max_context_len``, empty KV cache), which is never lowered:
it is the CPU reference. A flow's artifacts are named by the keys below whatever the flow.
"""
from __future__ import annotations

PREFILL = "prefill_forward"
DECODE = "kv_forward"
CALIBRATION = "calibration"
LOWERED_GRAPHS = (DECODE, PREFILL)  # executorch's DECODER_GRAPH_NAMES order
GRAPH_METHODS = tuple(sorted(LOWERED_GRAPHS))  # as a program lists them
KV_MODE = "kv"  # llama.py's --model_mode that lowers the decode graph alone


def lowered_graphs(model_mode: str) -> tuple[str, ...]:
    """The graphs a build of ``model_mode`` lowers, in executorch's order."""
    return (DECODE,) if model_mode == KV_MODE else LOWERED_GRAPHS


TEXT_DECODER = "text_decoder"  # artifact key: the hybrid prefill + decode program
QDQ = "qdq"  # artifact key: the calibration-shaped QDQ graph, the CPU reference
ARTIFACT_KEYS = (TEXT_DECODER, QDQ)
