"""The gate's default model case, ``stories260k``: files, shapes, tokenizer, behaviour, and parity
with ExecuTorch's Qualcomm ``static_llama`` (the model the legacy flow exports)."""
from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
import sentencepiece as spm
import torch

from pytest_qnn_genai.models import layouts, registry
from pytest_qnn_genai.models.families import llama2c
from pytest_qnn_genai.models.train import greedy

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "stories260k" / "fp32_continuation.json"


@pytest.fixture(scope="module")
def case() -> registry.ModelCase:
    return registry.select(["stories260k"])[0]


@pytest.fixture(scope="module")
def state_dict(case: registry.ModelCase) -> dict[str, torch.Tensor]:
    return llama2c.load_checkpoint(case)


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_case_loads_through_registry(case: registry.ModelCase) -> None:
    assert case.decoder_model == "stories260k"
    assert (case.model_mode, case.prefill_ar_len, case.max_seq_len, case.max_context_len) == (
        "hybrid", 32, 128, 128)
    assert (case.quant_recipe, case.kv_io_bit_width) == ("16a4w", 8)
    assert (case.eval_prompt, case.max_new_tokens) == ("Once upon a time", 48)
    assert len(case.calibration_prompts) >= 8
    assert len(set(case.calibration_prompts)) == len(case.calibration_prompts)
    assert all(p.startswith("Once upon a time") for p in case.calibration_prompts)
    assert all(p.is_file() for p in case.files().values())


def test_checkpoint_matches_params(case: registry.ModelCase, state_dict: dict) -> None:
    params = case.params_dict
    assert params == {"dim": 64, "n_layers": 5, "n_heads": 8, "n_kv_heads": 4, "vocab_size": 512,
                      "multiple_of": 4, "max_seq_len": 512}
    raw = torch.load(case.path("checkpoint"), weights_only=True, map_location="cpu")
    assert set(raw) >= {"model", "model_args"}
    assert all(k.startswith("_orig_mod.") for k in raw["model"])
    assert {k: tuple(v.shape) for k, v in state_dict.items()} == llama2c.expected_shapes(params)
    assert state_dict["layers.0.feed_forward.w1.weight"].shape == (172, 64)
    assert all(v.dtype == torch.float32 for v in state_dict.values())
    assert torch.equal(state_dict["output.weight"], state_dict["tok_embeddings.weight"])


def test_wrong_shape_is_one_clear_line(case: registry.ModelCase, tmp_path: Path) -> None:
    raw = torch.load(case.path("checkpoint"), weights_only=True, map_location="cpu")
    raw["model"]["_orig_mod.layers.3.attention.wk.weight"] = torch.zeros(64, 64)
    bad = tmp_path / "bad.pt"
    torch.save(raw, bad)
    with pytest.raises(registry.ModelCaseError) as err:
        llama2c.read_checkpoint(bad, case.params_dict)
    msg = str(err.value)
    assert "\n" not in msg
    assert "wrong checkpoint shape" in msg and "layers.3.attention.wk.weight" in msg
    assert "expected [32, 64]" in msg and "got [64, 64]" in msg


