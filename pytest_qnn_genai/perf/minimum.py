"""MLPerf-style minimum measured work: a rate counts only if it rests on enough tokens and time.

A 1600 tok/s decode over 48 tokens lasts 30 ms: one scheduler hiccup moves it by tens of percent.
So a perf figure is gated only when its measurement covers at least ``min_tokens`` tokens and
``min_seconds`` of measured time, pooled over the runs that produced it (tokens and seconds are
summed, the rate is their quotient).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_qnn_genai.runtime.result import PerfStats

GATED = ("prefill_tok_s", "decode_tok_s")  # the rate figures gates judge
_TOKENS_OF = {"prefill_tok_s": "prompt_tokens", "decode_tok_s": "generated_tokens"}


@dataclass(frozen=True)
class Work:
    """Tokens processed and seconds measured behind one rate figure."""

    tokens: int
    seconds: float

    @property
    def rate(self) -> float:
        """Pooled tokens per second (0 when nothing was measured)."""
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def measured_work(stats: Iterable[PerfStats], figure: str) -> Work:
    """Pool the work behind ``prefill_tok_s`` (prompt tokens) or ``decode_tok_s`` (generated)."""
    if figure not in _TOKENS_OF:
        raise ValueError(f"measured_work: figure must be one of {', '.join(_TOKENS_OF)}, "
                         f"got {figure!r}")
    tokens, seconds = 0, 0.0
    for s in stats:
        n, rate = getattr(s, _TOKENS_OF[figure]), getattr(s, figure)
        if rate > 0:
            tokens += n
            seconds += n / rate
    return Work(tokens, seconds)


def check_minimum(work: Work, *, min_tokens: int, min_seconds: float,
                  figure: str = "figure") -> str | None:
    """Why ``work`` is too little to gate ``figure`` on, or None when it is enough."""
    short = []
    if work.tokens < min_tokens:
        short.append(f"{work.tokens} tokens < {min_tokens}")
    if work.seconds < min_seconds:
        short.append(f"{work.seconds:.3f} s measured < {min_seconds:g} s")
    if not short:
        return None
    return f"{figure} rests on too little work ({'; '.join(short)}): not gated"
