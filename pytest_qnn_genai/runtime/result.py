"""Typed results shared by every execution path (x86 emulator host runner, phone over adb)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from pytest_qnn_genai.untyped import Json


@dataclass(frozen=True)
class PerfStats:
    """Performance figures in the vocabulary of ExecuTorch's ``PyTorchObserver`` stats."""

    prompt_tokens: int
    generated_tokens: int
    model_load_s: float
    prefill_tok_s: float
    decode_tok_s: float
    ttft_s: float

    def to_dict(self) -> dict[str, Json]:
        """Plain-JSON form."""
        return asdict(self)


@dataclass
class RunResult:
    """One greedy generation: tokens, text, per-step dequantized logits and perf figures.

    ``logits`` has one row per generated token (the distribution that produced it), float32,
    shape ``[len(tokens), vocab]``; it is ``None`` when the path could not provide logits.
    ``prompt_logits``, when the path gives them (a phone's kv-mode dump), are the rows of the
    prompt positions before the last, ``[len(prompt_tokens) - 1, vocab]``: row i predicted
    ``prompt_tokens[i + 1]`` (teacher forcing, for perplexity).
    """

    prompt_tokens: list[int]
    tokens: list[int]
    text: str
    perf: PerfStats
    logits: np.ndarray | None = None
    device: str = "x86-emulator"
    extra: dict[str, Json] = field(default_factory=dict)
    prompt_logits: np.ndarray | None = None
