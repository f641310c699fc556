"""The Llama 3.2 architecture at toy size: its config, its two weight layouts, its tiktoken tokenizer.

One set of weights is kept in two layouts:

- Meta's (``consolidated.00.pth`` + ``params.json``), what ExecuTorch's Qualcomm ``llama.py
  --decoder_model llama3_2-1b_instruct --checkpoint --params`` loads: a plain state dict with
  ``tok_embeddings``/``layers.{i}.attention.wq``/.../``output`` keys, wq/wk rows in Meta's
  interleaved-pair RoPE order. ``llama.py`` permutes those rows to the half-split order
  (``LLMModelConfig.transform_weight``) and loads them strictly into ``static_llama.LlamaModel``,
  so ``output.weight`` must be present even though the embeddings are tied.
- Hugging Face's (``config.json`` + ``model.safetensors``) for ``transformers.LlamaForCausalLM``,
  the independent fp32 reference: q/k rows in half-split order (``rotate_half``), lm_head tied.

``params.json`` holds only ``ModelArgs`` fields (``llama.py`` calls ``ModelArgs(**params)``). The
llama3 RoPE scaling lives in ``use_scaled_rope`` / ``rope_scale_factor`` / ``high_freq_factor``
(ExecuTorch's ``apply_scaling`` fixes ``low_freq_factor`` 1 and ``original_max_position_embeddings``
8192), which the HF config repeats as ``rope_parameters``. ``rope_scale_factor`` is written out:
``ModelArgs`` defaults it to 8 (Llama 3.1), Llama 3.2 uses 32.

The tokenizer is byte-level BPE in tiktoken's format (one ``base64(bytes) rank`` line per
mergeable token, ranks 0..n-1, the 256 single bytes first); the Llama 3 loaders append 256 special
tokens after the ranks, so ``<|begin_of_text|>`` = n, ``<|end_of_text|>`` = n+1, ``<|eot_id|>`` = n+9.
"""
from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from pytest_qnn_genai.models.registry import ModelCaseError

if TYPE_CHECKING:
    from transformers import LlamaConfig, LlamaForCausalLM

N_MERGES = 512
N_SPECIAL = 256  # pytorch_tokenizers' LLAMA_SPECIAL_TOKENS / the C++ Tiktoken's kSpecialTokensSize
N_BASE = 256 + N_MERGES
PARAMS: dict[str, Any] = {
    "dim": 64, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "vocab_size": N_BASE + N_SPECIAL,
    "ffn_dim_multiplier": 1.5, "multiple_of": 32, "norm_eps": 1e-05, "rope_theta": 500000.0,
    "use_scaled_rope": True, "rope_scale_factor": 32, "high_freq_factor": 4,
}
# The fields of ExecuTorch's apply_scaling (examples/models/llama/rope.py) it does not read from
# params: HF's llama3 rope must use the same, or the two references disagree.
LOW_FREQ_FACTOR, ORIGINAL_CONTEXT = 1.0, 8192
MAX_POSITIONS = 131072  # Llama 3.2's max_position_embeddings (HF wants it > ORIGINAL_CONTEXT)
CHAT_USER = "<|start_header_id|>user<|end_header_id|>\n\n"
CHAT_ASSISTANT = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"


def head_dim(params: dict[str, Any]) -> int:
    return params["dim"] // params["n_heads"]


