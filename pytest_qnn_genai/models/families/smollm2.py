"""The SmolLM2 family (``--decoder_model smollm2_135m``): a Hugging Face Llama checkpoint with a
GPT-2-style byte-level BPE ``tokenizer.json`` and a ChatML template; no toy (its case is the real
SmolLM2-135M-Instruct, imported from the GGUF file a package ships: ``models/smollm2_135m``).

What llama.py does for the name (executorch 1.5.1, ``SUPPORTED_LLM_MODELS["smollm2_135m"]``):
``repo_id`` ``HuggingFaceTB/SmolLM2-135M-Instruct``, ``transform_weight`` True (its
``convert_weights`` goes through torchtune's ``FullModelHFCheckpointer(model_type="LLAMA3")``,
which turns Hugging Face's half-split q/k rows back into Meta's interleaved order, and llama.py
permutes them forth again), ``masked_softmax`` False, no SeqMSE, SpinQuant R3 (a Hadamard
rotation of q and k inside ``static_llama``), recipe ``Smollm2QuantRecipe`` (16a8w, per-channel
conv weights, 8-bit activations nowhere: the KV cache IO is 16-bit). Its tokenizer comes from
``AutoTokenizer.from_pretrained(repo_id)`` whatever the flags, re-saved into ``--artifact``,
where ``qnn_llama_runner`` reads the ``tokenizer.json``; calibration samples go through the chat
template (which puts SmolLM's default system prompt before a lone user turn). The wheel ships no
``135M_config.json`` (its ``params_path``): ``--params`` is required.

:func:`legacy_inputs` gives llama.py the case's folder as an offline Hugging Face hub cache of
``repo_id`` (for the tokenizer, as :mod:`.qwen3` does) and a Meta-layout ``--checkpoint``
converted here (:func:`pytest_qnn_genai.models.layouts.hf_to_meta`: what the torchtune
conversion gives): PyPI's torchtune does not import against this torchao, and the project's
stand-in (``compat/torchtune.py``) provides its names, not its work. The transformers reference
is ``LlamaForCausalLM.from_pretrained`` on the same folder.

Hazard: the Meta checkpoint is written per legacy build into its work folder (fp32: ~0.5 GB at
135M parameters, twice the embedding counted once as llama.py's strict load wants ``output``).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pytest_qnn_genai.models import layouts
from pytest_qnn_genai.models.families import LegacyInputs
from pytest_qnn_genai.models.families.qwen3 import ChatTokenizer
from pytest_qnn_genai.models.hub import offline_hub

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

    from pytest_qnn_genai.models.families import CaseFiles
    from pytest_qnn_genai.models.params import ModelParams

NAME = "smollm2"
DECODER_MODELS = {"smollm2_135m": "smollm2_135m"}
REPO_IDS = {"smollm2_135m": "HuggingFaceTB/SmolLM2-135M-Instruct"}  # LLMModelConfig.repo_id
EXTRA_FILES = {"hf_config": "config.json", "tokenizer_config": "tokenizer_config.json"}
HF_CLASS = "LlamaForCausalLM"
TOY = None  # a real checkpoint only
META_CHECKPOINT = "smollm2_meta.pth"  # the legacy build's --checkpoint, in its work folder


def expected_shapes(params: ModelParams) -> dict[str, tuple[int, ...]]:
    """Every key of a (tied) Hugging Face Llama ``model.safetensors`` and its shape."""
    dim, vocab, hid = params["dim"], params["vocab_size"], params["hidden_dim"]
    hd = params.get("head_dim", dim // params["n_heads"])
    q_dim, kv_dim = params["n_heads"] * hd, params["n_kv_heads"] * hd
    shapes = {"model.embed_tokens.weight": (vocab, dim), "model.norm.weight": (dim,)}
    for i in range(params["n_layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (q_dim, dim), p + "self_attn.k_proj.weight": (kv_dim, dim),
            p + "self_attn.v_proj.weight": (kv_dim, dim), p + "self_attn.o_proj.weight": (dim, q_dim),
            p + "mlp.gate_proj.weight": (hid, dim), p + "mlp.up_proj.weight": (hid, dim),
            p + "mlp.down_proj.weight": (dim, hid),
            p + "input_layernorm.weight": (dim,), p + "post_attention_layernorm.weight": (dim,)})
    return shapes


def check_checkpoint(case: CaseFiles) -> None:
    path = case.path("checkpoint")
    layouts.check_shapes(path, layouts.safetensors_shapes(path), expected_shapes(case.params_dict))


def load_checkpoint(case: CaseFiles) -> dict[str, torch.Tensor]:
    """The safetensors in Meta's layout, as llama.py gets them from ``convert_weights``: Meta
    names, wq/wk rows interleaved (llama.py's ``transform_weight`` permutes them back),
    ``output.weight`` the tied embedding."""
    from safetensors.torch import load_file

    check_checkpoint(case)
    return layouts.hf_to_meta(load_file(str(case.path("checkpoint"))), case.params_dict)


def calibration_tokenizer(case: CaseFiles) -> ChatTokenizer:
    """``AutoTokenizer.from_pretrained`` of the case's Hugging Face folder, re-saved and read
    back by ``pytorch_tokenizers.get_tokenizer``, as llama.py does with the hub's copy."""
    import tempfile

    from pytorch_tokenizers import get_tokenizer
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(case.hf_folder))
    with tempfile.TemporaryDirectory() as tmp:
        saved = hf.save_pretrained(tmp)
        return ChatTokenizer(hf, get_tokenizer(str(saved[-1]), str(saved[0])))


