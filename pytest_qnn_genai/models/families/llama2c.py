"""The llama2.c family (``--decoder_model stories110m / stories260k``): its architecture, its
checkpoint, its SentencePiece tokenizer, and its toy (``stories260k``).

:class:`Transformer` is the project's own implementation of llama2.c's ``model.py`` (RMSNorm,
interleaved-pair RoPE, GQA attention, SwiGLU, tied embedding/output). Checkpoints use llama2.c's
layout, ``{"model": {"_orig_mod." + key: tensor}, "model_args": {...}}``; llama.py strips the
prefix for stories260k and permutes ``wq``/``wk`` rows per head (``transform_weight``) for
``static_llama``'s half-split RoPE. Its tokenizer is a SentencePiece model (``--tokenizer_model``,
what calibration encodes with) and the llama2.c ``tokenizer.bin`` made from it
(``--tokenizer_bin``, what ``qnn_llama_runner`` reads). The transformers reference is
``LlamaForCausalLM``: RoPE theta 10000 without scaling, RMSNorm eps 1e-5, SwiGLU width by
llama2.c's rule, untied ``output`` (llama2.c saves it as its own key).
"""
from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import sentencepiece as spm
import torch
import torch.nn.functional as F
from torch import nn

from pytest_qnn_genai.models import layouts
from pytest_qnn_genai.models.families import LegacyInputs

if TYPE_CHECKING:
    from transformers import LlamaConfig, LlamaForCausalLM

    from pytest_qnn_genai.models.families import CaseFiles
    from pytest_qnn_genai.models.params import CaseFile, ModelParams
    from pytest_qnn_genai.untyped import Tokenizer

NAME = "llama2c"
DECODER_MODELS = {"stories110m": "llama2", "stories260k": "llama2"}
EXTRA_FILES: dict[str, str] = {}
HF_CLASS = "LlamaForCausalLM"

COMPILED_PREFIX = "_orig_mod."  # llama2.c's train.py saves a torch.compile'd module
NORM_EPS = 1e-5
ROPE_THETA = 10000.0


