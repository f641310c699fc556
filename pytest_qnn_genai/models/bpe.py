"""Byte-level BPE for the toy models, trained by the project and written in two formats.

:func:`train_bpe` learns merges over pre-tokens (a regex split, as tiktoken and Hugging Face's
``tokenizers`` split text before BPE): the 256 single bytes first, then the most frequent pair,
ties broken by the pair's bytes, so the result depends only on the text. The ranks are written as
tiktoken's ``base64 rank`` lines (Llama 3's ``tokenizer.model``, :func:`save_tiktoken`) or as a
Hugging Face ``tokenizer.json`` (Qwen2/Qwen3's layout: NFC, regex ``Split`` + ``ByteLevel``
pre-tokenizer, BPE, ``ByteLevel`` decoder, added special tokens; :func:`save_hf_tokenizer`).
"""
from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path


def pretokens(texts: Iterable[str], pattern: str) -> Counter[str]:
    """How often each pre-token (``pattern``'s matches) occurs in ``texts``."""
    import regex

    pat, counts = regex.compile(pattern), Counter[str]()
    for t in texts:
        counts.update(pat.findall(t))
    return counts


def train_bpe(texts: Iterable[str], n_merges: int, pattern: str) -> list[tuple[bytes, bytes]]:
    """Byte-level BPE merges over the 256 bytes, ``n_merges`` of them, most frequent pair first
    (ties broken by the pair's bytes, so the result depends only on ``texts``)."""
    words = {tuple(bytes([b]) for b in w.encode()): c for w, c in pretokens(texts, pattern).items()}
    ranks = {bytes([b]): b for b in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    while len(ranks) < 256 + n_merges:
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for w, c in words.items():
            for pair in zip(w, w[1:]):
                pairs[pair] += c
        fresh = [(c, p) for p, c in pairs.items() if p[0] + p[1] not in ranks]
        if not fresh:
            raise ValueError(f"the text has room for only {len(ranks) - 256} merges, not {n_merges}")
        _, (a, b) = max(fresh)
        ranks[a + b] = len(ranks)
        merges.append((a, b))
        merged: dict[tuple[bytes, ...], int] = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return merges


def ranks_of(merges: Sequence[tuple[bytes, bytes]]) -> dict[bytes, int]:
    """The tiktoken ranks of ``merges``: the 256 bytes, then each merge's result in order."""
    ranks = {bytes([b]): b for b in range(256)}
    for a, b in merges:
        ranks[a + b] = len(ranks)
    return ranks


def save_tiktoken(ranks: dict[bytes, int], path: str | Path) -> None:
    """Write ranks in tiktoken's ``.tiktoken`` / Llama 3 ``tokenizer.model`` format."""
    lines = [f"{base64.b64encode(tok).decode()} {rank}\n" for tok, rank in
             sorted(ranks.items(), key=lambda kv: kv[1])]
    Path(path).write_text("".join(lines))


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's byte → printable character table (Hugging Face's ``ByteLevel``)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def save_hf_tokenizer(merges: Sequence[tuple[bytes, bytes]], pattern: str,
                      specials: Sequence[tuple[str, bool]], path: str | Path) -> None:
    """Write ``merges`` as a Hugging Face ``tokenizer.json`` in Qwen2/Qwen3's layout; ``specials``
    are added tokens after the ranks, ``(text, special)`` in id order (Qwen marks its tool and
    think tags ``special: false``)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    b2u = byte_to_unicode()

    def text(piece: bytes) -> str:
        return "".join(b2u[b] for b in piece)

    vocab = {text(tok): rank for tok, rank in ranks_of(merges).items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(text(a), text(b)) for a, b in merges],
                               byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    for piece, special in specials:  # one at a time: ids follow the order given
        added = AddedToken(piece, special=special, normalized=False)
        (tok.add_special_tokens if special else tok.add_tokens)([added])
    tok.save(str(path))
