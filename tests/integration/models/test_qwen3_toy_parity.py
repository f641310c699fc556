"""The Qwen3 toy through llama.py's own Hugging Face path, in process: the hub cache the family
lays out is what llama.py's ``TokenizerWrapper`` and ``TextDecoder`` (no ``--checkpoint``:
``snapshot_download`` + executorch's ``qwen3.convert_weights``) read offline; the static model they
build agrees with transformers' ``Qwen3ForCausalLM``, the family's calibration tokens are the ones
llama.py's dataset builder makes, and a perturbed weight or a wrong QK-norm placement breaks the
agreement."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pytest_qnn_genai.models import registry
from pytest_qnn_genai.models.families import qwen3
from pytest_qnn_genai.models.train import greedy

CASE = "qwen3_toy"
DECODER_MODEL = "qwen3-0_6b"
AR, CTX = 32, 128
TOL = 1e-4  # fp32 vs fp32; the perturbed/negative controls move logits by > 100x this


@pytest.fixture(scope="module")
def case() -> registry.ModelCase:
    return registry.available()[CASE]


@pytest.fixture(scope="module")
def hf_model(case):
    return qwen3.load_hf(case.folder)


@pytest.fixture(scope="module")
def tokens(case, hf_model) -> list[int]:
    """The eval prompt (no BOS: the runner adds none) and its greedy continuation: CTX tokens."""
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

    prompt = encode(load_tokenizer(case.path("tokenizer_bin")), case.eval_prompt)
    return prompt + greedy(lambda x: hf_model(x).logits, prompt, CTX - len(prompt))


def test_files_are_a_hugging_face_qwen3_folder(case) -> None:
    from executorch.examples.models.llama.model_args import ModelArgs
    from safetensors import safe_open

    config = json.loads(case.files()["hf_config"].read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"] and config["tie_word_embeddings"]
    assert (config["head_dim"] * config["num_attention_heads"], config["hidden_size"]) == (128, 64)
    with safe_open(str(case.path("checkpoint")), framework="pt") as f:
        assert "lm_head.weight" not in f.keys()  # noqa: SIM118 - tied, as Qwen3-0.6B ships
    args = ModelArgs(**case.params_dict)  # what llama.py does with --params
    assert (args.use_qk_norm, args.qk_norm_before_rope, args.use_hf_rope) == (True, True, True)
    assert (args.head_dim, args.hidden_dim, args.rope_freq_base) == (32, 192, 1e6)
    assert (case.quant_recipe, case.kv_io_bit_width) == ("16a4w", 16)  # Qwen3_0_6BQuantRecipe


@pytest.fixture(scope="module")
def llama_py(case, qnn_sdk, tmp_path_factory) -> Iterator[SimpleNamespace]:
    """llama.py's parser, config and wrappers, with the environment the legacy flow gives it."""
    from pytest_qnn_genai.compat import llama_example

    pkg, wrappers = llama_example.package(), llama_example.llm_wrappers()
    from executorch.examples.qualcomm.oss_scripts.llama.llama import _build_parser
    from executorch.examples.qualcomm.oss_scripts.llama.masking_utils import create_causal_attn_mask
    from executorch.examples.qualcomm.oss_scripts.llama.wrappers.base_component import Mode

    work = tmp_path_factory.mktemp("llama-py")
    inputs = qwen3.legacy_inputs(case, work / "inputs")
    mp = pytest.MonkeyPatch()
    for k, v in inputs.env.items():
        mp.setenv(k, v)
    from huggingface_hub import constants  # read the environment at import: set them as well

    mp.setattr(constants, "HF_HUB_CACHE", inputs.env["HF_HUB_CACHE"])
    mp.setattr(constants, "HF_HUB_OFFLINE", True)

    def args(params: Path | None = None) -> object:
        flags = list(inputs.args)
        if params is not None:
            flags[flags.index("--params") + 1] = str(params)
        return _build_parser().parse_args([
            "--decoder_model", DECODER_MODEL, *flags, "--model_mode", "hybrid",
            "--prefill_ar_len", str(AR), "--max_seq_len", str(CTX), "--max_context_len", str(CTX),
            "--prompt", "Once", "--soc_model", "SM8650", "--build_folder", "unused",
            "--artifact", str(work / "artifact")])

    yield SimpleNamespace(config=pkg.SUPPORTED_LLM_MODELS[DECODER_MODEL], wrappers=wrappers,
                          args=args, Mode=Mode, causal_mask=create_causal_attn_mask, home=work)
    mp.undo()


def static_model(llama_py: SimpleNamespace, mode: str, params: Path | None = None) -> torch.nn.Module:
    """llama.py's ``TextDecoder`` for ``mode``, its weights from the offline hub cache."""
    assert not llama_py.config.transform_weight and llama_py.config.masked_softmax
    decoder = llama_py.wrappers.TextDecoder(llama_py.args(params), llama_py.config,
                                            getattr(llama_py.Mode, mode)).decoder
    assert decoder.layers[0].attention.enable_masked_softmax  # QAIRT 2.51 >= 2.35
    return decoder


