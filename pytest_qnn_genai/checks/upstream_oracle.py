"""The harness's figures held to upstream's own evaluator: llama.py's ``sqnr_eval`` on the same
program, an oracle the harness did not write.

Contract: :func:`held_to_upstream` compares one SQNR the harness computed with the one llama.py
logged for the same rows (the prompt's, the same ids) at the digits the report prints
(:data:`DIGITS`): a disagreement fails naming both. The hazard it guards: a harness that slices
rows, takes another reference graph or computes SQNR otherwise would put a figure beside
upstream's floor while measuring something else, and no floor of its own would notice.
"""
from __future__ import annotations

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks.parity import Check

DIGITS = 2  # the report prints SQNR in dB to two decimals


def held_to_upstream(name: str, what: str, harness: float, upstream: float) -> Check:
    """The harness's ``harness`` dB held to llama.py's ``upstream`` dB for the same rows."""
    ok = abs(harness - upstream) < 0.5 * 10 ** -DIGITS
    return Check(what, round(upstream, 4), round(harness, 4), f"{harness - upstream:+.4f}", ok,
                 "" if ok else f"the harness measures {harness:.4f} dB where llama.py's "
                 f"sqnr_eval measures {upstream:.4f} dB on the same program and prompt",
                 judge=f"= llama.py sqnr_eval ({DIGITS} decimals)", name=name, rule=figures.EQUAL)
