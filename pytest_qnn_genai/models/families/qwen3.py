"""The Qwen3 family (``--decoder_model qwen3-0_6b / qwen3-1_7b``): a Hugging Face checkpoint,
a Hugging Face ``tokenizer.json``, QK-norm, tied embeddings; and its toy (``qwen3_toy``).

What llama.py does for these names (executorch 1.5.1, ``SUPPORTED_LLM_MODELS["qwen3-0_6b"]``):
``repo_id`` ``Qwen/Qwen3-0.6B``, ``transform_weight`` False (HF rows are half-split already),
``masked_softmax`` True, ``seq_mse_candidates`` 50, ``instruct_model`` True, recipe
``Qwen3_0_6BQuantRecipe`` (16a4w, conv weights in blocks of 32 input channels, 16a8w
``w2_conv``, no ``annotate_kv_8bit``: 16-bit KV IO). Without ``--checkpoint`` it takes the
weights from the Hugging Face cache (``snapshot_download(repo_id)``), converts them with
executorch's ``qwen3.convert_weights`` into ``$HF_HOME/.cache/meta_checkpoints`` and loads that;
its tokenizer comes from ``AutoTokenizer.from_pretrained(repo_id)`` in every case (no flag
replaces it), re-saved into ``--artifact``, where ``qnn_llama_runner`` reads the ``tokenizer.json``.
Calibration samples go through the tokenizer's chat template (``apply_chat_template``,
``add_generation_prompt=False``) before ``encode``. The wheel ships no ``0_6b_config.json``
(its ``params_path``), so ``--params`` is required.

A case of this family is a Hugging Face folder as ``Qwen/Qwen3-0.6B`` ships it (``config.json``,
``model.safetensors`` without ``lm_head``, ``tokenizer.json``, ``tokenizer_config.json``) plus
``params.json`` (``ModelArgs`` fields for ``--params``). :func:`legacy_inputs` lays the folder out
as an offline Hugging Face hub cache of ``repo_id`` and gives llama.py ``HF_HOME`` and no
``--checkpoint``: llama.py then builds the case exactly as it builds the real model, through its
own download, conversion and tokenizer path. The transformers reference is ``Qwen3ForCausalLM``
``from_pretrained`` on the same folder.

Hazard: ``download_and_convert_hf_checkpoint`` reuses ``$HF_HOME/.cache/meta_checkpoints/
<repo>.pth`` if it exists, whatever is in the hub cache; each build gets a fresh ``HF_HOME``.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pytest_qnn_genai.models import bpe, layouts
from pytest_qnn_genai.models.families import LegacyInputs
from pytest_qnn_genai.models.hub import offline_hub

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM

    from pytest_qnn_genai.models.families import CaseFiles
    from pytest_qnn_genai.models.params import CaseFile, ModelParams
    from pytest_qnn_genai.untyped import JsonObject, Tokenizer

NAME = "qwen3"
DECODER_MODELS = {"qwen3-0_6b": "qwen3", "qwen3-1_7b": "qwen3"}
REPO_IDS = {"qwen3-0_6b": "Qwen/Qwen3-0.6B", "qwen3-1_7b": "Qwen/Qwen3-1.7B"}  # LLMModelConfig
EXTRA_FILES = {"hf_config": "config.json", "tokenizer_config": "tokenizer_config.json"}
HF_CLASS = "Qwen3ForCausalLM"
HF_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

# Qwen2/Qwen3's pre-tokenizer split (transformers' tokenization_qwen2.PRETOKENIZE_REGEX)
PRETOKENIZE_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
                     r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
# Qwen3's added tokens in id order, (text, special) as its tokenizer.json lists them
ADDED_TOKENS = (
    *((t, True) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                          "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
                          "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                          "<|image_pad|>", "<|video_pad|>")),
    *((t, False) for t in ("<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
                           "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
                           "<tool_response>", "</tool_response>", "<think>", "</think>")))
# Qwen3's chat template, reduced to what renders system/user/assistant turns without tools or
# reasoning; for those it renders exactly as the full template does
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}")
# qnn_llama_runner's qwen3 template (qnn_llama_runner.cpp get_formatted_prompt, no system prompt)
RUNNER_USER, RUNNER_ASSISTANT = "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant"
N_MERGES = 512
N_BASE = 256 + N_MERGES
PARAMS: ModelParams = {  # executorch's qwen3 config fields (examples/models/qwen3/config)
    "dim": 64, "ffn_dim_multiplier": 1, "hidden_dim": 192, "n_heads": 4, "head_dim": 32,
    "n_kv_heads": 2, "n_layers": 4, "norm_eps": 1e-06, "rope_theta": 1000000.0,
    "use_scaled_rope": False, "vocab_size": 800, "use_hf_rope": True,
    "attention_qkv_bias": False, "use_qk_norm": True, "qk_norm_before_rope": True,
}
MAX_POSITIONS = 40960  # Qwen3-0.6B's max_position_embeddings


def expected_shapes(params: ModelParams) -> dict[str, tuple[int, ...]]:
    """Every key of a (tied) Hugging Face Qwen3 ``model.safetensors`` and its shape."""
    dim, vocab, hid, hd = params["dim"], params["vocab_size"], params["hidden_dim"], params["head_dim"]
    q_dim, kv_dim = params["n_heads"] * hd, params["n_kv_heads"] * hd
    shapes = {"model.embed_tokens.weight": (vocab, dim), "model.norm.weight": (dim,)}
    for i in range(params["n_layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (q_dim, dim), p + "self_attn.k_proj.weight": (kv_dim, dim),
            p + "self_attn.v_proj.weight": (kv_dim, dim), p + "self_attn.o_proj.weight": (dim, q_dim),
            p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
            p + "mlp.gate_proj.weight": (hid, dim), p + "mlp.up_proj.weight": (hid, dim),
            p + "mlp.down_proj.weight": (dim, hid),
            p + "input_layernorm.weight": (dim,), p + "post_attention_layernorm.weight": (dim,)})
    return shapes


def hf_config(params: ModelParams) -> Qwen3Config:
    """The ``transformers.Qwen3Config`` equal to ``params`` (tied embeddings, as 0.6B)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=params["vocab_size"], hidden_size=params["dim"],
        intermediate_size=params["hidden_dim"], num_hidden_layers=params["n_layers"],
        num_attention_heads=params["n_heads"], num_key_value_heads=params["n_kv_heads"],
        head_dim=params["head_dim"], hidden_act="silu", max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=params["norm_eps"], tie_word_embeddings=True, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": params["rope_theta"]},
        bos_token_id=N_BASE, eos_token_id=N_BASE + 2, architectures=[HF_CLASS])