@torch.no_grad()
def calibration_logits(llama_py: SimpleNamespace, tokens: list[int],
                       params: Path | None = None) -> torch.Tensor:
    """Logits ``[CTX, vocab]`` of llama.py's calibration graph (AR = CTX: every position)."""
    model = static_model(llama_py, "CALIBRATE", params)
    ids = torch.tensor([tokens[:CTX]], dtype=torch.int32)
    empty = [torch.zeros(1, 2, 32, 0)] * 4 + [torch.zeros(1, 2, 0, 32)] * 4
    return model(ids, llama_py.causal_mask(1, CTX, CTX), torch.arange(CTX, dtype=torch.int32)[None],
                 *empty)[0][0]


@torch.no_grad()
def hf_logits(hf_model, tokens: list[int]) -> torch.Tensor:
    return hf_model(torch.tensor([tokens])).logits[0]


def test_llama_py_builds_what_transformers_computes(llama_py, hf_model, tokens) -> None:
    ref = hf_logits(hf_model, tokens[:CTX])
    got = calibration_logits(llama_py, tokens)
    assert got.shape == ref.shape == (CTX, 800)
    assert (got - ref).abs().max() < TOL
    assert torch.equal(got.argmax(-1), ref.argmax(-1))
    converted = llama_py.home / "inputs" / "hf-home" / ".cache" / "meta_checkpoints"
    assert [p.name for p in converted.iterdir()] == ["Qwen_Qwen3-0.6B.pth"]  # its own conversion


def test_the_family_calibrates_on_llama_py_s_tokens(case, llama_py) -> None:
    from executorch.examples.qualcomm.oss_scripts.llama.dataset.builders import (
        DecoderDatasetBuilder,
    )
    from executorch.examples.qualcomm.oss_scripts.llama.dataset.loaders import (
        load_conversation_samples,
    )
    from executorch.examples.qualcomm.oss_scripts.llama.tokenizer import TokenizerWrapper

    from pytest_qnn_genai.flows.legacy import calibration_samples

    samples = llama_py.home / "calib_samples.json"
    samples.write_text(json.dumps(calibration_samples(case)))
    wrapper = TokenizerWrapper(llama_py.args(), llama_py.config)
    want = DecoderDatasetBuilder(wrapper, CTX).from_conversation(
        load_conversation_samples([samples]))
    tok = qwen3.calibration_tokenizer(case)
    got = [qwen3.calibration_ids(case, tok, p) for p in case.calibration_prompts]
    assert [list(map(int, s)) for s in want.sequences] == got  # one chunk each: all < CTX
    from pytest_qnn_genai.runtime.tokenizer import load_tokenizer

    mine = load_tokenizer(case.path("tokenizer_bin"))
    assert mine.decode(got[0]).startswith("<|im_start|>user\nOnce upon a time")  # no BOS
    assert mine.decode(got[0]).endswith("<|im_end|>\n")  # add_generation_prompt=False
    runtime = Path(wrapper.runtime_tokenizer_path)  # what llama.py hands qnn_llama_runner
    assert runtime.name == "tokenizer.json"
    theirs = load_tokenizer(runtime)
    text = "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant"
    assert mine.encode(text) == theirs.encode(text) and mine.vocab_size == theirs.vocab_size


def test_a_perturbed_weight_breaks_the_agreement(case, llama_py, hf_model, tokens,
                                                 tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    sd = load_file(str(case.path("checkpoint")))
    sd["model.layers.2.self_attn.k_norm.weight"][5] *= 1.5  # one channel of one QK-norm
    save_file(sd, str(tmp_path / "model.safetensors"))
    snapshot = next((llama_py.home / "inputs" / "hf-home" / "hub").glob("*/snapshots/*"))
    converted = llama_py.home / "inputs" / "hf-home" / ".cache" / "meta_checkpoints"
    original = snapshot / "model.safetensors"
    kept = tmp_path / "original.safetensors"
    original.rename(kept)
    (tmp_path / "model.safetensors").rename(original)
    for p in converted.iterdir():  # llama.py would reuse a converted file whatever the hub holds
        p.unlink()
    try:
        got = calibration_logits(llama_py, tokens)
    finally:
        original.unlink()
        kept.rename(original)
        for p in converted.iterdir():
            p.unlink()
    assert (got - hf_logits(hf_model, tokens[:CTX])).abs().max() > 100 * TOL


def test_qk_norm_after_rope_breaks_the_agreement(case, llama_py, hf_model, tokens,
                                                 tmp_path) -> None:
    bad = tmp_path / "params.json"
    bad.write_text(json.dumps({**case.params_dict, "qk_norm_before_rope": False}))
    got = calibration_logits(llama_py, tokens, bad)
    assert (got - hf_logits(hf_model, tokens[:CTX])).abs().max() > 100 * TOL