def calibration_ids(case: CaseFiles, tokenizer: ChatTokenizer, prompt: str) -> list[int]:
    """The sample through the chat template (instruct model), then ``encode(bos=True)``."""
    return tokenizer.encode(tokenizer.chat([{"role": "user", "content": prompt}]),
                            bos=True, eos=False)


def load_hf(folder: str | Path) -> LlamaForCausalLM:
    """``LlamaForCausalLM`` from ``folder`` (fp32, eager attention, eval mode)."""
    from transformers import LlamaForCausalLM

    model: LlamaForCausalLM = LlamaForCausalLM.from_pretrained(
        str(folder), dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


def reference_model(case: CaseFiles,
                    state_dict: dict[str, torch.Tensor] | None = None) -> LlamaForCausalLM:
    """``LlamaForCausalLM.from_pretrained`` of the case's Hugging Face folder; ``state_dict``
    (Meta layout, interleaved rows) into a model of the folder's config."""
    from transformers import AutoConfig, LlamaForCausalLM

    if state_dict is None:
        return load_hf(case.hf_folder)
    config = AutoConfig.from_pretrained(str(case.hf_folder))
    config._attn_implementation = "eager"
    model = LlamaForCausalLM(config)
    model.load_state_dict(layouts.meta_to_hf(state_dict, case.params_dict), strict=True)
    model.float().eval()
    return model


def legacy_inputs(case: CaseFiles, work_dir: Path) -> LegacyInputs:
    """The case's Hugging Face files as an offline hub cache of ``repo_id`` (the revision a
    digest of their names and sizes: the import's folder is content-addressed already),
    ``HF_HOME`` pointing at it, ``--checkpoint`` the Meta-layout conversion and ``--params``."""
    files = {"config.json": case.files()["hf_config"], "model.safetensors": case.path("checkpoint"),
             "tokenizer.json": case.path("tokenizer_model"),
             "tokenizer_config.json": case.files()["tokenizer_config"]}
    digest = hashlib.sha1()
    for name, path in sorted(files.items()):
        digest.update(f"{name}\0{path.resolve()}\0{path.stat().st_size}\n".encode())
    env = offline_hub(files, REPO_IDS[case.decoder_model], digest.hexdigest(), work_dir)
    checkpoint = Path(work_dir) / META_CHECKPOINT
    torch.save(load_checkpoint(case), checkpoint)
    return LegacyInputs(("--checkpoint", str(checkpoint), "--params", str(case.path("params"))),
                        env)
