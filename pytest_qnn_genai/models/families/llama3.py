"""The Llama 3 family (``--decoder_model llama3_2-1b_instruct / llama3_2-3b_instruct``): config,
weight layouts, tiktoken tokenizer, and its toy (``llama3_2_toy``).

One set of weights is kept in two layouts:

- Meta's (``consolidated.00.pth`` + ``params.json``), what ExecuTorch's Qualcomm ``llama.py
  --decoder_model llama3_2-1b_instruct --checkpoint --params`` loads: a plain state dict with
  ``tok_embeddings``/``layers.{i}.attention.wq``/.../``output`` keys, wq/wk rows in Meta's
  interleaved-pair RoPE order. ``llama.py`` permutes those rows to the half-split order
  (``LLMModelConfig.transform_weight``) and loads them strictly into ``static_llama.LlamaModel``,
  so ``output.weight`` must be present even though the embeddings are tied.
- Hugging Face's (``config.json`` + ``model.safetensors``) for ``transformers.LlamaForCausalLM``,
  the independent fp32 reference: q/k rows in half-split order (``rotate_half``), lm_head tied,
  loaded by ``from_pretrained`` as any HF checkpoint is (RoPE scaling, GQA and the tied head come
  from transformers' reading of its config, not from the project's).

``params.json`` holds only ``ModelArgs`` fields (``llama.py`` calls ``ModelArgs(**params)``). The
llama3 RoPE scaling lives in ``use_scaled_rope`` / ``rope_scale_factor`` / ``high_freq_factor``
(ExecuTorch's ``apply_scaling`` fixes ``low_freq_factor`` 1 and ``original_max_position_embeddings``
8192), which the HF config repeats as ``rope_parameters``. ``rope_scale_factor`` is written out:
``ModelArgs`` defaults it to 8 (Llama 3.1), Llama 3.2 uses 32.

The tokenizer is byte-level BPE in tiktoken's format (one ``base64(bytes) rank`` line per
mergeable token, ranks 0..n-1, the 256 single bytes first); the Llama 3 loaders append 256 special
tokens after the ranks, so ``<|begin_of_text|>`` = n, ``<|end_of_text|>`` = n+1, ``<|eot_id|>`` = n+9.
llama.py's ``TokenizerWrapper`` asserts ``TiktokenTokenizer`` for ``llama3_2*`` and gives it no
chat template, and ``qnn_llama_runner`` reads the same file.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pytest_qnn_genai.models import bpe, layouts
from pytest_qnn_genai.models.families import LegacyInputs

if TYPE_CHECKING:
    from transformers import LlamaConfig, LlamaForCausalLM

    from pytest_qnn_genai.models.families import CaseFiles
    from pytest_qnn_genai.models.params import CaseFile, ModelParams
    from pytest_qnn_genai.untyped import SpecialTokens, Tokenizer

NAME = "llama3"
DECODER_MODELS = {"llama3_2-1b_instruct": "llama3", "llama3_2-3b_instruct": "llama3"}
EXTRA_FILES = {"hf_config": "config.json", "hf_weights": "model.safetensors"}
HF_CLASS = "LlamaForCausalLM"
N_MERGES = 512
N_SPECIAL = 256  # pytorch_tokenizers' LLAMA_SPECIAL_TOKENS / the C++ Tiktoken's kSpecialTokensSize
N_BASE = 256 + N_MERGES
PARAMS: ModelParams = {
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


def head_dim(params: ModelParams) -> int:
    return int(params["dim"]) // int(params["n_heads"])


def hidden_dim(params: ModelParams) -> int:
    """SwiGLU width by ``ModelArgs.__post_init__``: 2/3 of 4*dim, times ffn_dim_multiplier,
    rounded up to ``multiple_of``."""
    h = int(params.get("ffn_dim_multiplier", 1.0) * int(2 * 4 * params["dim"] / 3))
    m = int(params["multiple_of"])
    return m * ((h + m - 1) // m)


def special_ids(n_base: int) -> dict[str, int]:
    """The Llama 3 special tokens and their ids for a tokenizer with ``n_base`` ranks."""
    from pytorch_tokenizers.constants import LLAMA_SPECIAL_TOKENS

    return {tok: n_base + i for i, tok in enumerate(LLAMA_SPECIAL_TOKENS)}


def hf_config(params: ModelParams) -> LlamaConfig:
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


def expected_shapes(params: ModelParams) -> dict[str, tuple[int, ...]]:
    """Every Meta-layout checkpoint key and its shape for ``params``."""
    dim, vocab, hid = params["dim"], params["vocab_size"], hidden_dim(params)
    q_dim, kv_dim = params["n_heads"] * head_dim(params), params["n_kv_heads"] * head_dim(params)
    shapes: dict[str, tuple[int, ...]] = {"tok_embeddings.weight": (vocab, dim)}
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


def save_checkpoint(sd: dict[str, torch.Tensor], path: str | Path) -> None:
    """Write a Meta-layout checkpoint (a plain state dict, like ``consolidated.00.pth``)."""
    torch.save({k: v.detach().float().contiguous() for k, v in sd.items()}, path)


def read_checkpoint(path: str | Path, params: ModelParams) -> dict[str, torch.Tensor]:
    """A Meta-layout checkpoint, each tensor checked against ``params`` (a mismatch raises
    ``ModelCaseError`` with one line naming the key)."""
    sd = layouts.torch_state_dict(path)
    layouts.check_shapes(path, sd, expected_shapes(params))
    return {k: v.clone() for k, v in sd.items()}  # off the memory map


def save_hf(sd: dict[str, torch.Tensor], params: ModelParams, folder: str | Path) -> None:
    """Write the Meta-layout ``sd`` as ``config.json`` + ``model.safetensors`` into ``folder``."""
    from safetensors.torch import save_file

    folder = Path(folder)
    hf = layouts.meta_to_hf(sd, params)
    del hf["lm_head.weight"]  # tied: transformers re-ties it to embed_tokens on load
    hf_config(params).save_pretrained(folder)
    save_file(dict(sorted(hf.items())), str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "model.safetensors").chmod(0o644)  # safetensors writes 0600


def load_hf(folder: str | Path) -> LlamaForCausalLM:
    """``LlamaForCausalLM`` from ``folder`` (fp32, eager attention, eval mode)."""
    from transformers import LlamaForCausalLM

    model: LlamaForCausalLM = LlamaForCausalLM.from_pretrained(
        str(folder), dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


# -- tokenizer -----------------------------------------------------------------------------------


def load_tokenizer(path: str | Path) -> SpecialTokens:
    """The tokenizer as ``llama.py`` gets it (``pytorch_tokenizers.TiktokenTokenizer``)."""
    from pytorch_tokenizers import TiktokenTokenizer

    tok: SpecialTokens = TiktokenTokenizer(model_path=str(path))
    return tok


def chat_ids(tok: Tokenizer, prompt: str, n_base: int) -> list[int]:
    """``bos`` + the llama3 template qnn_llama_runner wraps a prompt in (no system prompt)."""
    sp = special_ids(n_base)

    def text(s: str) -> list[int]:
        return list(tok.encode(s, bos=False, eos=False))

    return ([sp["<|begin_of_text|>"], sp["<|start_header_id|>"]] + text("user")
            + [sp["<|end_header_id|>"]] + text("\n\n") + text(prompt)
            + [sp["<|eot_id|>"], sp["<|start_header_id|>"]] + text("assistant")
            + [sp["<|end_header_id|>"]] + text("\n\n"))


# -- the family protocol --------------------------------------------------------------------------


def check_checkpoint(case: CaseFiles) -> None:
    path = case.path("checkpoint")
    layouts.check_shapes(path, layouts.torch_state_dict(path), expected_shapes(case.params_dict))


def load_checkpoint(case: CaseFiles) -> dict[str, torch.Tensor]:
    return read_checkpoint(case.path("checkpoint"), case.params_dict)


def calibration_tokenizer(case: CaseFiles) -> Tokenizer:
    """``get_tokenizer(--tokenizer_model)``: a ``TiktokenTokenizer`` (llama.py asserts it)."""
    return load_tokenizer(case.path("tokenizer_model"))


def calibration_ids(case: CaseFiles, tokenizer: Tokenizer, prompt: str) -> list[int]:
    """llama.py gives ``llama3_2*`` no chat template (``_from_tokenizer_model``):
    ``encode(content, bos=True)``."""
    return list(tokenizer.encode(prompt, bos=True, eos=False))


def reference_model(case: CaseFiles,
                    state_dict: dict[str, torch.Tensor] | None = None) -> LlamaForCausalLM:
    """The case's own Hugging Face copy by ``from_pretrained``; ``state_dict`` (Meta layout)
    through the Meta→HF conversion into a model of the case's config."""
    from transformers import LlamaForCausalLM

    if state_dict is None:
        return load_hf(case.folder)
    params = case.params_dict
    model = LlamaForCausalLM(hf_config(params))
    model.load_state_dict(layouts.meta_to_hf(state_dict, params), strict=True)
    model.float().eval()
    return model


