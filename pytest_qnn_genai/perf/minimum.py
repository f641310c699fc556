"""MLPerf-style minimum measured work: a rate counts only if it rests on enough tokens and time.

A 1600 tok/s decode over 48 tokens lasts 30 ms: one scheduler hiccup moves it by tens of percent.
So a perf figure is gated only when its measurement covers at least ``min_tokens`` tokens and
``min_seconds`` of measured time, pooled over the runs that produced it (tokens and seconds are
summed, the rate is their quotient).

Work per figure, in upstream's units (``PerfStats.generated_tokens`` counts the prefill token too):
prefill is prompt tokens over prompt time; decode is decode steps (generated - 1) over decode
time; inference speed (runner.cpp ``print_performance_report``) is decode steps over prompt +
decode time. Counting the prefill token as decode work would overstate both by one step.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_qnn_genai.figures import Figure, problem
from pytest_qnn_genai.runtime.result import PerfStats

GATED = ("prefill_tok_s", "decode_tok_s")  # the rate figures the A/B gate judges
MEASURABLE = GATED + ("inference_speed_tok_s",)


@dataclass(frozen=True)
class Work:
    """Tokens processed and seconds measured behind one rate figure."""

    tokens: int
    seconds: float

    @property
    def rate(self) -> float:
        """Pooled tokens per second (0 when nothing was measured)."""
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def _seconds(n: int, rate: float) -> float:
    return n / rate if rate > 0 and n > 0 else 0.0


def round_work(s: PerfStats, figure: str) -> Work:
    """The tokens and seconds behind one round's ``figure`` (see the module docstring)."""
    steps = max(s.generated_tokens - 1, 0)
    if figure == "prefill_tok_s":
        return Work(s.prompt_tokens, _seconds(s.prompt_tokens, s.prefill_tok_s))
    if figure == "decode_tok_s":
        return Work(steps, _seconds(steps, s.decode_tok_s))
    if figure == "inference_speed_tok_s":
        return Work(steps, _seconds(s.prompt_tokens, s.prefill_tok_s)
                    + _seconds(steps, s.decode_tok_s))
    raise ValueError(f"round_work: figure must be one of {', '.join(MEASURABLE)}, "
                     f"got {figure!r}")


def measured_work(stats: Iterable[PerfStats], figure: str) -> Work:
    """Pool the work behind ``figure`` over rounds (tokens and seconds summed)."""
    if figure not in MEASURABLE:
        raise ValueError(f"measured_work: figure must be one of {', '.join(MEASURABLE)}, "
                         f"got {figure!r}")
    tokens, seconds = 0, 0.0
    for s in stats:
        w = round_work(s, figure)
        if w.seconds > 0:
            tokens += w.tokens
            seconds += w.seconds
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


MINIMUM_JUDGE = "minimum work (--qnn-perf-min-tokens, --qnn-perf-min-seconds)"


def shortfall_figures(shortfall: Iterable[str]) -> list[Figure]:
    """The run report's rows for :func:`check_minimum`'s messages: each a failed check."""
    return [problem("minimum_work", why, MINIMUM_JUDGE) for why in shortfall]
