"""How values read in the gate's tables and messages (the terminal's parity table, summary.md, the
run-to-run diff): one rule for numbers, missing values and long lists."""
from __future__ import annotations

import math


def number(value: float | int | None, digits: int = 4) -> str:
    """``digits`` significant digits; ``—`` for a missing value, ``∞``/``-∞`` for infinities."""
    if value is None:
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def value(v: object, digits: int = 4) -> str:
    """Any table value: numbers by :func:`number`, lists longer than six as ``[n items]``."""
    if v is None or isinstance(v, float):
        return number(v, digits)
    if isinstance(v, (list, tuple)) and len(v) > 6:
        return f"[{len(v)} items]"
    return str(v)


def cell(v: object, digits: int = 4) -> str:
    """:func:`value` made safe for a markdown table cell."""
    return value(v, digits).replace("|", "\\|").replace("\n", " ")
