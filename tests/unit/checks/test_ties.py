"""checks/ties.py: a parting is a near tie only within NEAR_TIE_SIGMAS of its row's noise."""
from __future__ import annotations

import math

import numpy as np

from pytest_qnn_genai.checks import ties


def test_a_swap_at_a_wide_lead_is_not_a_near_tie() -> None:
    row = np.array([5.0, 4.9, 1.0, 0.0])
    near = ties.parting(row, 1, sigma=0.1, step=3)  # lead 0.1 = 0.71 σ√2
    assert (near.reference, near.chosen, near.step) == (0, 1, 3) and near.near_tie
    assert math.isclose(near.sigmas, 0.1 / (0.1 * math.sqrt(2)))
    wide = ties.parting(row, 2, sigma=0.1, step=3)  # lead 4.0 = 28 σ√2
    assert not wide.near_tie and "NOT a near tie" in wide.describe()
    assert not ties.parting(row, 1, sigma=0.0, step=0).near_tie  # no noise: no tie to excuse


def test_partings_take_the_targets_own_error_never_less_than_the_lead() -> None:
    qdq = np.array([[3.0, 2.9, 0.0, 0.0], [0.0, 5.0, 1.0, 0.0]])
    target = qdq + np.array([[0.0, 0.2, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    (one,) = ties.partings(qdq, target, [1, 1])
    assert one.step == 0 and math.isclose(one.error, 0.2)  # its own error on the pair
    assert math.isclose(one.sigma, float(np.sqrt(0.04 / 4)))
    (lied,) = ties.partings(qdq, qdq, [0, 2])  # tokens that are not the target's argmax
    assert lied.step == 1 and math.isclose(lied.error, 4.0)  # the lead, at least
    assert ties.partings(qdq, target, [0, 1]) == []


def test_first_parting_is_judged_on_the_runs_own_row() -> None:
    """A run leaving a reference path (the golden continuation) at step 1: its row there, where
    both runs saw the same tokens, puts the reference's token 0.05 behind its own."""
    logits = np.array([[0.0, 0.0, 9.0], [0.0, 3.0, 2.95], [1.0, 0.0, 0.0]])
    noise = np.full(3, 0.1)
    assert ties.first_parting([2, 1, 0], [2, 1, 0], logits, noise) is None
    near = ties.first_parting([2, 2, 0], [2, 1, 0], logits, noise)
    assert (near.step, near.reference, near.chosen) == (1, 1, 2) and near.near_tie
    assert not ties.first_parting([2, 0, 0], [2, 1, 0], logits, noise).near_tie  # 3.0 behind
    assert not ties.first_parting([2, 2, 0], [2, 1, 0], logits, None).near_tie  # no noise
    stopped = ties.first_parting([2, 1], [2, 1, 0], logits, noise)
    assert stopped.step == 2 and not stopped.near_tie  # one stopped, the other went on
