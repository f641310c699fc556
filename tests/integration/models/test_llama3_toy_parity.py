"""The toy Llama 3.2 model (``pytest_qnn_genai/models/llama3_2_toy``): its files, its tokenizer, and
agreement between ExecuTorch's ``static_llama`` (built and loaded by llama.py's own ``TextDecoder``
from the Meta-layout checkpoint, with its ``transform_weight`` permutation) and
``transformers.LlamaForCausalLM`` on the Hugging Face copy of the same weights."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pytest_qnn_genai.models import layouts, registry
from pytest_qnn_genai.models.families import llama3
from pytest_qnn_genai.models.train import greedy

FOLDER = registry.MODELS_DIR / "llama3_2_toy"
DECODER_MODEL = "llama3_2-1b_instruct"
AR, CTX = 32, 128
TOL = 1e-4  # fp32 vs fp32; the perturbed/negative controls move logits by > 100x this


@pytest.fixture(scope="module")
def files() -> dict[str, Path]:
    return registry.available()["llama3_2_toy"].files()


@pytest.fixture(scope="module")
def params(files: dict[str, Path]) -> dict:
    return json.loads(files["params"].read_text())


@pytest.fixture(scope="module")
def tok(files: dict[str, Path]):
    return llama3.load_tokenizer(files["tokenizer_model"])


@pytest.fixture(scope="module")
def hf_model():
    return llama3.load_hf(FOLDER)


@pytest.fixture(scope="module")
def tokens(tok, hf_model) -> list[int]:
    """bos + the eval prompt + its greedy continuation: CTX tokens of in-distribution text."""
    prompt = tok.encode("Once upon a time", bos=True, eos=False)
    return prompt + greedy(lambda x: hf_model(x).logits, prompt, CTX - len(prompt))


def test_files_and_layouts(files: dict[str, Path], params: dict) -> None:
    assert registry.available()["llama3_2_toy"].family is llama3  # a default case
    assert params == llama3.PARAMS
    sd = llama3.read_checkpoint(files["checkpoint"], params)
    assert {k: tuple(v.shape) for k, v in sd.items()} == llama3.expected_shapes(params)
    assert all(v.dtype == torch.float32 for v in sd.values())
    assert torch.equal(sd["output.weight"], sd["tok_embeddings.weight"])  # tied, both present
    config = json.loads(files["hf_config"].read_text())
    assert config["tie_word_embeddings"] is True
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (4, 2)
    assert config["rope_parameters"] == {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    from safetensors.torch import load_file

    hf = load_file(str(files["hf_weights"]))
    assert "lm_head.weight" not in hf
    want = layouts.meta_to_hf(sd, params)
    del want["lm_head.weight"]
    assert hf.keys() == want.keys()
    assert all(torch.equal(hf[k], want[k]) for k in hf)  # one set of weights, two layouts
    assert all(torch.equal(v, sd[k]) for k, v in layouts.hf_to_meta(hf, params).items())


def test_params_are_model_args(params: dict) -> None:
    from executorch.examples.models.llama.model_args import ModelArgs

    args = ModelArgs(**params)  # what llama.py does with --params
    assert (args.hidden_dim, args.head_dim, args.rope_freq_base) == (256, 16, 500000.0)
    assert (args.use_scaled_rope, args.rope_scale_factor, args.high_freq_factor) == (True, 32, 4)
    assert args.use_hf_rope is False  # static_llama takes precompute_freqs_cis, which scales


def test_tokenizer_loads_as_llama3_tiktoken(files: dict[str, Path], tok) -> None:
    from pytorch_tokenizers import CppTiktoken, TiktokenTokenizer, get_tokenizer

    got = get_tokenizer(str(files["tokenizer_model"]))  # what llama.py's TokenizerWrapper calls
    assert isinstance(got, TiktokenTokenizer)
    assert (got.n_words, got.bos_id, got.eos_id) == (1024, 768, 769)
    assert got.special_tokens["<|eot_id|>"] == 777
    text = 'Once upon a time, there was a girl named Lily. "Hi!" she said.'
    ids = got.encode(text, bos=True, eos=True)
    assert ids[0] == 768 and ids[-1] == 769 and max(ids[1:-1]) < 768
    assert got.decode(ids[1:-1]) == text
    assert len(ids) < len(text) // 2  # merged, not byte by byte
    odd = "Zürich 42 €\n\nnaïve"  # outside the corpus: byte-level, still lossless
    assert got.decode(got.encode(odd, bos=False, eos=False)) == odd
    cpp = CppTiktoken()  # qnn_llama_runner's loader
    cpp.load(str(files["tokenizer_model"]))
    assert (cpp.vocab_size(), cpp.bos_tok(), cpp.eos_tok()) == (1024, 768, 769)
    assert cpp.encode(text, 1, 1) == ids


def test_greedy_continuation_is_fluent(tok, hf_model) -> None:
    prompt = tok.encode("Once upon a time", bos=True, eos=False)
    ids = greedy(lambda x: hf_model(x).logits, prompt, 48, [tok.eos_id])
    assert len(ids) == 48 and len(set(ids)) >= 15
    tail = ids[-24:]
    assert not any(tail[p:] == tail[:-p] for p in range(1, 9))
    assert tok.decode(ids).startswith(", there was")
    assert str(ids) in (FOLDER / "MODEL_CARD.md").read_text()
    chat = greedy(lambda x: hf_model(x).logits, llama3.chat_ids(tok, "Once upon a time", 768), 48,
                  [777, 769])
    assert str(chat) in (FOLDER / "MODEL_CARD.md").read_text()


# -- static_llama (as llama.py builds it) vs transformers --------------------------------------


@pytest.fixture(scope="module")
def et() -> SimpleNamespace:
    from pytest_qnn_genai.compat import llama_example

    pkg, wrappers = llama_example.package(), llama_example.llm_wrappers()
    from executorch.examples.qualcomm.oss_scripts.llama.llama import _build_parser
    from executorch.examples.qualcomm.oss_scripts.llama.masking_utils import create_causal_attn_mask
    from executorch.examples.qualcomm.oss_scripts.llama.wrappers.base_component import Mode

    return SimpleNamespace(config=pkg.SUPPORTED_LLM_MODELS[DECODER_MODEL], wrappers=wrappers,
                           parser=_build_parser(), Mode=Mode, causal_mask=create_causal_attn_mask)


def static_llama(et: SimpleNamespace, checkpoint: Path, params: Path, mode: str) -> torch.nn.Module:
    """llama.py's ``TextDecoder`` for ``mode``: ModelArgs from --params, the checkpoint loaded
    strictly after ``transform_weight``'s wq/wk permutation, linears as 1x1 convs."""
    args = et.parser.parse_args([
        "--decoder_model", DECODER_MODEL, "--checkpoint", str(checkpoint), "--params", str(params),
        "--tokenizer_model", str(FOLDER / "tokenizer.model"), "--model_mode", "hybrid",
        "--prefill_ar_len", str(AR), "--max_seq_len", str(CTX), "--max_context_len", str(CTX),
        "--prompt", "Once", "--soc_model", "SM8650", "--build_folder", "unused"])
    assert et.config.transform_weight
    return et.wrappers.TextDecoder(args, et.config, getattr(et.Mode, mode)).decoder