def hidden_dim(params: dict[str, Any]) -> int:
    """SwiGLU width by ``ModelArgs.__post_init__``: 2/3 of 4*dim, times ffn_dim_multiplier,
    rounded up to ``multiple_of``."""
    h = int(params.get("ffn_dim_multiplier", 1.0) * int(2 * 4 * params["dim"] / 3))
    m = params["multiple_of"]
    return m * ((h + m - 1) // m)


def special_ids(n_base: int) -> dict[str, int]:
    """The Llama 3 special tokens and their ids for a tokenizer with ``n_base`` ranks."""
    from pytorch_tokenizers.constants import LLAMA_SPECIAL_TOKENS

    return {tok: n_base + i for i, tok in enumerate(LLAMA_SPECIAL_TOKENS)}


def hf_config(params: dict[str, Any]) -> LlamaConfig:
    """The ``transformers.LlamaConfig`` equal to ``params`` (tied embeddings, as Llama 3.2 1B/3B)."""
    from transformers import LlamaConfig

    n_base = params["vocab_size"] - N_SPECIAL
    sp = special_ids(n_base)
    return LlamaConfig(
        vocab_size=params["vocab_size"], hidden_size=params["dim"],
        intermediate_size=hidden_dim(params), num_hidden_layers=params["n_layers"],
        num_attention_heads=params["n_heads"], num_key_value_heads=params["n_kv_heads"],
        head_dim=head_dim(params), hidden_act="silu", max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=params["norm_eps"], tie_word_embeddings=True,
        bos_token_id=sp["<|begin_of_text|>"],
        eos_token_id=[sp["<|end_of_text|>"], sp["<|eom_id|>"], sp["<|eot_id|>"]],
        rope_parameters={
            "rope_type": "llama3", "rope_theta": params["rope_theta"],
            "factor": float(params["rope_scale_factor"]), "low_freq_factor": LOW_FREQ_FACTOR,
            "high_freq_factor": float(params["high_freq_factor"]),
            "original_max_position_embeddings": ORIGINAL_CONTEXT},
        architectures=["LlamaForCausalLM"])


def expected_shapes(params: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every Meta-layout checkpoint key and its shape for ``params``."""
    dim, vocab, hid = params["dim"], params["vocab_size"], hidden_dim(params)
    q_dim, kv_dim = params["n_heads"] * head_dim(params), params["n_kv_heads"] * head_dim(params)
    shapes = {"tok_embeddings.weight": (vocab, dim)}
    for i in range(params["n_layers"]):
        p = f"layers.{i}."
        shapes.update({
            p + "attention.wq.weight": (q_dim, dim), p + "attention.wk.weight": (kv_dim, dim),
            p + "attention.wv.weight": (kv_dim, dim), p + "attention.wo.weight": (dim, q_dim),
            p + "feed_forward.w1.weight": (hid, dim), p + "feed_forward.w2.weight": (dim, hid),
            p + "feed_forward.w3.weight": (hid, dim),
            p + "attention_norm.weight": (dim,), p + "ffn_norm.weight": (dim,)})
    shapes.update({"norm.weight": (dim,), "output.weight": (vocab, dim)})
    return shapes


def interleaved_to_half_split(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Meta → HF row order of wq/wk: what ``llama.py``'s ``transform_weight`` permute does (with
    ``partial_rotary_factor`` 1) and what HF's ``convert_llama_weights_to_hf`` does."""
    out, inp = w.shape
    return w.view(heads, out // heads // 2, 2, inp).transpose(1, 2).reshape(out, inp)


def half_split_to_interleaved(w: torch.Tensor, heads: int) -> torch.Tensor:
    """HF → Meta row order of wq/wk (the inverse of :func:`interleaved_to_half_split`)."""
    out, inp = w.shape
    return w.view(heads, 2, out // heads // 2, inp).transpose(1, 2).reshape(out, inp)


_LAYER_KEYS = {  # Meta name: HF name, inside layers.{i}
    "attention.wq.weight": "self_attn.q_proj.weight", "attention.wk.weight": "self_attn.k_proj.weight",
    "attention.wv.weight": "self_attn.v_proj.weight", "attention.wo.weight": "self_attn.o_proj.weight",
    "feed_forward.w1.weight": "mlp.gate_proj.weight", "feed_forward.w2.weight": "mlp.down_proj.weight",
    "feed_forward.w3.weight": "mlp.up_proj.weight", "attention_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
}


def hf_to_meta(hf: dict[str, torch.Tensor], params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A ``LlamaForCausalLM`` state dict in Meta's layout (fp32 copies; ``output`` = the tied
    embedding when the HF dict has no ``lm_head``)."""
    sd = {"tok_embeddings.weight": hf["model.embed_tokens.weight"], "norm.weight": hf["model.norm.weight"],
          "output.weight": hf.get("lm_head.weight", hf["model.embed_tokens.weight"])}
    for i in range(params["n_layers"]):
        for meta, name in _LAYER_KEYS.items():
            sd[f"layers.{i}.{meta}"] = hf[f"model.layers.{i}.{name}"]
        for w, heads in (("wq", params["n_heads"]), ("wk", params["n_kv_heads"])):
            key = f"layers.{i}.attention.{w}.weight"
            sd[key] = half_split_to_interleaved(sd[key], heads)
    return {k: v.detach().float().clone().contiguous() for k, v in sd.items()}


def meta_to_hf(sd: dict[str, torch.Tensor], params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A Meta-layout state dict in ``LlamaForCausalLM``'s layout (with ``lm_head``)."""
    hf = {"model.embed_tokens.weight": sd["tok_embeddings.weight"], "model.norm.weight": sd["norm.weight"],
          "lm_head.weight": sd["output.weight"]}
    for i in range(params["n_layers"]):
        for meta, name in _LAYER_KEYS.items():
            hf[f"model.layers.{i}.{name}"] = sd[f"layers.{i}.{meta}"]
        for w, name, heads in (("wq", "q_proj", params["n_heads"]), ("wk", "k_proj", params["n_kv_heads"])):
            hf[f"model.layers.{i}.self_attn.{name}.weight"] = interleaved_to_half_split(
                sd[f"layers.{i}.attention.{w}.weight"], heads)
    return {k: v.detach().float().clone().contiguous() for k, v in hf.items()}


def to_static_llama_state_dict(sd: dict[str, torch.Tensor],
                               params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """``sd`` as ``llama.py`` loads it into ``static_llama.LlamaModel`` (wq/wk permuted)."""
    out = dict(sd)
    for i in range(params["n_layers"]):
        for w, heads in (("wq", params["n_heads"]), ("wk", params["n_kv_heads"])):
            key = f"layers.{i}.attention.{w}.weight"
            out[key] = interleaved_to_half_split(sd[key], heads)
    return out


def save_checkpoint(sd: dict[str, torch.Tensor], path: str | Path) -> None:
    """Write a Meta-layout checkpoint (a plain state dict, like ``consolidated.00.pth``)."""
    torch.save({k: v.detach().float().contiguous() for k, v in sd.items()}, path)


def load_checkpoint(path: str | Path, params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A Meta-layout checkpoint, each tensor checked against ``params`` (a mismatch raises
    :class:`ModelCaseError` with one line naming the key)."""
    try:
        sd = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any unreadable file is one kind of error here
        raise ModelCaseError(f"{path}: cannot read checkpoint ({type(e).__name__}: {e})") from None
    sd = sd.get("model", sd) if isinstance(sd, dict) else None  # llama.py accepts both
    if not isinstance(sd, dict):
        raise ModelCaseError(f"{path}: not a Meta-layout checkpoint (no state dict)")
    want = expected_shapes(params)
    missing, extra = sorted(want.keys() - sd.keys()), sorted(sd.keys() - want.keys())
    if missing or extra:
        raise ModelCaseError(f"{path}: checkpoint keys do not match params: missing {missing[:3]}, "
                             f"unexpected {extra[:3]}")
    for key, shape in want.items():
        got = list(sd[key].shape) if isinstance(sd[key], torch.Tensor) else type(sd[key]).__name__
        if got != list(shape):
            raise ModelCaseError(
                f"{path}: wrong checkpoint shape for {key}: expected {list(shape)}, got {got}")
    return sd


def save_hf(sd: dict[str, torch.Tensor], params: dict[str, Any], folder: str | Path) -> None:
    """Write the Meta-layout ``sd`` as ``config.json`` + ``model.safetensors`` into ``folder``."""
    from safetensors.torch import save_file

    folder = Path(folder)
    hf = meta_to_hf(sd, params)
    del hf["lm_head.weight"]  # tied: transformers re-ties it to embed_tokens on load
    hf_config(params).save_pretrained(folder)
    save_file(dict(sorted(hf.items())), str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "model.safetensors").chmod(0o644)  # safetensors writes 0600


def load_hf(folder: str | Path) -> LlamaForCausalLM:
    """``LlamaForCausalLM`` from ``folder`` (fp32, eager attention, eval mode)."""
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32,
                                            attn_implementation="eager").eval()


# -- tokenizer -----------------------------------------------------------------------------------


def pretokens(texts: Iterable[str]) -> Counter[str]:
    """How often each pre-token (Llama 3 / cl100k split pattern) occurs in ``texts``."""
    import regex
    from pytorch_tokenizers.constants import CL100K_PAT_STR

    pat, counts = regex.compile(CL100K_PAT_STR), Counter()
    for t in texts:
        counts.update(pat.findall(t))
    return counts


def train_bpe(texts: Iterable[str], n_merges: int = N_MERGES) -> dict[bytes, int]:
    """Byte-level BPE ranks: the 256 bytes, then ``n_merges`` merges, most frequent pair first
    (ties broken by the pair's bytes, so the result depends only on ``texts``)."""
    words = {tuple(bytes([b]) for b in w.encode()): c for w, c in pretokens(texts).items()}
    ranks = {bytes([b]): b for b in range(256)}
    while len(ranks) < 256 + n_merges:
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for w, c in words.items():
            for pair in zip(w, w[1:]):
                pairs[pair] += c
        fresh = [(c, p) for p, c in pairs.items() if p[0] + p[1] not in ranks]
        if not fresh:
            raise ValueError(f"the text has room for only {len(ranks) - 256} merges, not {n_merges}")
        _, (a, b) = max(fresh)
        ranks[a + b] = len(ranks)
        merged = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return ranks


def save_tiktoken(ranks: dict[bytes, int], path: str | Path) -> None:
    """Write ranks in tiktoken's ``.tiktoken`` / Llama 3 ``tokenizer.model`` format."""
    lines = [f"{base64.b64encode(tok).decode()} {rank}\n" for tok, rank in
             sorted(ranks.items(), key=lambda kv: kv[1])]
    Path(path).write_text("".join(lines))


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer as ``llama.py`` gets it (``pytorch_tokenizers.TiktokenTokenizer``)."""
    from pytorch_tokenizers import TiktokenTokenizer

    return TiktokenTokenizer(model_path=str(path))


def chat_ids(tok: Any, prompt: str, n_base: int) -> list[int]:
    """``bos`` + the llama3 template qnn_llama_runner wraps a prompt in (no system prompt)."""
    sp = special_ids(n_base)
    return ([sp["<|begin_of_text|>"], sp["<|start_header_id|>"]] + tok.encode("user", bos=False, eos=False)
            + [sp["<|end_header_id|>"]] + tok.encode("\n\n", bos=False, eos=False)
            + tok.encode(prompt, bos=False, eos=False)
            + [sp["<|eot_id|>"], sp["<|start_header_id|>"]]
            + tok.encode("assistant", bos=False, eos=False)
            + [sp["<|end_header_id|>"]] + tok.encode("\n\n", bos=False, eos=False))


@torch.no_grad()
def greedy(model: torch.nn.Module, ids: list[int], n: int, stop: Iterable[int] = ()) -> list[int]:
    """Up to ``n`` greedy tokens of an HF causal LM after ``ids`` (stops after a ``stop`` id)."""
    seq, new, stop = list(ids), [], set(stop)
    for _ in range(n):
        nxt = int(model(torch.tensor([seq])).logits[0, -1].argmax())
        seq.append(nxt)
        new.append(nxt)
        if nxt in stop:
            break
    return new


def case_files(folder: str | Path) -> dict[str, Path]:
    """The model case's files by role."""
    folder = Path(folder)
    return {"checkpoint": folder / "consolidated.00.pth", "params": folder / "params.json",
            "tokenizer_model": folder / "tokenizer.model", "hf_config": folder / "config.json",
            "hf_weights": folder / "model.safetensors"}


def read_params(folder: str | Path) -> dict[str, Any]:
    return json.loads(case_files(folder)["params"].read_text())
