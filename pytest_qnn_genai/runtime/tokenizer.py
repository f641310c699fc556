"""The case's tokenizer as the runners use it: load, encode with BOS, decode, EOS piece.

Three formats, told apart by the file as ``qnn_llama_runner``'s ``llm::load_tokenizer`` tells them
(a Hugging Face ``tokenizer.json``, else tiktoken ranks, else a SentencePiece model):

- SentencePiece ``tokenizer.model`` (llama2.c / stories260k). The C++ ``qnn_llama_runner`` reads
  the llama2.c ``tokenizer.bin`` made from it; the host side reads the same vocabulary here.
- tiktoken ranks (Llama 3: ``base64 rank`` lines) plus the Llama 3 special tokens, read through
  ``pytorch_tokenizers.TiktokenTokenizer``, the class ``llama.py`` asserts for llama3 models and
  whose ranks and specials are what the C++ ``Tiktoken`` of the runner loads.
- a Hugging Face ``tokenizer.json`` (Qwen3), read by Hugging Face's ``tokenizers`` (what
  ``pytorch_tokenizers.HuggingFaceTokenizer`` uses) with the rules of the C++ ``HFTokenizer`` the
  runners are built with (ExecuTorch 1.5.1's ``extension/llm/tokenizers``,
  ``HFTokenizer::load``): loaded from the file alone, with no ``tokenizer_config.json``, its EOS
  is the one added token whose text holds "eos" or "end" (of several, the one that also holds
  "text"), its BOS likewise with "bos"/"begin", each standing in for the other when only one is
  found, else 0: Qwen3's ``<|endoftext|>`` for both. Measured: upstream's x86 runner stops at
  ``<|endoftext|>``. (The ``CppHFTokenizer`` binding of the wheel's pytorch_tokenizers 1.5 does
  not guess: 0 and 0.) The runner's ``encode(prompt, 1, 0)`` puts that BOS before the prompt.

A continuation is decoded as it follows the prompt, so the leading space SentencePiece drops at
the start of a text is kept, as the runner prints it.

Measured hazard: after the SDK's RTLD_GLOBAL preload, importing ``sentencepiece`` before
``executorch.runtime`` can crash the process; callers that may run after activation import
``executorch.runtime`` first (:mod:`pytest_qnn_genai.runtime.run`).
"""
from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytorch_tokenizers import TiktokenTokenizer
    from sentencepiece import SentencePieceProcessor
    from tokenizers import Tokenizer

_TIKTOKEN_LINE = re.compile(rb"^[A-Za-z0-9+/]+=* \d+\r?\n")


class TokenizerError(ValueError):
    """The tokenizer file is missing or does not fit the program (one line)."""


@dataclass(frozen=True)
class SentencePieceTokenizer:
    """A SentencePiece model (llama2.c family)."""

    sp: SentencePieceProcessor
    family = "sentencepiece"

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @property
    def bos_id(self) -> int:
        return self.sp.bos_id()

    @property
    def eos_id(self) -> int:
        return self.sp.eos_id()

    def encode(self, text: str, specials: bool = False) -> list[int]:
        """Ids of ``text``, no BOS/EOS (a SentencePiece model has no special-token text)."""
        return list(self.sp.encode(text))

    def decode(self, ids: list[int]) -> str:
        return str(self.sp.decode(list(ids)))

    def piece(self, token: int) -> str:
        """The piece of ``token`` as the runner writes it (its EOS piece, for one)."""
        return self.sp.id_to_piece(token)

    def id_of(self, piece: str) -> int:
        """The id of ``piece`` (the inverse of :meth:`piece`)."""
        token = self.sp.piece_to_id(piece)
        if token == self.sp.unk_id() and piece != self.sp.id_to_piece(token):
            raise TokenizerError(f"{piece!r} is not a piece of this tokenizer")
        return token


