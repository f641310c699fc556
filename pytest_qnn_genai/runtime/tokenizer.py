"""The case's SentencePiece tokenizer as the runners use it: load, encode with BOS, decode.

The C++ ``qnn_llama_runner`` reads the llama2.c ``tokenizer.bin``; the host side reads the same
vocabulary from ``tokenizer.model``. A continuation is decoded as it follows the prompt, so the
leading space SentencePiece drops at the start of a text is kept, as the runner prints it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sentencepiece import SentencePieceProcessor


class TokenizerError(ValueError):
    """The tokenizer file is missing or does not fit the program (one line)."""


def load_tokenizer(path: Path) -> SentencePieceProcessor:
    """The SentencePiece model at ``path``."""
    import sentencepiece

    if not Path(path).is_file():
        raise TokenizerError(f"tokenizer model {path} does not exist")
    return sentencepiece.SentencePieceProcessor(model_file=str(path))


def encode(tokenizer: SentencePieceProcessor, prompt: str, bos_id: int | None = None) -> list[int]:
    """``[bos] + SentencePiece ids`` of ``prompt`` (bos from the program when it says so)."""
    bos = tokenizer.bos_id() if bos_id is None else bos_id
    return ([bos] if bos >= 0 else []) + list(tokenizer.encode(prompt))


def decode_continuation(tokenizer: SentencePieceProcessor, prompt_ids: list[int],
                        generated: list[int]) -> str:
    """Text of ``generated`` as it continues the prompt (keeps the leading space SentencePiece
    drops when a piece starts a text), i.e. the runner's output less the echoed prompt."""
    head = tokenizer.decode(prompt_ids)
    full = tokenizer.decode(prompt_ids + generated)
    return full[len(head):] if full.startswith(head) else tokenizer.decode(generated)
