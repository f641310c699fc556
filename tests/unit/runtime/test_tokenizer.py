"""The three tokenizer formats, held against upstream's loader (``pytorch_tokenizers.get_tokenizer``,
what llama.py uses), against the runner's C++ tokenizers (pytorch_tokenizers' bindings) and
against the ids transformers generated for the toys' model cards."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from pytest_qnn_genai.models import registry
from pytest_qnn_genai.runtime.tokenizer import (
    TokenizerError,
    decode_continuation,
    encode,
    is_tiktoken,
    load_tokenizer,
    stop_ids,
)

STORIES = registry.MODELS_DIR / "stories260k" / "tokenizer.model"
LLAMA3 = registry.MODELS_DIR / "llama3_2_toy" / "tokenizer.model"
QWEN3 = registry.MODELS_DIR / "qwen3_toy" / "tokenizer.json"
TEXTS = ("Once upon a time", " there was a little boy named Tom.", "Hi!\n\nBye",
         "<|im_start|>user\nTom's 42 balls<|im_end|>\n<|im_start|>assistant", "  two  spaces \r\n")
# MODEL_CARD.md of llama3_2_toy: transformers' greedy ids after bos + "Once upon a time" (first 12)
LLAMA3_CONTINUATION = [44, 363, 287, 258, 396, 439, 350, 276, 46, 317, 394, 265]


def _upstream(path: Path):  # pytorch_tokenizers picks the family as llama.py does
    from pytorch_tokenizers import get_tokenizer

    with contextlib.redirect_stdout(io.StringIO()):
        return get_tokenizer(str(path))


@pytest.mark.parametrize("path,family,vocab", [(STORIES, "sentencepiece", 512),
                                               (LLAMA3, "tiktoken", 1024)])
def test_each_family_encodes_as_upstream_does(path: Path, family: str, vocab: int) -> None:
    tok, ref = load_tokenizer(path), _upstream(path)
    assert (tok.family, tok.vocab_size) == (family, vocab) == (family, ref.n_words)
    assert (tok.bos_id, tok.eos_id) == (ref.bos_id, ref.eos_id)
    for text in TEXTS[:3]:
        assert encode(tok, text) == ref.encode(text, bos=True, eos=False)
    assert tok.id_of(tok.piece(tok.eos_id)) == tok.eos_id


def test_llama3_continuation_decodes_to_the_model_cards_text() -> None:
    tok = load_tokenizer(LLAMA3)
    prompt = encode(tok, "Once upon a time")
    assert prompt == [768, 348, 349, 258, 324]
    text = decode_continuation(tok, prompt, LLAMA3_CONTINUATION)
    assert text == ", there was a little boy named Tom. He loved to"
    assert (tok.piece(tok.eos_id), tok.id_of("<|eot_id|>")) == ("<|end_of_text|>", 777)
    with pytest.raises(TokenizerError, match="not one token"):
        tok.id_of("Once upon")


def test_stop_ids_are_the_runners() -> None:
    # runner.cpp Runner::load: the tokenizer's EOS, + <|eot_id|> for decoder_model_version llama3
    stories, llama3 = load_tokenizer(STORIES), load_tokenizer(LLAMA3)
    assert stop_ids(stories, "llama2") == stop_ids(stories, None) == {2}
    assert stop_ids(llama3, "llama3") == {769, 777}
    # keyed on the runner's flag, not on the tokenizer: llama2 (the default) adds nothing
    assert stop_ids(llama3, None) == stop_ids(llama3, "qwen2_5") == {769}
    # a version's piece the vocabulary lacks as one token: the first id of its encoding
    assert stop_ids(llama3, "phi_4_mini") == {769, llama3.encode("<|end|>")[0]}
    assert stop_ids(stories, "llama3") == {2, stories.encode("<|eot_id|>")[0]}


def test_sentencepiece_continuation_keeps_the_leading_space() -> None:
    tok = load_tokenizer(STORIES)
    body = tok.encode("Once upon a time")
    assert decode_continuation(tok, body, tok.encode(" there was")) == " there was"
    assert tok.piece(tok.eos_id) == "</s>"


def test_bad_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="does not exist"):
        load_tokenizer(tmp_path / "missing.model")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"\x00\x01not a tokenizer")
    assert not is_tiktoken(junk) and is_tiktoken(LLAMA3) and not is_tiktoken(STORIES)
    with pytest.raises(TokenizerError, match="neither a SentencePiece model nor tiktoken") as e:
        load_tokenizer(junk)
    assert "\n" not in str(e.value)


def _runner_hf_tokenizer(path: Path):
    """qnn_llama_runner's ``HFTokenizer`` (pytorch_tokenizers' C++, loaded as the runner loads
    ``--tokenizer_path``: the file)."""
    from pytorch_tokenizers import CppHFTokenizer

    cpp = CppHFTokenizer()
    cpp.load(str(path))
    return cpp


def test_a_hugging_face_tokenizer_reads_as_the_runner_reads_it() -> None:
    tok, cpp = load_tokenizer(QWEN3), _runner_hf_tokenizer(QWEN3)
    assert tok.family == "huggingface"
    assert tok.vocab_size == cpp.vocab_size() == 794
    # BOS/EOS: the runners' HFTokenizer (ExecuTorch 1.5.1's tokenizers) guesses them from the
    # added tokens, <|endoftext|> for both; the wheel's pytorch_tokenizers 1.5 binding leaves 0
    # (upstream's x86 runner stopping at <|endoftext|>: tests/integration/runners)
    assert (tok.bos_id, tok.eos_id) == (768, 768) and tok.piece(768) == "<|endoftext|>"
    assert (cpp.bos_tok(), cpp.eos_tok()) == (0, 0)
    for text in TEXTS:
        assert encode(tok, text) == list(cpp.encode(text, 0, 0))  # what the post-processor adds
        assert tok.encode(text) == list(cpp.encode(text, 0, 0))
        ids = tok.encode(text)
        assert tok.decode(ids) == "".join(cpp.decode(i) for i in ids) == text
    assert encode(tok, "Once upon a time")[0] != tok.bos_id  # Qwen's post-processor adds no BOS
    # measured: the C++ NFC normalizer of pytorch_tokenizers 1.5 drops diacritics ("ü" -> "u");
    # Hugging Face's (llama.py's calibration, this reader) keeps the bytes. Prompts are ASCII.
    assert list(cpp.encode("Zürich", 0, 0)) == tok.encode("Zurich") != tok.encode("Zürich")
    assert tok.id_of("<|im_end|>") == list(cpp.encode("<|im_end|>", 0, 0))[0] == 770
    # calibration: llama.py's pytorch_tokenizers.HuggingFaceTokenizer encodes the same ids
    with contextlib.redirect_stdout(io.StringIO()):
        from pytorch_tokenizers import get_tokenizer

        ref = get_tokenizer(str(QWEN3), str(QWEN3.parent / "tokenizer_config.json"))
    assert all(ref.encode(t, bos=True, eos=False) == tok.encode(t) for t in TEXTS)


def test_qwen3_stops_at_im_end_as_the_runner_does() -> None:
    tok = load_tokenizer(QWEN3)
    assert stop_ids(tok, "qwen3") == {768, 770}  # the guessed <|endoftext|>, + <|im_end|>
    assert stop_ids(tok, "llama2") == {768}
    stand_in = load_tokenizer(STORIES)  # another format, same rule
    assert stop_ids(stand_in, "qwen3") == {2, stand_in.encode("<|im_end|>")[0]}


def test_a_broken_tokenizer_json_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"version": "1.0", "model": {"type": "Nope"}}')
    with pytest.raises(TokenizerError, match="not a Hugging Face tokenizer.json") as e:
        load_tokenizer(bad)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("added,expected", [
    (["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|box_end|>"], (0, 0)),  # "text" decides
    (["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], (0, 1)),
    (["<s>", "</s>"], (0, 0)),  # neither guessed: 0, the C++'s initial value
    (["<pad>", "<eos>"], (1, 1)),  # only EOS found: BOS is the same
])
def test_bos_and_eos_are_guessed_as_hf_tokenizer_load_guesses(added: list[str],
                                                              expected: tuple[int, int]) -> None:
    from tokenizers import Tokenizer, models

    from pytest_qnn_genai.runtime.tokenizer import guessed_bos_eos

    tok = Tokenizer(models.WordLevel({}, unk_token=None))
    tok.add_special_tokens(added)
    assert guessed_bos_eos(tok) == expected