@dataclass(frozen=True)
class LlamaTiktokenTokenizer:
    """tiktoken ranks with the Llama 3 special tokens (``pytorch_tokenizers``)."""

    tt: TiktokenTokenizer
    family = "tiktoken"

    @property
    def vocab_size(self) -> int:
        return int(self.tt.n_words)

    @property
    def bos_id(self) -> int:
        return int(self.tt.bos_id)

    @property
    def eos_id(self) -> int:
        return int(self.tt.eos_id)

    def encode(self, text: str, specials: bool = False) -> list[int]:
        """Ids of ``text``, no BOS/EOS; special-token text in it is parsed as specials only with
        ``specials`` (as the runner's C++ Tiktoken encodes a --prompt)."""
        return list(self.tt.encode(text, bos=False, eos=False,
                                   allowed_special="all" if specials else set()))

    def decode(self, ids: list[int]) -> str:
        return str(self.tt.decode(list(ids)))

    def piece(self, token: int) -> str:
        return str(self.tt.decode_token(token))

    def id_of(self, piece: str) -> int:
        """The id of a special token's text, or of text that is one rank."""
        if piece in self.tt.special_tokens:
            return int(self.tt.special_tokens[piece])
        ids = self.encode(piece)
        if len(ids) != 1:
            raise TokenizerError(f"{piece!r} is not one token of this tokenizer: {ids}")
        return ids[0]


@dataclass(frozen=True)
class HuggingFaceJsonTokenizer:
    """A Hugging Face ``tokenizer.json`` as the runner's C++ ``HFTokenizer`` reads the file."""

    tok: Tokenizer
    family = "huggingface"

    @property
    def bos_id(self) -> int:
        return guessed_bos_eos(self.tok)[0]

    @property
    def eos_id(self) -> int:
        return guessed_bos_eos(self.tok)[1]

    @property
    def vocab_size(self) -> int:
        return int(self.tok.get_vocab_size(with_added_tokens=True))

    def encode(self, text: str, specials: bool = True) -> list[int]:
        """Ids of ``text``, nothing added. Added-token text in it is always parsed as those
        tokens, as the runner's C++ ``HFTokenizer`` does; ``specials`` is here for the shared
        signature and cannot turn that off."""
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def prompt(self, text: str) -> list[int]:
        """``encode(text, bos=1, eos=0)``: what the file's post-processor adds, nothing else."""
        return list(self.tok.encode(text, add_special_tokens=True).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(list(ids), skip_special_tokens=False))

    def piece(self, token: int) -> str:
        return self.decode([token])

    def id_of(self, piece: str) -> int:
        """The id of an added token's text, or of text that is one token."""
        token = self.tok.token_to_id(piece)
        if token is not None:
            return int(token)
        ids = self.encode(piece)
        if len(ids) != 1:
            raise TokenizerError(f"{piece!r} is not one token of this tokenizer: {ids}")
        return ids[0]


def guessed_bos_eos(tok: Tokenizer) -> tuple[int, int]:
    """BOS and EOS as ``HFTokenizer::load`` guesses them from the added tokens of a
    ``tokenizer.json`` read without its config (the module docstring)."""
    added = {t.content: i for i, t in tok.get_added_tokens_decoder().items()}

    def single(words: tuple[str, str]) -> int | None:
        found = [c for c in added if words[0] in c or words[1] in c]
        if len(found) > 1:
            found = [c for c in found if "text" in c]
        return added[found[0]] if len(found) == 1 else None

    bos, eos = single(("bos", "begin")), single(("eos", "end"))
    bos, eos = (bos if bos is not None else eos), (eos if eos is not None else bos)
    return (0 if bos is None else bos), (0 if eos is None else eos)


CaseTokenizer = SentencePieceTokenizer | LlamaTiktokenTokenizer | HuggingFaceJsonTokenizer


def is_json(path: Path) -> bool:
    """Whether ``path`` starts like a JSON object (a Hugging Face ``tokenizer.json``)."""
    with open(path, "rb") as f:
        return f.read(64).lstrip().startswith(b"{")


def is_tiktoken(path: Path) -> bool:
    """Whether ``path`` holds tiktoken ranks (its first line is ``base64 rank``)."""
    with open(path, "rb") as f:
        return bool(_TIKTOKEN_LINE.match(f.readline()))