def tokenizer_config() -> JsonObject:
    """``tokenizer_config.json`` as Qwen3-0.6B has it (no BOS token, ``<|im_end|>`` EOS)."""
    return {"add_bos_token": False, "add_prefix_space": False, "bos_token": None,
            "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
            "errors": "replace", "clean_up_tokenization_spaces": False,
            "split_special_tokens": False, "model_max_length": 131072,
            "tokenizer_class": "Qwen2Tokenizer", "chat_template": CHAT_TEMPLATE}


def save_tokenizer(merges: list[tuple[bytes, bytes]], folder: Path) -> None:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``folder``."""
    bpe.save_hf_tokenizer(merges, PRETOKENIZE_REGEX, ADDED_TOKENS, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")


def load_hf(folder: str | Path) -> Qwen3ForCausalLM:
    """``Qwen3ForCausalLM`` from ``folder`` (fp32, eager attention, eval mode)."""
    from transformers import Qwen3ForCausalLM

    model: Qwen3ForCausalLM = Qwen3ForCausalLM.from_pretrained(
        str(folder), dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


# -- the family protocol --------------------------------------------------------------------------


def _shapes(case: CaseFiles) -> dict[str, tuple[int, ...]]:
    path = case.path("checkpoint")
    got = layouts.safetensors_shapes(path)
    want = expected_shapes(case.params_dict)
    if "lm_head.weight" in got and got["lm_head.weight"] == want["model.embed_tokens.weight"]:
        got.pop("lm_head.weight")  # an untied head is allowed (larger Qwen3s have one)
    layouts.check_shapes(path, got, want)
    return got


def check_checkpoint(case: CaseFiles) -> None:
    _shapes(case)


def load_checkpoint(case: CaseFiles) -> dict[str, torch.Tensor]:
    """executorch's own conversion (``qwen3.convert_weights.qwen_3_tune_to_meta`` of the
    safetensors), as llama.py's download path runs it: Meta names, rows left half-split,
    ``output.weight`` the tied embedding."""
    from executorch.examples.models.qwen3.convert_weights import qwen_3_tune_to_meta
    from safetensors.torch import load_file

    _shapes(case)
    sd: dict[str, torch.Tensor] = qwen_3_tune_to_meta(load_file(str(case.path("checkpoint"))))
    return sd


@dataclass(frozen=True)
class ChatTokenizer:
    """What llama.py's ``TokenizerWrapper._from_hf`` holds: ``pytorch_tokenizers``'
    ``HuggingFaceTokenizer`` of the re-saved files (``encode`` ignores ``bos``: the tokenizer.json
    decides) and transformers' ``apply_chat_template``."""

    hf: PreTrainedTokenizerBase
    tokenizer: Tokenizer  # pytorch_tokenizers.HuggingFaceTokenizer

    def encode(self, s: str, *, bos: bool, eos: bool) -> list[int]:
        return list(self.tokenizer.encode(s, bos=bos, eos=eos))

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))

    def chat(self, messages: list[dict[str, str]]) -> str:
        return str(self.hf.apply_chat_template(messages, tokenize=False,
                                               add_generation_prompt=False))


