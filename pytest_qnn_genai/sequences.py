"""Where two sequences part: one rule for every message that says "first differs at".

Contract: :func:`first_difference` is the first index at which two sequences (token ids, texts,
JSON lists) hold different items, or the shorter one's length where one is a prefix of the other
(for equal sequences, their length). Items are compared with ``==``.

Hazard: it says *where*, never *whether*: a sequence that is a prefix of another gives the
prefix's length, an index both may share, so a verdict compares the whole sequences and asks
this only to describe a difference it already found.
"""
from __future__ import annotations

from collections.abc import Sequence


def first_difference(a: Sequence[object], b: Sequence[object]) -> int:
    """The first index where ``a`` and ``b`` differ, else ``min(len(a), len(b))``."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
