"""The runner's tokenizer as upstream loads it (llm_runner_helper.cpp ``load_tokenizer``), in the
stand-in, and the plugin passing the ``--decoder_model_version`` that decides the runner's extra
EOS (runner.cpp ``Runner::load``; llama.py's ``DECODER_MODEL_VERSION``, as upstream's device
evaluator passes it)."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.devices.workspace import DeviceWorkspace
from pytest_qnn_genai.stages.recipe import decoder_model_version
from tests.support.cases import default_cases as available
from tests.support.chat_templates import VERSIONS
from tests.support.standin_backends import (
    HuggingFaceJsonVocab,
    Llama2cVocab,
    TiktokenVocab,
    load_runner_tokenizer,
)

CASES = available()


def test_a_tiktoken_file_loads_as_tiktoken_with_llama3_specials() -> None:
    vocab = load_runner_tokenizer(CASES["llama3_2_toy"].path("tokenizer_bin"))
    assert isinstance(vocab, TiktokenVocab)
    assert (vocab.bos, vocab.eos) == (768, 769)  # <|begin_of_text|>, <|end_of_text|> after 768
    assert vocab.encode("<|eot_id|>") == [768, 777]
    assert vocab.piece_bytes(768, 777) == b"<|eot_id|>"
    ids = vocab.encode("Once upon a time")
    assert b"".join(vocab.piece_bytes(a, b) for a, b in zip(ids, ids[1:])) == b"Once upon a time"


def test_a_llama2c_bin_loads_as_bpe_and_a_sentencepiece_model_is_named() -> None:
    case = CASES["stories260k"]
    assert isinstance(load_runner_tokenizer(case.path("tokenizer_bin")), Llama2cVocab)
    with pytest.raises(RuntimeError, match="SentencePiece"):
        load_runner_tokenizer(case.path("tokenizer_model"))


def test_a_json_tokenizer_loads_through_the_runner_s_hf_tokenizer() -> None:
    vocab = load_runner_tokenizer(CASES["qwen3_toy"].path("tokenizer_bin"))
    assert isinstance(vocab, HuggingFaceJsonVocab)
    assert (vocab.bos, vocab.eos) == (768, 768)  # HFTokenizer::load(file) guesses <|endoftext|>
    ids = vocab.encode_prompt("<|im_start|>user\nOnce upon a time", 1)  # encode(text, 1, 0)
    assert ids[:2] == [768, 769] and b"".join(vocab.piece_bytes(0, t) for t in ids[1:]) == (
        b"<|im_start|>user\nOnce upon a time")


@pytest.mark.parametrize("name,version", [("stories260k", "llama2"), ("llama3_2_toy", "llama3"),
                                          ("qwen3_toy", "qwen3")])
def test_the_runner_gets_llama_py_s_decoder_model_version(name: str, version: str) -> None:
    assert decoder_model_version(CASES[name]) == version
    assert version in VERSIONS  # the stand-in knows it, with its EOS pieces
    command = DeviceWorkspace(object(), "s", "/w").runner_command(
        "m.pte", "tok", None, 64, tokenized_prompt="ids.raw", decoder_model_version=version)
    assert f"--decoder_model_version {version}" in command
    assert "--decoder_model_version" not in DeviceWorkspace(object(), "s", "/w").runner_command(
        "m.pte", "tok", None, 64, tokenized_prompt="ids.raw")


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_the_plugins_stop_ids_are_the_standins(version: str) -> None:
    """The EOS ids the plugin expects a run to stop at (``runtime.tokenizer.stop_ids``) against the
    stand-in's, written from runner.cpp ``Runner::load`` on its own (the tokenizer's EOS plus
    ``encode(piece, 0, 0)[0]`` of the version's pieces), for every version the runner accepts,
    read from the llama3 case's tiktoken file the runner reads."""
    from pytest_qnn_genai.runtime.tokenizer import load_tokenizer, stop_ids

    path = CASES["llama3_2_toy"].path("tokenizer_model")
    vocab = load_runner_tokenizer(path)
    standin = {vocab.eos} | {vocab.encode(piece)[1] for piece in VERSIONS[version][2]}
    assert stop_ids(load_tokenizer(path), version) == standin
    path = CASES["qwen3_toy"].path("tokenizer_bin")  # and from a Hugging Face tokenizer.json
    hf = load_runner_tokenizer(path)
    assert isinstance(hf, HuggingFaceJsonVocab)
    standin = {hf.eos} | {hf.encode_prompt(piece, 0)[0] for piece in VERSIONS[version][2]}
    assert stop_ids(load_tokenizer(path), version) == standin