def calibration_tokenizer(case: CaseFiles) -> ChatTokenizer:
    """``AutoTokenizer.from_pretrained`` of the case's folder, re-saved and read back by
    ``pytorch_tokenizers.get_tokenizer(tokenizer.json, tokenizer_config.json)``, as llama.py does
    with the hub's copy."""
    from pytorch_tokenizers import get_tokenizer
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(case.folder))
    with tempfile.TemporaryDirectory() as tmp:
        saved = hf.save_pretrained(tmp)
        return ChatTokenizer(hf, get_tokenizer(str(saved[-1]), str(saved[0])))


def calibration_ids(case: CaseFiles, tokenizer: ChatTokenizer, prompt: str) -> list[int]:
    """The sample through the chat template (instruct model), then ``encode(bos=True)``."""
    return tokenizer.encode(tokenizer.chat([{"role": "user", "content": prompt}]),
                            bos=True, eos=False)


def reference_model(case: CaseFiles,
                    state_dict: dict[str, torch.Tensor] | None = None) -> Qwen3ForCausalLM:
    """``Qwen3ForCausalLM.from_pretrained`` of the case's folder; ``state_dict`` (Meta names,
    half-split rows) into a model of the folder's config."""
    from transformers import AutoConfig, Qwen3ForCausalLM

    if state_dict is None:
        return load_hf(case.folder)
    model = Qwen3ForCausalLM(AutoConfig.from_pretrained(str(case.folder)))
    model.load_state_dict(layouts.meta_to_hf(state_dict, case.params_dict, permute=False),
                          strict=True)
    model.float().eval()
    return model


def legacy_inputs(case: CaseFiles, work_dir: Path) -> LegacyInputs:
    """The case's folder as an offline Hugging Face hub cache of the decoder model's
    ``repo_id`` (``models--Qwen--Qwen3-0.6B/{refs/main,snapshots/<rev>/}``, the revision a digest
    of the files), ``HF_HOME`` pointing at it (so llama.py converts into a fresh
    ``meta_checkpoints``), and only ``--params``."""
    files = {"config.json": case.files()["hf_config"], "model.safetensors": case.path("checkpoint"),
             "tokenizer.json": case.path("tokenizer_model"),
             "tokenizer_config.json": case.files()["tokenizer_config"]}
    digest = hashlib.sha1()
    for name, path in sorted(files.items()):
        digest.update(name.encode() + path.read_bytes())
    env = offline_hub(files, REPO_IDS[case.decoder_model], digest.hexdigest(), work_dir)
    return LegacyInputs(("--params", str(case.path("params"))), env)


# -- the toy: qwen3_toy ----------------------------------------------------------------------------


class HfToyTokenizer:
    """The trained ``tokenizer.json`` through Hugging Face's ``tokenizers``. No BOS: the runner's
    ``HFTokenizer`` (pytorch_tokenizers 1.5) adds only what the file's post-processor adds, and
    Qwen's adds nothing; stories end in ``<|endoftext|>`` (Qwen's document separator), chat turns
    in ``<|im_end|>``."""

    bos_id = None

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(path))
        self.eos_id = self._id("<|endoftext|>")
        self.chat_end_id: int | None = self._id("<|im_end|>")

    def _id(self, piece: str) -> int:
        token = self.tok.token_to_id(piece)
        if token is None:
            raise ValueError(f"{piece} is not a token of this tokenizer")
        return int(token)

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(list(ids), skip_special_tokens=False))

    def word_id(self, word: str) -> int:
        (token,) = self.encode(" " + word)
        return int(token)

    def chat(self, prompt: str) -> list[int] | None:
        """qnn_llama_runner's qwen3 template around ``prompt``."""
        return self.encode(RUNNER_USER + prompt + RUNNER_ASSISTANT)


