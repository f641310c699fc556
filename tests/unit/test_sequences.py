"""``sequences.first_difference``: where two sequences part, the one rule the messages share."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.sequences import first_difference


@pytest.mark.parametrize(("a", "b", "at"), [
    ([1, 2, 3], [1, 9, 3], 1),
    ([1, 2, 3], [7, 2, 3], 0),
    ("teach you Python", "teach me Python", 6),
    ([1, 2], [1, 2, 3], 2),       # a prefix: the shorter length
    ([1, 2, 3], [1, 2], 2),
    ([], [4], 0),
    ([5, 6], [5, 6], 2),          # equal: their length, which is why no verdict rests on it
])
def test_first_difference(a, b, at):
    assert first_difference(a, b) == at
