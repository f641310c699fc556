"""The shapes of a model case's JSON files. ``params.json``: the fields executorch's ``ModelArgs``
and the families read (the union over the families; a case's file holds its family's subset).

Typed so that a misspelt field is a type error at the reader, not a ``KeyError`` mid-build; the
file is not checked against it when it is read (``ModelArgs`` takes it as it is).
"""
from __future__ import annotations

from typing import TypedDict


class ModelParams(TypedDict, total=False):
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    multiple_of: int  # llama2.c / Llama 3: the feed-forward width is rounded up to it
    max_seq_len: int
    hidden_dim: int
    head_dim: int
    ffn_dim_multiplier: float
    norm_eps: float
    rope_theta: float
    use_scaled_rope: bool
    rope_scale_factor: float
    high_freq_factor: float
    partial_rotary_factor: float
    use_hf_rope: bool
    attention_qkv_bias: bool
    use_qk_norm: bool
    qk_norm_before_rope: bool


class CaseFile(TypedDict, total=False):
    """``case.json`` as the trainer writes it (:class:`~pytest_qnn_genai.models.case.ModelCase`
    reads and checks every field)."""

    name: str
    decoder_model: str
    checkpoint: str
    params: str
    tokenizer_model: str
    tokenizer_bin: str
    quant_recipe: str
    kv_io_bit_width: int
    model_mode: str
    prefill_ar_len: int
    max_seq_len: int
    max_context_len: int
    eval_prompt: str
    max_new_tokens: int
    calibration_prompts: list[str]
    variants: dict[str, dict[str, int]]