def load_tokenizer(path: Path) -> CaseTokenizer:
    """The tokenizer at ``path``, in whichever format it is."""
    path = Path(path)
    if not path.is_file():
        raise TokenizerError(f"tokenizer model {path} does not exist")
    if is_json(path):
        from tokenizers import Tokenizer

        try:
            return HuggingFaceJsonTokenizer(Tokenizer.from_file(str(path)))
        except Exception as e:  # noqa: BLE001 - tokenizers raises its own Exception type
            raise TokenizerError(f"tokenizer model {path} is not a Hugging Face tokenizer.json: "
                                 f"{str(e).splitlines()[0] if str(e) else e}") from None
    if is_tiktoken(path):
        from pytorch_tokenizers import TiktokenTokenizer

        with contextlib.redirect_stdout(io.StringIO()):  # it prints while loading
            return LlamaTiktokenTokenizer(TiktokenTokenizer(model_path=str(path)))
    import sentencepiece

    try:
        return SentencePieceTokenizer(sentencepiece.SentencePieceProcessor(model_file=str(path)))
    except (RuntimeError, OSError) as e:
        raise TokenizerError(f"tokenizer model {path} is neither a SentencePiece model nor "
                             f"tiktoken ranks: {str(e).splitlines()[0] if str(e) else e}") from None


# --decoder_model_version -> the piece qnn_llama_runner stops at besides its tokenizer's EOS
# (runner.cpp ``Runner::load``, ExecuTorch 1.5.1); llama2 (the flag's default), granite,
# qwen2_5: none
RUNNER_STOP_PIECES = {"llama3": "<|eot_id|>", "phi_4_mini": "<|end|>", "qwen3": "<|im_end|>",
                      "smollm2_135m": "<|im_end|>", "smollm3": "<|im_end|>",
                      "gemma": "<end_of_turn>", "gemma2": "<end_of_turn>",
                      "gemma3": "<end_of_turn>", "gemma4": "<turn|>",
                      "codegen": "<|endoftext|>", "glm": "<|user|>"}


def stop_ids(tokenizer: CaseTokenizer, decoder_model_version: str | None) -> frozenset[int]:
    """The ids ``qnn_llama_runner --decoder_model_version V`` stops at (runner.cpp
    ``Runner::load``): its tokenizer's EOS, plus the first id of V's piece in
    :data:`RUNNER_STOP_PIECES` (``<|eot_id|>`` for llama3); None is the flag's default, llama2.
    Upstream's static_llama writes bos 1 / eos 2 into every program's metadata whatever the
    tokenizer says, and the runner reads neither: BOS and EOS come from the tokenizer."""
    ids = {tokenizer.eos_id}
    piece = RUNNER_STOP_PIECES.get(decoder_model_version or "llama2")
    if piece is not None:  # the runner's encode(piece, 0, 0)[0]: special tokens are parsed
        try:
            ids.add(tokenizer.id_of(piece))
        except TokenizerError:
            ids.add(tokenizer.encode(piece)[0])
    return frozenset(ids)


def encode(tokenizer: CaseTokenizer, prompt: str) -> list[int]:
    """The ids the harness hands qnn_llama_runner for ``prompt``: ``[bos] + ids``, BOS from the
    tokenizer (``encode(prompt, 1, 0)``); for a Hugging Face tokenizer, what its post-processor
    adds (Qwen's: nothing; the runner's own ``--prompt`` path puts its guessed BOS first,
    :func:`pytest_qnn_genai.runtime.chat.runner_prompt_ids`)."""
    if isinstance(tokenizer, HuggingFaceJsonTokenizer):
        return tokenizer.prompt(prompt)
    bos = tokenizer.bos_id
    return ([bos] if bos >= 0 else []) + tokenizer.encode(prompt)


def decode_continuation(tokenizer: CaseTokenizer, prompt_ids: list[int],
                        generated: list[int]) -> str:
    """Text of ``generated`` as it continues the prompt (keeps the leading space SentencePiece
    drops when a piece starts a text), i.e. the runner's output less the echoed prompt."""
    head = tokenizer.decode(prompt_ids)
    full = tokenizer.decode(prompt_ids + generated)
    return full[len(head):] if full.startswith(head) else tokenizer.decode(generated)