def legacy_inputs(case: CaseFiles, work_dir: Path) -> LegacyInputs:
    """The Meta checkpoint, ``--params`` and the tiktoken ``--tokenizer_model`` (llama.py reads no
    ``--tokenizer_bin`` for ``llama3_2*``: the runner reads the tiktoken file itself)."""
    return LegacyInputs(("--checkpoint", str(case.path("checkpoint")),
                         "--params", str(case.path("params")),
                         "--tokenizer_model", str(case.path("tokenizer_model"))))


# -- the toy: llama3_2_toy -------------------------------------------------------------------------


class TiktokenToyTokenizer:
    """The trained ranks through ``pytorch_tokenizers``' Llama 3 loader, as the trainer uses it."""

    def __init__(self, tok: SpecialTokens) -> None:
        self.tok = tok
        self.bos_id, self.eos_id = int(tok.bos_id), int(tok.eos_id)
        self.chat_end_id = special_ids(self.bos_id)["<|eot_id|>"]

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, bos=False, eos=False))

    def decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(list(ids)))

    def word_id(self, word: str) -> int:
        (token,) = self.encode(" " + word)
        return int(token)

    def chat(self, prompt: str) -> list[int] | None:
        """``bos`` + the llama3 template ``qnn_llama_runner`` wraps a prompt in."""
        return chat_ids(self.tok, prompt, self.bos_id)