def hidden_dim(params: ModelParams) -> int:
    """SwiGLU hidden size by llama2.c's rule: 2/3 of 4*dim, rounded up to ``multiple_of``."""
    h = int(2 * 4 * params["dim"] / 3)
    m = int(params["multiple_of"])
    return m * ((h + m - 1) // m)


def expected_shapes(params: ModelParams) -> dict[str, tuple[int, ...]]:
    """Every checkpoint key (without ``_orig_mod.``) and its shape for ``params``."""
    dim, vocab, hid = params["dim"], params["vocab_size"], hidden_dim(params)
    kv_dim = dim // params["n_heads"] * params["n_kv_heads"]
    shapes: dict[str, tuple[int, ...]] = {"tok_embeddings.weight": (vocab, dim)}
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
    def __init__(self, p: ModelParams) -> None:
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
        out: torch.Tensor = self.wo(y.transpose(1, 2).reshape(b, t, -1))
        return out


class FeedForward(nn.Module):
    def __init__(self, p: ModelParams) -> None:
        super().__init__()
        hid = hidden_dim(p)
        self.w1 = nn.Linear(p["dim"], hid, bias=False)
        self.w2 = nn.Linear(hid, p["dim"], bias=False)
        self.w3 = nn.Linear(p["dim"], hid, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.w2(F.silu(self.w1(x)) * self.w3(x))
        return out


class Block(nn.Module):
    def __init__(self, p: ModelParams) -> None:
        super().__init__()
        self.attention, self.feed_forward = Attention(p), FeedForward(p)
        self.attention_norm, self.ffn_norm = RMSNorm(p["dim"]), RMSNorm(p["dim"])

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        out: torch.Tensor = h + self.feed_forward(self.ffn_norm(h))
        return out


class Transformer(nn.Module):
    """llama2.c's decoder; parameter names match its checkpoints."""

    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, params: ModelParams) -> None:
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
        logits: torch.Tensor = self.output(self.norm(x))
        return logits


def save_checkpoint(model: Transformer, path: str | Path) -> None:
    """Write ``model`` in llama2.c's checkpoint layout (fp32, ``_orig_mod.`` keys)."""
    sd = {COMPILED_PREFIX + k: v.detach().float() for k, v in model.state_dict().items()}
    torch.save({"model": sd, "model_args": model.params}, path)


def read_checkpoint(path: str | Path, params: ModelParams) -> dict[str, torch.Tensor]:
    """The checkpoint's state dict (``_orig_mod.`` stripped), each tensor checked against
    ``params`` (a mismatch raises ``ModelCaseError`` with one line naming the key)."""
    sd = layouts.torch_state_dict(path, strip=COMPILED_PREFIX)
    layouts.check_shapes(path, sd, expected_shapes(params))
    return {k: v.clone() for k, v in sd.items()}  # off the memory map


def load_model(case: CaseFiles) -> Transformer:
    """The case's checkpoint in :class:`Transformer`, in eval mode."""
    model = Transformer(case.params_dict)
    model.load_state_dict(load_checkpoint(case), strict=True)
    return model.eval()


# -- the family protocol --------------------------------------------------------------------------


def check_checkpoint(case: CaseFiles) -> None:
    layouts.check_shapes(case.path("checkpoint"),
                         layouts.torch_state_dict(case.path("checkpoint"), strip=COMPILED_PREFIX),
                         expected_shapes(case.params_dict))


def load_checkpoint(case: CaseFiles) -> dict[str, torch.Tensor]:
    return read_checkpoint(case.path("checkpoint"), case.params_dict)


def calibration_tokenizer(case: CaseFiles) -> Tokenizer:
    """``pytorch_tokenizers.get_tokenizer(--tokenizer_model)``: a ``Llama2cTokenizer`` (llama.py's
    ``TokenizerWrapper._from_tokenizer_model_and_bin`` asserts that class)."""
    from pytorch_tokenizers import get_tokenizer

    tok: Tokenizer = get_tokenizer(str(case.path("tokenizer_model")))
    return tok


def calibration_ids(case: CaseFiles, tokenizer: Tokenizer, prompt: str) -> list[int]:
    """No chat template (stories are no instruct model): ``encode(content, bos=True)``."""
    return list(tokenizer.encode(prompt, bos=True, eos=False))


def hf_config(params: ModelParams, max_positions: int) -> LlamaConfig:
    """The ``LlamaConfig`` of a llama2.c checkpoint's ``params``."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=params["vocab_size"], hidden_size=params["dim"],
        intermediate_size=hidden_dim(params), num_hidden_layers=params["n_layers"],
        num_attention_heads=params["n_heads"], num_key_value_heads=params["n_kv_heads"],
        head_dim=params["dim"] // params["n_heads"], hidden_act="silu",
        max_position_embeddings=max_positions, rms_norm_eps=NORM_EPS,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
        bos_token_id=1, eos_token_id=2, architectures=[HF_CLASS])


def reference_model(case: CaseFiles,
                    state_dict: dict[str, torch.Tensor] | None = None) -> LlamaForCausalLM:
    """The checkpoint through the Meta→HF conversion of wq/wk rows, in ``LlamaForCausalLM``."""
    from transformers import LlamaForCausalLM

    params = case.params_dict
    sd = state_dict if state_dict is not None else load_checkpoint(case)
    model = LlamaForCausalLM(hf_config(params, case.max_context_len))
    model.load_state_dict(layouts.meta_to_hf(sd, params), strict=True)
    model.float().eval()
    return model


def legacy_inputs(case: CaseFiles, work_dir: Path) -> LegacyInputs:
    """The llama2.c checkpoint, ``--params``, the SentencePiece model and, for the runner, the
    llama2.c ``tokenizer.bin`` (llama.py's ``_init_tokenizer`` asserts it for stories)."""
    return LegacyInputs(("--checkpoint", str(case.path("checkpoint")),
                         "--params", str(case.path("params")),
                         "--tokenizer_model", str(case.path("tokenizer_model")),
                         "--tokenizer_bin", str(case.path("tokenizer_bin"))))


# -- the toy: stories260k --------------------------------------------------------------------------


class SentencePieceToyTokenizer:
    """A trained SentencePiece model as the trainer uses it."""

    chat_end_id = None

    def __init__(self, sp: spm.SentencePieceProcessor) -> None:
        self.sp = sp
        self.bos_id, self.eos_id = int(sp.bos_id()), int(sp.eos_id())

    def encode(self, text: str) -> list[int]:
        return list(self.sp.encode(text))

    def decode(self, ids: list[int]) -> str:
        return str(self.sp.decode(list(ids)))

    def word_id(self, word: str) -> int:
        return int(self.sp.piece_to_id("\u2581" + word))

    def chat(self, prompt: str) -> list[int] | None:
        return None  # llama2.c stories are no chat model


class Toy:
    """``stories260k``: ExecuTorch CI's stories260K shape, trained by :mod:`..train`."""

    NAME = "stories260k"
    STEPS = 800
    PARAMS: ModelParams = {"dim": 64, "n_layers": 5, "n_heads": 8, "n_kv_heads": 4, "vocab_size": 512,
              "multiple_of": 4, "max_seq_len": 512}
    CASE: CaseFile = {"name": NAME, "decoder_model": "stories260k", "checkpoint": "stories260K.pt",
            "params": "params.json", "tokenizer_model": "tokenizer.model",
            "tokenizer_bin": "tokenizer.bin", "quant_recipe": "16a4w", "kv_io_bit_width": 8}

    def train_tokenizer(self, stories: list[str], out: Path) -> SentencePieceToyTokenizer:
        """SentencePiece BPE with llama2.c's ``train_vocab`` options (bos 1, eos 2, unk 0), and
        its llama2.c export ``tokenizer.bin``."""
        from pytorch_tokenizers.llama2c import Llama2cTokenizer

        model = io.BytesIO()  # in memory, so no temporary path is recorded in the model
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(stories), model_writer=model, model_type="bpe",
            vocab_size=self.PARAMS["vocab_size"], self_test_sample_size=0,
            character_coverage=1.0, num_threads=1, split_digits=True,
            allow_whitespace_only_pieces=True, byte_fallback=True,
            unk_surface=r" \342\201\207 ", normalization_rule_name="identity",
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
        model_file = out / self.CASE["tokenizer_model"]
        model_file.write_bytes(model.getvalue())
        Llama2cTokenizer(str(model_file)).export(str(out / self.CASE["tokenizer_bin"]))
        return SentencePieceToyTokenizer(spm.SentencePieceProcessor(model_file=str(model_file)))

    def new_model(self, params: ModelParams) -> nn.Module:
        return Transformer(params)

    def logits(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = model(x)
        return out

    def save(self, model: nn.Module, out: Path, params: ModelParams) -> None:
        assert isinstance(model, Transformer)
        save_checkpoint(model, out / self.CASE["checkpoint"])

    def reference(self, out: Path, params: ModelParams) -> nn.Module:
        model = Transformer(params)
        model.load_state_dict(read_checkpoint(out / self.CASE["checkpoint"], params))
        return model.eval()

    def describe(self) -> str:
        return f"""llama2.c architecture, `params.json`: `{json.dumps(self.PARAMS)}`.

## Tokenizer
SentencePiece BPE, vocab 512, byte_fallback, split_digits, identity normalization; unk 0, bos 1,
eos 2 (llama2.c `train_vocab` settings), trained on the training corpus. `tokenizer.bin` is the
llama2.c export (`pytorch_tokenizers.tools.llama2c.convert`)."""


TOY = Toy()
