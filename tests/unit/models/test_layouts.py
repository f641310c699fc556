"""The toy Llama 3.2 model's building blocks: weight layouts, config, and the tiktoken tokenizer."""
from __future__ import annotations

import base64
from pathlib import Path

import pytest
import torch
from pytorch_tokenizers.constants import CL100K_PAT_STR

from pytest_qnn_genai.models import bpe, layouts, registry
from pytest_qnn_genai.models.families import llama3

SMALL = dict(llama3.PARAMS, n_layers=2)


def random_meta(params: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(s, generator=g) for k, s in llama3.expected_shapes(params).items()}


def test_shapes_follow_model_args_rules() -> None:
    assert llama3.hidden_dim(llama3.PARAMS) == 256  # int(1.5 * int(2 * 256 / 3)) = 255 -> 256
    assert llama3.head_dim(llama3.PARAMS) == 16
    assert llama3.PARAMS["vocab_size"] == llama3.N_BASE + 256 == 1024
    shapes = llama3.expected_shapes(SMALL)
    assert shapes["layers.1.attention.wk.weight"] == (32, 64)  # GQA: 2 KV heads of 16
    assert shapes["output.weight"] == shapes["tok_embeddings.weight"] == (1024, 64)
    # Llama3_1BQuantRecipe quantizes convs in blocks of 32 input channels
    assert all(s[-1] % 32 == 0 for k, s in shapes.items() if len(s) == 2 and "tok_emb" not in k)


def test_permutations_are_inverse_and_match_executorch_formula() -> None:
    w = torch.arange(32 * 5, dtype=torch.float32).view(32, 5)
    half = layouts.interleaved_to_half_split(w, heads=2)
    assert torch.equal(layouts.half_split_to_interleaved(half, heads=2), w)
    # llm_wrappers' transform_weight permute with partial_rotary_factor 1
    et = w.view(2, -1, 32 // 2 // 2 // 1, 2, 5).transpose(2, 3).reshape(32, 5)
    assert torch.equal(half, et)
    # head 0: rows 0,2,4,...,14 then 1,3,...,15 (pairs (x0,x1) -> (x0, x8) in half-split order)
    assert half[:, 0].tolist()[:16] == [5.0 * r for r in (*range(0, 16, 2), *range(1, 16, 2))]


def test_meta_hf_round_trip() -> None:
    sd = random_meta(SMALL)
    sd["output.weight"] = sd["tok_embeddings.weight"]
    hf = layouts.meta_to_hf(sd, SMALL)
    assert "model.layers.1.self_attn.k_proj.weight" in hf and "lm_head.weight" in hf
    back = layouts.hf_to_meta(hf, SMALL)
    assert back.keys() == sd.keys()
    assert all(torch.equal(back[k], sd[k]) for k in sd)
    del hf["lm_head.weight"]  # a tied HF checkpoint has none
    assert torch.equal(layouts.hf_to_meta(hf, SMALL)["output.weight"], sd["tok_embeddings.weight"])
    static = layouts.transform_weight(sd, SMALL)
    assert torch.equal(static["layers.0.attention.wq.weight"], hf["model.layers.0.self_attn.q_proj.weight"])


def test_hf_config_mirrors_params() -> None:
    c = llama3.hf_config(llama3.PARAMS)
    assert (c.hidden_size, c.intermediate_size, c.num_hidden_layers) == (64, 256, 4)
    assert (c.num_attention_heads, c.num_key_value_heads, c.head_dim) == (4, 2, 16)
    assert c.tie_word_embeddings and c.rms_norm_eps == llama3.PARAMS["norm_eps"]
    rp = dict(c.rope_parameters or {})
    assert (rp["rope_type"], rp["rope_theta"], rp["factor"]) == ("llama3", 500000.0, 32.0)
    assert (rp["low_freq_factor"], rp["high_freq_factor"], rp["original_max_position_embeddings"]) == (
        1.0, 4.0, 8192)
    assert (c.bos_token_id, c.eos_token_id) == (768, [769, 776, 777])


def test_checkpoint_errors_are_one_line(tmp_path: Path) -> None:
    sd = random_meta(SMALL)
    good = tmp_path / "good.pth"
    llama3.save_checkpoint(sd, good)
    assert llama3.read_checkpoint(good, SMALL).keys() == sd.keys()
    sd["layers.1.attention.wk.weight"] = torch.zeros(64, 64)
    llama3.save_checkpoint(sd, tmp_path / "bad.pth")
    with pytest.raises(registry.ModelCaseError) as err:
        llama3.read_checkpoint(tmp_path / "bad.pth", SMALL)
    assert "\n" not in str(err.value) and "layers.1.attention.wk.weight" in str(err.value)
    assert "expected [32, 64]" in str(err.value)
    del sd["output.weight"]
    llama3.save_checkpoint(sd, tmp_path / "untied.pth")
    with pytest.raises(registry.ModelCaseError, match=r"missing \['output.weight'\]"):
        llama3.read_checkpoint(tmp_path / "untied.pth", SMALL)


def test_bpe_is_deterministic_and_tiktoken_readable(tmp_path: Path) -> None:
    texts = ["the cat sat on the mat.", "the dog sat on the log!", "a cat and a dog."] * 5
    ranks = bpe.ranks_of(bpe.train_bpe(texts, 20, CL100K_PAT_STR))
    assert ranks == bpe.ranks_of(bpe.train_bpe(list(reversed(texts)), 20, CL100K_PAT_STR))
    assert len(ranks) == 276 and [ranks[bytes([b])] for b in range(256)] == list(range(256))
    assert sorted(ranks.values()) == list(range(276))
    assert b" the" in ranks and b" cat" in ranks
    for tok, rank in ranks.items():  # every merge joins two lower-ranked tokens (tiktoken's rule)
        assert len(tok) == 1 or any(ranks.get(tok[:i], rank) < rank and ranks.get(tok[i:], rank) < rank
                                    for i in range(1, len(tok)))
    path = tmp_path / "tokenizer.model"
    bpe.save_tiktoken(ranks, path)
    first = path.read_text().splitlines()[0]
    assert first == f"{base64.b64encode(bytes([0])).decode()} 0"
    loaded = llama3.load_tokenizer(path)
    assert (loaded.n_words, loaded.bos_id, loaded.eos_id) == (276 + 256, 276, 277)
    ids = loaded.encode("the cat sat", bos=True, eos=False)
    assert ids[0] == 276 and len(ids) < 1 + len("the cat sat")
    assert loaded.decode(ids[1:]) == "the cat sat"
    with pytest.raises(ValueError, match="room for only"):
        bpe.train_bpe(["ab ab"], 50, CL100K_PAT_STR)


def test_chat_ids_follow_the_runner_template(tmp_path: Path) -> None:
    ranks = bpe.ranks_of(bpe.train_bpe(["user assistant hello world"] * 3, 10, CL100K_PAT_STR))
    bpe.save_tiktoken(ranks, tmp_path / "t.model")
    tok = llama3.load_tokenizer(tmp_path / "t.model")
    ids = llama3.chat_ids(tok, "hello", tok.bos_id)
    assert tok.decode(ids) == "<|begin_of_text|>" + llama3.CHAT_USER + "hello" + llama3.CHAT_ASSISTANT