class Toy:
    """``qwen3_toy``: trained as ``Qwen3ForCausalLM``, written as a Hugging Face folder."""

    NAME = "qwen3_toy"
    STEPS = 1600
    PARAMS = PARAMS
    CASE: CaseFile = {"name": NAME, "decoder_model": "qwen3-0_6b", "checkpoint": "model.safetensors",
            "params": "params.json", "tokenizer_model": "tokenizer.json",
            "tokenizer_bin": "tokenizer.json", "quant_recipe": "16a4w", "kv_io_bit_width": 16}

    def train_tokenizer(self, stories: list[str], out: Path) -> HfToyTokenizer:
        save_tokenizer(bpe.train_bpe(stories, N_MERGES, PRETOKENIZE_REGEX), out)
        tok = HfToyTokenizer(out / "tokenizer.json")
        assert tok.tok.get_vocab_size() == N_BASE + len(ADDED_TOKENS) <= PARAMS["vocab_size"]
        return tok

    def new_model(self, params: ModelParams) -> torch.nn.Module:
        from transformers import Qwen3ForCausalLM

        config = hf_config(params)
        config._attn_implementation = "sdpa"
        return Qwen3ForCausalLM(config)

    def logits(self, model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = model(input_ids=x).logits
        return out

    def save(self, model: torch.nn.Module, out: Path, params: ModelParams) -> None:
        from transformers import PreTrainedModel

        assert isinstance(model, PreTrainedModel)
        model.config._attn_implementation = "eager"
        model.save_pretrained(str(out))
        (out / "generation_config.json").unlink(missing_ok=True)
        (out / "model.safetensors").chmod(0o644)  # safetensors writes 0600

    def reference(self, out: Path, params: ModelParams) -> torch.nn.Module:
        return load_hf(out)

    def describe(self) -> str:
        import transformers

        p, n_vocab = PARAMS, N_BASE + len(ADDED_TOKENS)
        return f"""The Qwen3 architecture at toy size, built by llama.py as `--decoder_model qwen3-0_6b`:
GQA ({p['n_heads']} query / {p['n_kv_heads']} KV heads) with head_dim {p['head_dim']} (query width \
{p['n_heads'] * p['head_dim']} > hidden {p['dim']}, as Qwen3-0.6B's 2048 > 1024), RMS QK-norm \
before RoPE, SwiGLU {p['hidden_dim']}, RoPE theta {p['rope_theta']:g} (half-split), RMSNorm eps \
{p['norm_eps']:g}, tied embeddings, vocab {p['vocab_size']} (the tokenizer's {n_vocab} ids \
padded, as Qwen3's 151669 are to 151936); trained as \
`transformers.Qwen3ForCausalLM` {transformers.__version__}.

## Files
A Hugging Face folder as `Qwen/Qwen3-0.6B` ships one, plus llama.py's `--params`:
- `config.json` + `model.safetensors` (no `lm_head`: tied): `Qwen3ForCausalLM.from_pretrained`,
  the independent fp32 reference; llama.py reads the same files from an offline hub cache
  (`models.families.qwen3.legacy_inputs`) and converts them with executorch's own
  `qwen3.convert_weights`, exactly as it builds the real model (no `--checkpoint`).
- `params.json`: `ModelArgs` fields in the form of executorch's qwen3 configs (the 1.5.1 wheel
  ships no `0_6b_config.json`, so `--params` is required): `{json.dumps(p)}`
- `tokenizer.json` + `tokenizer_config.json`: read by `AutoTokenizer` (llama.py's calibration,
  through the chat template) and by `qnn_llama_runner`'s `HFTokenizer` (pytorch_tokenizers 1.5),
  which puts no BOS before a prompt (Qwen's post-processor adds none) and, given the file alone,
  has EOS id 0; `--decoder_model_version qwen3` adds `<|im_end|>` as its stop. So the training
  stream is `story <|endoftext|>` without BOS, as Qwen's pre-training documents are.

## Tokenizer
Byte-level BPE trained on the corpus by `models.bpe.train_bpe` ({N_MERGES} merges over Qwen2/3's
pre-token split), written in Qwen3's `tokenizer.json` layout (NFC, regex split + ByteLevel, BPE,
ByteLevel decoder) with Qwen3's {len(ADDED_TOKENS)} added tokens from id {N_BASE}
(`<|endoftext|>` {N_BASE}, `<|im_start|>` {N_BASE + 1}, `<|im_end|>` {N_BASE + 2}, ...).
`tokenizer_config.json`: no BOS token, EOS `<|im_end|>`, `Qwen2Tokenizer`, and Qwen3's chat
template reduced to system/user/assistant turns (for those it renders as the full template)."""


TOY = Toy()