def test_tokenizer(case: registry.ModelCase) -> None:
    sp = spm.SentencePieceProcessor(model_file=str(case.path("tokenizer_model")))
    assert (sp.vocab_size(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (512, 0, 1, 2)
    assert sp.decode(sp.encode("Once upon a time, there was a girl named Lily.")) == (
        "Once upon a time, there was a girl named Lily.")
    assert sp.encode("7 €") and sp.decode(sp.encode("7 €")) == "7 €"  # byte fallback, digits
    vocab, bos, eos, _max_len = struct.unpack("<4i", case.path("tokenizer_bin").read_bytes()[:16])
    assert (vocab, bos, eos) == (512, 1, 2)


def test_greedy_continuation_is_fluent_and_golden(case: registry.ModelCase, golden: dict) -> None:
    sp = spm.SentencePieceProcessor(model_file=str(case.path("tokenizer_model")))
    ids = greedy(llama2c.load_model(case), [sp.bos_id()] + sp.encode(case.eval_prompt),
                 case.max_new_tokens, [sp.eos_id()])
    assert len(ids) == case.max_new_tokens
    assert len(set(ids)) >= 15
    tail = ids[-24:]  # no short cycle at the end
    assert not any(tail[p:] == tail[:-p] for p in range(1, 9))
    assert golden["prompt"] == case.eval_prompt
    assert ids == golden["token_ids"]
    assert str(ids) in (case.folder / "MODEL_CARD.md").read_text()
    sp = spm.SentencePieceProcessor(model_file=str(case.path("tokenizer_model")))
    assert golden["prompt_ids"] == [1] + sp.encode(case.eval_prompt)
    assert sp.decode(ids) == golden["text"].lstrip()


@pytest.fixture(scope="module")
def executorch_llama() -> SimpleNamespace:
    """The pieces of executorch's Qualcomm llama example the legacy flow builds its model from."""
    from pytest_qnn_genai.compat import torchtune

    torchtune.install()  # before anything under executorch.examples.qualcomm.oss_scripts.llama
    from executorch.backends.qualcomm.utils.utils import convert_linear_to_conv2d
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.examples.qualcomm.oss_scripts.llama.masking_utils import create_causal_attn_mask
    from executorch.examples.qualcomm.oss_scripts.llama.model.static_llama import LlamaModel

    return SimpleNamespace(ModelArgs=ModelArgs, LlamaModel=LlamaModel,
                           causal_mask=create_causal_attn_mask, to_conv2d=convert_linear_to_conv2d)


def _static_llama(et: SimpleNamespace, case: registry.ModelCase, sd: dict[str, torch.Tensor],
                  ar_len: int) -> torch.nn.Module:
    """executorch's static LlamaModel for ``case``, built and loaded as llm_wrappers does it."""
    args = et.ModelArgs(**case.params_dict)  # then what process_model_args sets
    args.max_batch_size, args.ar_len = 1, ar_len
    args.max_seq_len, args.max_context_len = case.max_seq_len, case.max_context_len
    args.use_kv_cache = case.max_context_len != ar_len
    args.kv_io_bit_width = case.kv_io_bit_width
    model = et.LlamaModel(args, ar_len=ar_len, output_new_cache_only=True, output_cache=True,
                          use_i64_token=False)
    model.load_state_dict(sd, strict=True, assign=True)
    for layer in model.layers:
        layer.attention.prepare_attention_conv()
        layer.feed_forward.prepare_feedforward_conv()
    return et.to_conv2d(model).eval()


@torch.no_grad()
def test_logits_match_static_llama(case: registry.ModelCase, state_dict: dict, golden: dict,
                                   executorch_llama: SimpleNamespace) -> None:
    et = executorch_llama
    params, ar, ctx = case.params_dict, case.prefill_ar_len, case.max_context_len
    tokens = (golden["prompt_ids"] + golden["token_ids"])[: ar + 1]
    ours = llama2c.load_model(case)(torch.tensor([tokens]))[0]
    static_sd = layouts.transform_weight(state_dict, params)
    n_kv, hd, n_layers = params["n_kv_heads"], params["dim"] // params["n_heads"], params["n_layers"]

    def run(model: torch.nn.Module, toks: list[int], pos: int, mask: torch.Tensor,
            ks: list[torch.Tensor], vs: list[torch.Tensor]) -> tuple:
        ids = torch.tensor([toks], dtype=torch.int32)
        positions = torch.arange(pos, pos + len(toks), dtype=torch.int32)[None]
        return model(ids, mask, positions, *ks, *vs)

    # prefill: ar tokens into an empty cache
    empty = ([torch.zeros(1, n_kv, hd, ctx - ar)] * n_layers,
             [torch.zeros(1, n_kv, ctx - ar, hd)] * n_layers)
    prefill = _static_llama(et, case, static_sd, ar)
    logits, new_k, new_v = run(prefill, tokens[:ar], 0, et.causal_mask(1, ar, ctx), *empty)
    assert (logits[0] - ours[:ar]).abs().max() < 1e-4
    # decode: one token against the cache the prefill wrote (slots [0, ar))
    decode = _static_llama(et, case, static_sd, 1)
    mask = et.causal_mask(1, 1, ctx).clone()
    mask[..., :ar] = 0
    ks = [torch.cat([k, torch.zeros(1, n_kv, hd, ctx - 1 - ar)], -1) for k in new_k]
    vs = [torch.cat([v, torch.zeros(1, n_kv, ctx - 1 - ar, hd)], 2) for v in new_v]
    step_logits, _, _ = run(decode, tokens[ar:], ar, mask, ks, vs)
    assert (step_logits[0, 0] - ours[ar]).abs().max() < 1e-4
    # negative control: without the RoPE permutation the static model disagrees
    unpermuted = _static_llama(et, case, dict(state_dict), ar)
    wrong, _, _ = run(unpermuted, tokens[:ar], 0, et.causal_mask(1, ar, ctx), *empty)
    assert (wrong[0] - ours[:ar]).abs().max() > 0.1
