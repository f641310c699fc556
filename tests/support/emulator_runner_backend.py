"""A :mod:`tests.support.fake_runner` backend that runs the pushed .pte on the x86 HTP emulator.

The fake device runs the "runner" as a local subprocess, so this module runs in that subprocess:
it activates the QNN SDK named by ``$QNN_SDK_ROOT`` (the launcher exports it), loads the pushed
.pte with the project's :class:`HybridRunner` and does what ``qnn_llama_runner --eval_mode 1``
does: tokenize the prompt with the llama2.c ``tokenizer.bin`` (BOS + BPE merges by score, as
pytorch-tokenizers' ``Llama2cTokenizer``), prefill, decode greedily while the position is below
``--seq_len``, decode pieces to text. The timings in the reply are HybridRunner's measurements.
"""
from __future__ import annotations

import os
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.fake_runner import BACKEND_ENV, REPO_ROOT, RunnerReply, RunnerRequest

BACKEND = "tests.support.emulator_runner_backend:run"
_BYTE_PIECE = re.compile(rb"^<0x([0-9A-Fa-f]{2})>$")


@dataclass(frozen=True)
class Llama2cVocab:
    """A llama2.c ``tokenizer.bin``: pieces (bytes, SentencePiece '▁' already a space), scores."""

    pieces: list[bytes]
    scores: list[float]
    bos: int
    eos: int

    @classmethod
    def load(cls, path: Path | str) -> Llama2cVocab:
        data = Path(path).read_bytes()
        n_words, bos, eos, _max_len = struct.unpack_from("<IIII", data, 0)
        offset, pieces, scores = 16, [], []
        for _ in range(n_words):
            score, length = struct.unpack_from("<fI", data, offset)
            offset += 8
            pieces.append(data[offset:offset + length])
            scores.append(score)
            offset += length
        return cls(pieces, scores, bos, eos)

    def encode(self, text: str) -> list[int]:
        """BOS + the BPE ids of ``text`` (dummy-prefix space, byte fallback, best-score merges)."""
        lookup = {p: i for i, p in enumerate(self.pieces)}
        ids = [self.bos]
        if text and b" " in lookup:
            ids.append(lookup[b" "])
        for ch in text:
            raw = ch.encode("utf-8")
            if raw in lookup:
                ids.append(lookup[raw])
            else:
                ids.extend(b + 3 for b in raw)  # <0x00>.. follow <unk>, <s>, </s>
        body = ids[1:]
        while True:
            best, best_i, best_id = -1e10, -1, -1
            for i in range(len(body) - 1):
                merged = lookup.get(self.pieces[body[i]] + self.pieces[body[i + 1]])
                if merged is not None and self.scores[merged] > best:
                    best, best_i, best_id = self.scores[merged], i, merged
            if best_i < 0:
                break
            body[best_i:best_i + 2] = [best_id]
        return ids[:1] + body

    def piece_bytes(self, prev: int, token: int) -> bytes:
        """What the runner prints for ``token`` after ``prev`` (raw bytes for <0xNN> pieces)."""
        piece = self.pieces[token]
        if prev == self.bos and piece.startswith(b" "):
            piece = piece[1:]
        match = _BYTE_PIECE.match(piece)
        return bytes([int(match.group(1), 16)]) if match else piece


def run(request: RunnerRequest) -> RunnerReply:
    """Generate like ``qnn_llama_runner --eval_mode 1 --temperature 0`` with the emulator."""
    if request.eval_mode != 1:
        raise SystemExit(f"emulator backend: only --eval_mode 1 (hybrid), got {request.eval_mode}")
    sdk_root = os.environ.get("QNN_SDK_ROOT")
    if not sdk_root:
        raise SystemExit("emulator backend: QNN_SDK_ROOT is not set")
    import executorch.runtime  # noqa: F401  (before activate: see host_runner's import hazard)

    from pytest_qnn_genai.runtime.host_runner import HybridRunner
    from pytest_qnn_genai.sdk import activate, resolve_sdk

    activate(resolve_sdk(sdk_root, Path(sdk_root)))
    vocab = Llama2cVocab.load(request.tokenizer_path)
    runner = HybridRunner(request.model_path)
    prompt_ids = vocab.encode(request.prompts[-1])
    # prefill makes the first token; then one decode step per position below seq_len
    seq_len = min(request.seq_len, runner.context_len)
    result = runner.generate(prompt_ids, max(1, seq_len - len(prompt_ids) + 1))
    text, prev = b"", prompt_ids[-1]
    for token in result.tokens:
        if token in runner.eos_ids:
            break
        text += vocab.piece_bytes(prev, token)
        prev = token
    print(f"I runner: {len(result.tokens)} tokens {result.tokens}", file=sys.stderr)
    return RunnerReply(text=text.decode("utf-8", errors="replace"),
                       prompt_tokens=len(prompt_ids), generated_tokens=len(result.tokens) - 1,
                       prefill_s=result.extra["prefill_s"], decode_s=result.extra["decode_s"],
                       model_load_s=runner.load_s)


def write_emulator_launcher(path: Path, sdk_root: Path | str, python: str = sys.executable) -> Path:
    """An executable ``qnn_llama_runner`` stand-in backed by this module and ``sdk_root``."""
    path.write_text("#!/bin/sh\n"
                    f"export {BACKEND_ENV}='{BACKEND}'\n"
                    f"export QNN_SDK_ROOT='{sdk_root}'\n"
                    f"export PYTHONPATH='{REPO_ROOT}'${{PYTHONPATH:+:$PYTHONPATH}}\n"
                    f"exec '{python}' -m tests.support.fake_runner \"$@\"\n")
    path.chmod(0o755)
    return path