@torch.no_grad()
def static_logits(et: SimpleNamespace, checkpoint: Path, params: Path, tokens: list[int],
                  n_kv: int = 2, hd: int = 16, n_layers: int = 4) -> torch.Tensor:
    """Logits ``[AR + 1, vocab]``: a prefill of ``tokens[:AR]`` into an empty cache, then one
    decode step of ``tokens[AR]`` against the cache the prefill wrote."""
    def run(model, toks, pos, mask, ks, vs):
        ids = torch.tensor([toks], dtype=torch.int32)
        positions = torch.arange(pos, pos + len(toks), dtype=torch.int32)[None]
        return model(ids, mask, positions, *ks, *vs)

    prefill = static_llama(et, checkpoint, params, "PREFILL")
    empty_k = [torch.zeros(1, n_kv, hd, CTX - AR)] * n_layers
    empty_v = [torch.zeros(1, n_kv, CTX - AR, hd)] * n_layers
    logits, new_k, new_v = run(prefill, tokens[:AR], 0, et.causal_mask(1, AR, CTX), empty_k, empty_v)
    decode = static_llama(et, checkpoint, params, "DECODE")
    mask = et.causal_mask(1, 1, CTX).clone()
    mask[..., :AR] = 0
    ks = [torch.cat([k, torch.zeros(1, n_kv, hd, CTX - 1 - AR)], -1) for k in new_k]
    vs = [torch.cat([v, torch.zeros(1, n_kv, CTX - 1 - AR, hd)], 2) for v in new_v]
    step, _, _ = run(decode, tokens[AR:AR + 1], AR, mask, ks, vs)
    return torch.cat([logits[0], step[0]])


