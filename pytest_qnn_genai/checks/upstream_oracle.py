"""The harness's figures held to upstream's own evaluator: llama.py's ``sqnr_eval`` on the same
program, an oracle the harness did not write.

Contract: :func:`held_to_upstream` compares one SQNR the harness computed with the one llama.py
logged for the same rows (the prompt's, the same ids) to :data:`DIGITS` decimals: a
disagreement fails naming both. The hazard it guards: a harness that slices rows, takes another
reference graph or computes SQNR otherwise would put a figure beside upstream's floor while
measuring something else (such faults move it by whole dB), and no floor of its own would
notice. Why one decimal, not the report's two: at 135M the fp32 logits of llama.py's process
and of the harness's differ at the third decimal of the SQNR with how each process set up its
threads (the docs' measurements page, "Upstream's CI job at 135M"), while the toys agree to the
fourth.
"""
from __future__ import annotations

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks.parity import Check

DIGITS = 1  # where two processes' fp32 logits agree at 135M (module docstring)


def held_to_upstream(name: str, what: str, *, harness: float, upstream: float) -> Check:
    """The harness's ``harness`` dB held to llama.py's ``upstream`` dB for the same rows."""
    ok = abs(harness - upstream) < 0.5 * 10 ** -DIGITS
    return Check(what, round(upstream, 4), round(harness, 4), f"{harness - upstream:+.4f}", ok,
                 "" if ok else f"the harness measures {harness:.4f} dB where llama.py's "
                 f"sqnr_eval measures {upstream:.4f} dB on the same program and prompt",
                 judge=f"= llama.py sqnr_eval ({DIGITS} decimals)", name=name, rule=figures.EQUAL)


def upstream_ci_checks(spec_pte_bytes: float | None, spec_sqnr_db: float | None, source: str,
                       pte_bytes: int, upstream_sqnr_db: float, harness_sqnr_db: float,
                       ) -> list[Check]:
    """Upstream's CI job's assertions as verdicts (its ``LlmSpecs`` at ``source``: ``.pte`` bytes
    at most ``pte_size``, llama.py's FP32-vs-QNN SQNR at least ``sqnr``; a bound upstream does
    not set is a failure to find one, not a pass), and the harness's own SQNR held to llama.py's
    on the same rows."""
    rows = []
    for name, what, value, bound, at_least, field in (
            ("upstream_ci_pte_bytes", ".pte bytes (upstream's CI job)", pte_bytes,
             spec_pte_bytes, False, "pte_size"),
            ("upstream_ci_sqnr_db", "SQNR dB FP32 vs QNN, llama.py sqnr_eval (upstream's CI job)",
             round(upstream_sqnr_db, 4), spec_sqnr_db, True, "sqnr")):
        ok = bound is not None and (value >= bound if at_least else value <= bound)
        sign = "≥" if at_least else "≤"
        rows.append(Check(
            what, bound, value, "" if bound is None else f"{value - bound:+,.4g}", ok,
            "" if ok else (f"upstream's LlmSpecs ({source}) sets no {field}" if bound is None
                           else f"{value:,} is not {sign} {bound:,}"),
            judge=f"{sign} {'?' if bound is None else f'{bound:,}'} (LlmSpecs.{field}, {source})",
            name=name,
            bound=None if bound is None else float(bound),
            rule=figures.AT_LEAST if at_least else figures.AT_MOST,
            better="higher" if at_least else "lower"))
    rows.append(held_to_upstream("upstream_ci_harness_sqnr_db",
                                 "the harness's SQNR on llama.py's rows (upstream's CI job)",
                                 harness=harness_sqnr_db, upstream=upstream_sqnr_db))
    return rows
