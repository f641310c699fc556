"""The llama2.c model: architecture, checkpoint format, and the static-llama view of it.

:class:`Transformer` is the project's own implementation of llama2.c's ``model.py`` (RMSNorm,
interleaved-pair RoPE, GQA attention, SwiGLU, tied embedding/output). Checkpoints use llama2.c's
layout, ``{"model": {"_orig_mod." + key: tensor}, "model_args": {...}}``. ExecuTorch's Qualcomm
``static_llama`` uses half-split RoPE, so its loader permutes ``wq``/``wk`` rows per head
(:func:`to_static_llama_state_dict` does the same).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sentencepiece as spm
import torch
import torch.nn.functional as F
from torch import nn

from pytest_qnn_genai.models.registry import ModelCaseError

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase

COMPILED_PREFIX = "_orig_mod."  # llama2.c's train.py saves a torch.compile'd module
NORM_EPS = 1e-5
ROPE_THETA = 10000.0


def hidden_dim(params: dict[str, Any]) -> int:
    """SwiGLU hidden size by llama2.c's rule: 2/3 of 4*dim, rounded up to ``multiple_of``."""
    h = int(2 * 4 * params["dim"] / 3)
    m = params["multiple_of"]
    return m * ((h + m - 1) // m)


def expected_shapes(params: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every checkpoint key (without ``_orig_mod.``) and its shape for ``params``."""
    dim, vocab, hid = params["dim"], params["vocab_size"], hidden_dim(params)
    kv_dim = dim // params["n_heads"] * params["n_kv_heads"]
    shapes = {"tok_embeddings.weight": (vocab, dim)}
    for i in range(params["n_layers"]):
        p = f"layers.{i}."
        shapes.update({
            p + "attention.wq.weight": (dim, dim), p + "attention.wk.weight": (kv_dim, dim),
            p + "attention.wv.weight": (kv_dim, dim), p + "attention.wo.weight": (dim, dim),
            p + "feed_forward.w1.weight": (hid, dim), p + "feed_forward.w2.weight": (dim, hid),
            p + "feed_forward.w3.weight": (hid, dim),
            p + "attention_norm.weight": (dim,), p + "ffn_norm.weight": (dim,)})
    shapes.update({"norm.weight": (dim,), "output.weight": (vocab, dim)})
    return shapes


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.weight


def rope_tables(head_dim: int, n_pos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of RoPE angles, ``[n_pos, head_dim // 2]``."""
    freqs = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(n_pos).float(), freqs)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs ``(x[2i], x[2i+1])`` of ``x [B, T, H, D]`` (llama2.c style)."""
    xr, xi = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((xr * cos - xi * sin, xr * sin + xi * cos), dim=-1).flatten(3)


class Attention(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads = p["n_heads"], p["n_kv_heads"]
        self.head_dim = p["dim"] // self.n_heads
        self.wq = nn.Linear(p["dim"], self.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(p["dim"], self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(p["dim"], self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(self.n_heads * self.head_dim, p["dim"], bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = apply_rope(self.wq(x).view(b, t, self.n_heads, self.head_dim), cos, sin)
        k = apply_rope(self.wk(x).view(b, t, self.n_kv_heads, self.head_dim), cos, sin)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim)
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        hid = hidden_dim(p)
        self.w1 = nn.Linear(p["dim"], hid, bias=False)
        self.w2 = nn.Linear(hid, p["dim"], bias=False)
        self.w3 = nn.Linear(p["dim"], hid, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        self.attention, self.feed_forward = Attention(p), FeedForward(p)
        self.attention_norm, self.ffn_norm = RMSNorm(p["dim"]), RMSNorm(p["dim"])

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """llama2.c's decoder; parameter names match its checkpoints."""

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__()
        self.params = dict(params)
        self.tok_embeddings = nn.Embedding(params["vocab_size"], params["dim"])
        self.layers = nn.ModuleList(Block(params) for _ in range(params["n_layers"]))
        self.norm = RMSNorm(params["dim"])
        self.output = nn.Linear(params["dim"], params["vocab_size"], bias=False)
        self.output.weight = self.tok_embeddings.weight  # tied, as in llama2.c
        cos, sin = rope_tables(params["dim"] // params["n_heads"], params["max_seq_len"])
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for name, w in self.named_parameters():  # llama2.c's initialisation
            if w.dim() == 2:
                std = 0.02 / math.sqrt(2 * params["n_layers"]) if name.endswith(
                    ("w3.weight", "wo.weight")) else 0.02
                nn.init.normal_(w, mean=0.0, std=std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, T, vocab]`` for token ids ``[B, T]``."""
        t = tokens.shape[1]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, self.rope_cos[:t], self.rope_sin[:t])
        return self.output(self.norm(x))


def save_checkpoint(model: Transformer, path: str | Path) -> None:
    """Write ``model`` in llama2.c's checkpoint layout (fp32, ``_orig_mod.`` keys)."""
    sd = {COMPILED_PREFIX + k: v.detach().float() for k, v in model.state_dict().items()}
    torch.save({"model": sd, "model_args": model.params}, path)


def load_checkpoint(path: str | Path, params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The checkpoint's state dict (``_orig_mod.`` stripped), each tensor checked against ``params``
    (a mismatch raises :class:`ModelCaseError` with one line naming the key)."""
    try:
        ckpt = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any unreadable file is one kind of error here
        raise ModelCaseError(f"{path}: cannot read checkpoint ({type(e).__name__}: {e})") from None
    sd = ckpt.get("model", ckpt) if isinstance(ckpt, dict) else None
    if not isinstance(sd, dict):
        raise ModelCaseError(f"{path}: not a llama2.c checkpoint (no state dict)")
    sd = {k.removeprefix(COMPILED_PREFIX): v for k, v in sd.items()}
    want = expected_shapes(params)
    missing, extra = sorted(want.keys() - sd.keys()), sorted(sd.keys() - want.keys())
    if missing or extra:
        raise ModelCaseError(
            f"{path}: checkpoint keys do not match params: missing {missing[:3]}, "
            f"unexpected {extra[:3]}")
    for key, shape in want.items():
        got = list(sd[key].shape) if isinstance(sd[key], torch.Tensor) else type(sd[key]).__name__
        if got != list(shape):
            raise ModelCaseError(
                f"{path}: wrong checkpoint shape for {key}: expected {list(shape)}, got {got}")
    return sd


def half_split_rows(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Reorder each head's output rows from interleaved RoPE pairs to [evens, odds] (HF layout)."""
    out, inp = w.shape
    return w.view(heads, out // heads // 2, 2, inp).transpose(1, 2).reshape(out, inp)


def to_static_llama_state_dict(sd: dict[str, torch.Tensor],
                               params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """``sd`` with wq/wk permuted for static_llama's half-split RoPE, as ExecuTorch's loader does."""
    out = dict(sd)
    for i in range(params["n_layers"]):
        for name, heads in (("wq", params["n_heads"]), ("wk", params["n_kv_heads"])):
            key = f"layers.{i}.attention.{name}.weight"
            out[key] = half_split_rows(sd[key], heads)
    return out


def load_model(case: ModelCase) -> Transformer:
    """The case's checkpoint in :class:`Transformer`, in eval mode."""
    params = case.params_dict
    model = Transformer(params)
    model.load_state_dict(load_checkpoint(case.path("checkpoint"), params), strict=True)
    return model.eval()


@torch.no_grad()
def greedy(model: Transformer, ids: list[int], n: int, eos_id: int = 2) -> list[int]:
    """Up to ``n`` greedy tokens after ``ids`` (stops after ``eos_id``)."""
    seq, new = list(ids), []
    for _ in range(n):
        nxt = int(model(torch.tensor([seq]))[0, -1].argmax())
        seq.append(nxt)
        new.append(nxt)
        if nxt == eos_id:
            break
    return new


def greedy_fp32(case: ModelCase, prompt: str, n: int) -> list[int]:
    """fp32 reference: ``n`` greedy token ids after ``bos + encode(prompt)`` (this module's model)."""
    sp = spm.SentencePieceProcessor(model_file=str(case.path("tokenizer_model")))
    return greedy(load_model(case), [sp.bos_id()] + sp.encode(prompt), n, sp.eos_id())
