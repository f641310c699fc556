"""Where two greedy paths of one program may part: only at a near tie, judged by the row's noise.

Contract. Two greedy decodings that should agree (the target's tokens and the QDQ graph's argmax,
teacher-forced on the target's tokens so that every step compares one input; a hybrid-mode and
a kv-mode run of one program) may choose differently at a step only where the reference's
choice and the other one are a *near tie*: the error it takes to swap them is at most
:data:`NEAR_TIE_SIGMAS` standard deviations of the difference of two logits that each carry the
row's own noise, ``σ·√2``, where ``σ`` is the rms of the target's logits minus the QDQ graph's
over that row's vocabulary (what the program measurably departs from its graph by at that very
step). The error is the target's own on the two tokens, ``(target − QDQ)[chosen] −
(target − QDQ)[reference's]``, where both rows exist (:func:`partings`), and never less than the
reference's lead of its token, the least error that swaps them, which is all there is where only
the reference's row exists (a hybrid run dumps no logits: :func:`parting`).

Why. At real size the QDQ graph's top two tokens are closer than the row's noise at several
steps of an answer (SmolLM2-135M: the docs' investigations archive, "Where the greedy paths
part at 135M"), so identity there is luck, not a
property of the program; a flip at a wide lead, or a target whose error sits on the very token
it picked, is not. The toys part nowhere, and the gate holds the
number of partings to the accepted record (0 for them), so run to run the gate stays identity;
this is the outer wall.

Hazard. ``σ`` is the row's own: a target noisy everywhere passes this and fails the SQNR and
row-cosine floors beside it, which is why it never judges alone.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_qnn_genai.sequences import first_difference

NEAR_TIE_SIGMAS = 3.0  # a swap within 3 standard deviations of the row's noise is a near tie


@dataclass(frozen=True)
class Parting:
    """One step where two greedy paths chose differently: the reference's token and the other
    one, the error the swap took (logits) and the row's noise ``sigma`` (rms, logits)."""

    step: int
    reference: int
    chosen: int
    error: float
    sigma: float

    @property
    def sigmas(self) -> float:
        """The error in standard deviations of a two-logit difference (``σ·√2``)."""
        scale = self.sigma * math.sqrt(2.0)
        return self.error / scale if scale > 0 else math.inf

    @property
    def near_tie(self) -> bool:
        return self.sigmas <= NEAR_TIE_SIGMAS

    def describe(self) -> str:
        return (f"step {self.step}: {self.reference} -> {self.chosen}, error {self.error:.3f} = "
                f"{self.sigmas:.2f} σ√2 (σ {self.sigma:.3f}): "
                f"{'near tie' if self.near_tie else 'NOT a near tie'}")


def row_noise(reference: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per row, the rms of ``target - reference`` (``[steps, vocab]`` arrays)."""
    diff = np.asarray(target, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    return np.asarray(np.sqrt(np.mean(diff * diff, axis=1)))


def partings(qdq: np.ndarray, target: np.ndarray, tokens: Sequence[int]) -> list[Parting]:
    """The steps where ``tokens`` (the target's) are not the QDQ graph's argmax, teacher-forced
    on them, each with the target's own error on the two tokens."""
    q, t = np.asarray(qdq, dtype=np.float64), np.asarray(target, dtype=np.float64)
    noise = row_noise(q, t)
    out = []
    for step, (row_q, row_t, chosen) in enumerate(zip(q, t, tokens)):
        ref = int(np.argmax(row_q))
        if ref != int(chosen):
            own = (row_t[chosen] - row_q[chosen]) - (row_t[ref] - row_q[ref])
            lead = row_q[ref] - row_q[chosen]  # the least a swap takes (tokens not the argmax
            error = max(own, lead)  # of the target's own row, a phone's kv dump: no less)
            out.append(Parting(step, ref, int(chosen), float(error), float(noise[step])))
    return out


def parting(reference_row: np.ndarray, chosen: int, sigma: float, step: int) -> Parting:
    """A step where another run chose ``chosen`` over the argmax of ``reference_row`` (its row
    of logits at ``step``): the least error that swaps them is the reference's lead."""
    row = np.asarray(reference_row, dtype=np.float64)
    ref = int(np.argmax(row))
    return Parting(step, ref, int(chosen), float(row[ref] - row[chosen]), float(sigma))


def first_parting(reference: Sequence[int], tokens: Sequence[int], logits: np.ndarray | None,
                  noise: np.ndarray | None) -> Parting | None:
    """Where ``tokens`` (a run's, with its ``logits``) first leave ``reference`` (another run's
    tokens from the same prompt), judged on the run's own row there (every token before it is
    equal, so the row saw the reference run's input): None when they are equal. Without
    ``logits`` or ``noise``, or where one stopped and the other did not, no near tie excuses it."""
    if list(tokens) == list(reference):
        return None
    n = min(len(tokens), len(reference))
    at = first_difference([int(t) for t in tokens], [int(t) for t in reference])
    if logits is None or noise is None or at == n:
        return Parting(at, int(reference[at]) if at < len(reference) else -1,
                       int(tokens[at]) if at < len(tokens) else -1, math.inf, 0.0)
    return parting(logits[at], int(reference[at]), float(noise[at]), at)