@torch.no_grad()
def calibration_logits(et: SimpleNamespace, checkpoint: Path, params: Path,
                       tokens: list[int]) -> torch.Tensor:
    """Logits ``[CTX, vocab]`` of llama.py's calibration graph (AR = CTX: every position)."""
    model = static_llama(et, checkpoint, params, "CALIBRATE")
    ids = torch.tensor([tokens[:CTX]], dtype=torch.int32)
    empty = [torch.zeros(1, 2, 16, 0)] * 4 + [torch.zeros(1, 2, 0, 16)] * 4
    return model(ids, et.causal_mask(1, CTX, CTX), torch.arange(CTX, dtype=torch.int32)[None],
                 *empty)[0][0]


@torch.no_grad()
def hf_logits(hf_model, tokens: list[int]) -> torch.Tensor:
    return hf_model(torch.tensor([tokens])).logits[0]


def test_static_llama_matches_transformers(et, files, hf_model, tokens) -> None:
    ref = hf_logits(hf_model, tokens[:CTX])
    got = static_logits(et, files["checkpoint"], files["params"], tokens)
    assert (got - ref[:AR + 1]).abs().max() < TOL
    assert torch.equal(got.argmax(-1), ref[:AR + 1].argmax(-1))
    full = calibration_logits(et, files["checkpoint"], files["params"], tokens)
    assert (full - ref).abs().max() < TOL  # positions 0..127: where llama3 scaling matters most


def test_perturbed_weight_fails_the_check(et, files, params, hf_model, tokens, tmp_path) -> None:
    sd = llama3.read_checkpoint(files["checkpoint"], params)
    sd["layers.2.attention.wk.weight"] = sd["layers.2.attention.wk.weight"].clone()
    sd["layers.2.attention.wk.weight"][5] *= 1.5  # one row of one key projection
    bad = tmp_path / "perturbed.pth"
    llama3.save_checkpoint(sd, bad)
    ref = hf_logits(hf_model, tokens[:AR + 1])
    got = static_logits(et, bad, files["params"], tokens)
    assert (got - ref).abs().max() > 100 * TOL


def test_unpermuted_checkpoint_fails_the_check(et, files, params, hf_model, tokens, tmp_path) -> None:
    """An HF-ordered wq/wk (no inverse permutation) is permuted again by llama.py: wrong RoPE."""
    sd = llama3.read_checkpoint(files["checkpoint"], params)
    bad = tmp_path / "hf_order.pth"
    llama3.save_checkpoint(layouts.transform_weight(sd, params), bad)
    ref = hf_logits(hf_model, tokens[:AR + 1])
    assert (static_logits(et, bad, files["params"], tokens) - ref).abs().max() > 100 * TOL


def test_llama31_rope_scale_factor_fails_the_check(et, files, params, hf_model, tokens,
                                                   tmp_path) -> None:
    """Without ``rope_scale_factor`` in params.json ModelArgs falls back to 8 (Llama 3.1) on the
    QNN path, while Llama 3.2 (and this model's HF config) uses 32."""
    p = dict(params)
    del p["rope_scale_factor"]
    bad = tmp_path / "params.json"
    bad.write_text(json.dumps(p))
    ref = hf_logits(hf_model, tokens[:CTX])
    full = calibration_logits(et, files["checkpoint"], bad, tokens)
    assert (full - ref).abs().max() > 10 * TOL
