"""Lockstep A/B rounds on the x86 emulator: two programs' generations advanced call by call.

A round of :class:`Lockstep` runs the workload on A and on B at once, alternating single calls:

- prefill: ``workload.prefill_passes`` passes of the prompt on each side, A's pass next to B's
  (each pass timed whole: all its prefill chunks, so builds with different prefill AR lengths
  compare on the same prompt tokens); the first pass is the start of the round's generation;
- decode: the two generations (``max_new_tokens``, EOS ignored) advanced one decode step each,
  A's step next to B's.

Every call is timed with its runner work (inputs, KV-cache writes, argmax), the order inside a
pair alternates (A B, B A, ...), and the round's B/A rate ratio for a figure is the median of its
paired time ratios ``a_s / b_s`` (the same tokens on both sides). A paired sample spans
milliseconds, so a machine that slows down for a second slows both sides of the samples it
touches alike, and the median shrugs off the few pairs a preemption splits.

Measured (stories260k, the same program on both sides, 8 rounds, while a quantize build kept the
other core busy): lockstep round ratios 0.998..1.003 (decode) and 0.979..1.017 (prefill);
whole generations interleaved on the same machine at the same time, 0.78..1.08 and 0.76..1.05.

Each side's :class:`~pytest_qnn_genai.runtime.result.PerfStats` for the round (what the records
and the minimum work use) come from the same call times: prefill tok/s = passes x prompt tokens
over the passes' time, decode tok/s = decode steps over their time, ttft = the first pass.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.perf.benchmark import Workload, fit_workload
from pytest_qnn_genai.perf.gate import PairedRound
from pytest_qnn_genai.runtime.result import PerfStats

if TYPE_CHECKING:
    from pytest_qnn_genai.runtime.host_runner import Generation, HybridRunner


def _step(gen: Generation) -> float:
    """One call of ``gen`` (a prefill chunk or a decode step); the seconds it took."""
    start = time.perf_counter()
    gen.step()
    return time.perf_counter() - start


def _prefill(gen: Generation) -> float:
    """Advance ``gen`` through its prompt pass (all prefill chunks); the seconds it took."""
    seconds = 0.0
    while not gen.tokens:
        seconds += _step(gen)
    return seconds


def _pair(run: Callable[[Generation], float], ga: Generation, gb: Generation,
          b_first: bool) -> tuple[float, float]:
    """``run`` on A's and on B's generation, B's first when ``b_first``: seconds as (a, b)."""
    if b_first:
        b = run(gb)
        return run(ga), b
    a = run(ga)
    return a, run(gb)


class Lockstep:
    """A :class:`~pytest_qnn_genai.perf.gate.Pairing` of two hybrid programs on the emulator."""

    def __init__(self, a: str, a_pte: Path | str, b: str, b_pte: Path | str,
                 tokenizer_model: Path | str, workload: Workload,
                 runner_class: type[HybridRunner] | None = None,
                 b_runner_class: type[HybridRunner] | None = None) -> None:
        from pytest_qnn_genai.runtime.host_runner import HybridRunner  # loads executorch.runtime

        self.a, self.b = a, b
        self._runners = ((runner_class or HybridRunner)(a_pte),
                         (b_runner_class or runner_class or HybridRunner)(b_pte))
        self.ids, self.n = fit_workload(workload, tokenizer_model, self._runners)
        if self.n < 2:
            raise ValueError(f"lockstep: the programs leave no room for a decode step after a "
                             f"{len(self.ids)}-token prompt")
        self.passes = max(1, workload.prefill_passes)

    def __call__(self, b_first: bool) -> PairedRound:
        ra, rb = self._runners
        ga = ra.start(self.ids, self.n, stop_at_eos=False)
        gb = rb.start(self.ids, self.n, stop_at_eos=False)
        prefill = [_pair(_prefill, ga, gb, b_first)]
        decode: list[tuple[float, float]] = []
        flip = b_first
        while not (ga.done or gb.done):
            flip = not flip
            decode.append(_pair(_step, ga, gb, flip))
        if len(ga.tokens) != len(gb.tokens):
            raise RuntimeError(f"lockstep: {self.a} made {len(ga.tokens)} tokens, {self.b} "
                               f"{len(gb.tokens)} (both should make {self.n})")
        for i in range(1, self.passes):
            prefill.append(_pair(_prefill, ra.start(self.ids, 1), rb.start(self.ids, 1),
                                 b_first != bool(i % 2)))
        return PairedRound(
            self._stats(ra, [a for a, _ in prefill], [a for a, _ in decode]),
            self._stats(rb, [b for _, b in prefill], [b for _, b in decode]),
            {"prefill_tok_s": statistics.median(a / b for a, b in prefill),
             "decode_tok_s": statistics.median(a / b for a, b in decode)})

    def _stats(self, runner: HybridRunner, passes: list[float], steps: list[float]) -> PerfStats:
        tokens = len(self.ids) * len(passes)
        return PerfStats(prompt_tokens=tokens, generated_tokens=len(steps) + 1,
                         model_load_s=runner.load_s, prefill_tok_s=tokens / sum(passes),
                         decode_tok_s=len(steps) / sum(steps), ttft_s=passes[0])