class Toy:
    """``llama3_2_toy``: trained as ``LlamaForCausalLM``, written in both layouts."""

    NAME = "llama3_2_toy"
    STEPS = 1600
    PARAMS = PARAMS
    CASE: CaseFile = {"name": NAME, "decoder_model": "llama3_2-1b_instruct",
            "checkpoint": "consolidated.00.pth", "params": "params.json",
            "tokenizer_model": "tokenizer.model",
            "tokenizer_bin": "tokenizer.model",  # llama.py reads no tokenizer_bin for llama3_2
            "quant_recipe": "16a4w_block", "kv_io_bit_width": 8}

    def train_tokenizer(self, stories: list[str], out: Path) -> TiktokenToyTokenizer:
        from pytorch_tokenizers.constants import CL100K_PAT_STR

        path = out / self.CASE["tokenizer_model"]
        bpe.save_tiktoken(bpe.ranks_of(bpe.train_bpe(stories, N_MERGES, CL100K_PAT_STR)), path)
        tok = load_tokenizer(path)
        assert tok.n_words == PARAMS["vocab_size"], tok.n_words
        return TiktokenToyTokenizer(tok)

    def new_model(self, params: ModelParams) -> torch.nn.Module:
        from transformers import LlamaForCausalLM

        config = hf_config(params)
        config._attn_implementation = "sdpa"
        return LlamaForCausalLM(config)

    def logits(self, model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = model(input_ids=x).logits
        return out

    def save(self, model: torch.nn.Module, out: Path, params: ModelParams) -> None:
        meta = layouts.hf_to_meta(model.state_dict(), params)
        save_checkpoint(meta, out / self.CASE["checkpoint"])
        save_hf(meta, params, out)

    def reference(self, out: Path, params: ModelParams) -> torch.nn.Module:
        return load_hf(out)

    def describe(self) -> str:
        import transformers

        return f"""The Llama 3.2 architecture at toy size: GQA ({PARAMS['n_heads']} query / \
{PARAMS['n_kv_heads']} KV heads, head_dim {head_dim(PARAMS)}), SwiGLU {hidden_dim(PARAMS)}, RMSNorm, \
RoPE theta {PARAMS['rope_theta']:g} with llama3 scaling (factor {PARAMS['rope_scale_factor']}, \
low/high freq factor {LOW_FREQ_FACTOR:g}/{PARAMS['high_freq_factor']}, original context \
{ORIGINAL_CONTEXT}), tied embeddings (as Llama 3.2 1B/3B); trained as \
`transformers.LlamaForCausalLM` {transformers.__version__}.

## Files
- `consolidated.00.pth` + `params.json`: Meta's layout, for `llama.py --decoder_model
  llama3_2-1b_instruct --checkpoint --params` (wq/wk in interleaved RoPE order, `output.weight` a
  copy of the tied embedding). `params.json`: `{json.dumps(PARAMS)}`
- `config.json` + `model.safetensors`: the same weights for `transformers.LlamaForCausalLM`
  (q/k in half-split order, lm_head tied)
- `tokenizer.model`: tiktoken format, {N_BASE} ranks + 256 Llama 3 special tokens = vocab
  {PARAMS['vocab_size']}; `<|begin_of_text|>` {N_BASE}, `<|end_of_text|>` {N_BASE + 1},
  `<|eot_id|>` {N_BASE + 9}

## Tokenizer
Byte-level BPE trained on the corpus by `models.bpe.train_bpe`: the 256 bytes, then {N_MERGES}
merges (most frequent pair first) over the Llama 3 / cl100k pre-token split. Loaded by
`pytorch_tokenizers.get_tokenizer` as `TiktokenTokenizer` (what `llama.py` asserts) and by the C++
`Tiktoken` of `qnn_llama_runner`."""


TOY = Toy()
