"""Checkpoint layouts every family shares: reading a file checked against the shapes its params
imply, and the RoPE row orders of the query/key weights.

Meta's checkpoints (llama2.c's, ``consolidated.00.pth``) keep each head's wq/wk rows in
interleaved-pair RoPE order; Hugging Face's and ExecuTorch's ``static_llama`` rotate half-split
pairs. llama.py permutes Meta rows when its model config says ``transform_weight``
(``LLMModelConfig``; :func:`transform_weight` does the same); Hugging Face checkpoints are
already half-split (their configs say ``transform_weight = False``).
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from pytest_qnn_genai.models.case import ModelCaseError
from pytest_qnn_genai.models.params import ModelParams


def interleaved_to_half_split(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Meta → HF row order of wq/wk: llama.py's ``transform_weight`` permute (with
    ``partial_rotary_factor`` 1) and HF's ``convert_llama_weights_to_hf``."""
    out, inp = w.shape
    return w.view(heads, out // heads // 2, 2, inp).transpose(1, 2).reshape(out, inp)


def half_split_to_interleaved(w: torch.Tensor, heads: int) -> torch.Tensor:
    """HF → Meta row order of wq/wk (the inverse of :func:`interleaved_to_half_split`)."""
    out, inp = w.shape
    return w.view(heads, 2, out // heads // 2, inp).transpose(1, 2).reshape(out, inp)


def transform_weight(sd: dict[str, torch.Tensor], params: ModelParams) -> dict[str, torch.Tensor]:
    """``sd`` with every layer's wq/wk rows permuted as llama.py does for a config with
    ``transform_weight`` (Meta's interleaved order → ``static_llama``'s half-split)."""
    out = dict(sd)
    for i in range(params["n_layers"]):
        for w, heads in (("wq", params["n_heads"]), ("wk", params["n_kv_heads"])):
            key = f"layers.{i}.attention.{w}.weight"
            out[key] = interleaved_to_half_split(sd[key], heads)
    return out


def torch_state_dict(path: str | Path, *, strip: str = "") -> dict[str, torch.Tensor]:
    """The state dict in a ``torch.save`` file (memory-mapped: shapes are read without loading
    the tensors), under ``"model"`` if it has one (llama.py takes both), ``strip`` removed from
    its keys. An unreadable file is one :class:`ModelCaseError` line."""
    try:
        data = torch.load(path, weights_only=True, map_location="cpu", mmap=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file is one kind of error here
        raise ModelCaseError(f"{path}: cannot read checkpoint ({type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''})") from None
    sd = data.get("model", data) if isinstance(data, dict) else None
    if not isinstance(sd, dict):
        raise ModelCaseError(f"{path}: no state dict in the checkpoint")
    return {k.removeprefix(strip): v for k, v in sd.items()}


def safetensors_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape in a ``.safetensors`` file, from its header only."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    except Exception as e:  # noqa: BLE001 - any unreadable file is one kind of error here
        raise ModelCaseError(f"{path}: cannot read safetensors ({type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''})") from None


def check_shapes(path: str | Path, got: Mapping[str, torch.Tensor | tuple[int, ...]],
                 want: dict[str, tuple[int, ...]]) -> None:
    """Raise one :class:`ModelCaseError` line unless ``got`` (tensors or shapes by key) has
    exactly ``want``'s keys and shapes."""
    missing, extra = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
    if missing or extra:
        raise ModelCaseError(f"{path}: checkpoint keys do not match params: missing "
                             f"{missing[:3]}, unexpected {extra[:3]}")
    for key, shape in want.items():
        value = got[key]
        have = (list(value.shape) if isinstance(value, torch.Tensor) else
                list(value) if isinstance(value, tuple) else type(value).__name__)
        if have != list(shape):
            raise ModelCaseError(f"{path}: wrong checkpoint shape for {key}: expected "
                                 f"{list(shape)}, got {have}")


# Meta name: Hugging Face name, inside layers.{i} (executorch's convert_weights tables; the
# q/k norms are Qwen3's)
HF_LAYER_KEYS = {
    "attention.wq.weight": "self_attn.q_proj.weight", "attention.wk.weight": "self_attn.k_proj.weight",
    "attention.wv.weight": "self_attn.v_proj.weight", "attention.wo.weight": "self_attn.o_proj.weight",
    "attention.q_norm_fn.weight": "self_attn.q_norm.weight",
    "attention.k_norm_fn.weight": "self_attn.k_norm.weight",
    "feed_forward.w1.weight": "mlp.gate_proj.weight", "feed_forward.w2.weight": "mlp.down_proj.weight",
    "feed_forward.w3.weight": "mlp.up_proj.weight", "attention_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
}


def meta_to_hf(sd: dict[str, torch.Tensor], params: ModelParams, *,
               permute: bool = True) -> dict[str, torch.Tensor]:
    """A Meta-layout state dict in Hugging Face's (``model.layers.{i}.self_attn.q_proj``, ...,
    with ``lm_head``): fp32 copies, wq/wk rows from interleaved to half-split when ``permute``
    (Meta's own checkpoints; a Meta dict converted from HF is half-split already)."""
    hf = {"model.embed_tokens.weight": sd["tok_embeddings.weight"],
          "model.norm.weight": sd["norm.weight"], "lm_head.weight": sd["output.weight"]}
    for i in range(params["n_layers"]):
        for meta, name in HF_LAYER_KEYS.items():
            if f"layers.{i}.{meta}" in sd:
                hf[f"model.layers.{i}.{name}"] = sd[f"layers.{i}.{meta}"]
        if permute:
            for w, name, heads in (("wq", "q_proj", params["n_heads"]),
                                   ("wk", "k_proj", params["n_kv_heads"])):
                hf[f"model.layers.{i}.self_attn.{name}.weight"] = interleaved_to_half_split(
                    sd[f"layers.{i}.attention.{w}.weight"], heads)
    return {k: v.detach().float().clone().contiguous() for k, v in hf.items()}


def hf_to_meta(hf: dict[str, torch.Tensor], params: ModelParams, *,
               permute: bool = True) -> dict[str, torch.Tensor]:
    """A Hugging Face state dict in Meta's layout (fp32 copies; ``output`` = the tied embedding
    when it has no ``lm_head``), wq/wk rows back to interleaved order when ``permute``."""
    sd = {"tok_embeddings.weight": hf["model.embed_tokens.weight"],
          "norm.weight": hf["model.norm.weight"],
          "output.weight": hf.get("lm_head.weight", hf["model.embed_tokens.weight"])}
    for i in range(params["n_layers"]):
        for meta, name in HF_LAYER_KEYS.items():
            if f"model.layers.{i}.{name}" in hf:
                sd[f"layers.{i}.{meta}"] = hf[f"model.layers.{i}.{name}"]
        if permute:
            for w, heads in (("wq", params["n_heads"]), ("wk", params["n_kv_heads"])):
                key = f"layers.{i}.attention.{w}.weight"
                sd[key] = half_split_to_interleaved(sd[key], heads)
    return {k: v.detach().float().clone().contiguous() for k, v in sd.items()}
