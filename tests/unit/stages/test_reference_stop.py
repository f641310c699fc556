"""The fp32 reference's greedy continuation stops where the runners stop (stages/reference.py)."""
from __future__ import annotations

import numpy as np

from pytest_qnn_genai.stages.reference import greedy

EOS, VOCAB = 3, 8


def _model(script: list[int]):
    """A fake logits function whose argmax after k generated tokens is ``script[k]``."""
    def logits_of(seq: list[int]) -> np.ndarray:
        rows = np.zeros((len(seq), VOCAB), dtype=np.float32)
        rows[-1, script[len(seq) - 2]] = 1.0  # prompt of 2 tokens
        return rows
    return logits_of


def test_an_eos_from_prefill_is_no_stop() -> None:
    """The first token is prefill's: an EOS there is generated through, as upstream's runner and
    the host runner do (the fault: stopping there left SmolLM2-135M one row to judge)."""
    ref = greedy(_model([EOS, 5, 6, 7]), [1, 2], 4, EOS)
    assert ref.tokens == [EOS, 5, 6, 7]
    assert ref.logits.shape == (4, VOCAB)


def test_an_eos_from_a_decode_step_stops_after_it() -> None:
    ref = greedy(_model([5, EOS, 6, 7]), [1, 2], 4, EOS)
    assert ref.tokens == [5, EOS]
    assert ref.logits.shape == (2, VOCAB)


def test_no_eos_runs_n_tokens() -> None:
    assert greedy(_model([5, EOS, 6, 7]), [1, 2], 4, None).tokens == [5, EOS, 6, 7]
