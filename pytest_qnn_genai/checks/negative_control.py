"""Negative controls: a graph made worse on purpose must fail the bounds a real run is judged by.

Bounds set from measurement can drift loose (edited by hand, or set from a noisier run) until a
known-bad graph passes them; then they guard nothing, and every real run still passes. A suite
that perturbs a graph on purpose (one calibration prompt instead of the case's) holds the
perturbed figures to the same bounds and fails when they let it through.

Kept apart from :mod:`.qdq_windows`: that module is part of the cached window rows' key, and a
change here is no reason to recompute them.
"""
from __future__ import annotations

from pytest_qnn_genai.checks.qdq_windows import Metrics, pair_checks


def perturbation_problems(normal: Metrics, perturbed: Metrics, bounds: dict[str, float],
                          source: str, what: str) -> list[str]:
    """``perturbed`` (``what``: e.g. "genai (one-prompt calibration)") beside ``normal`` under
    ``bounds`` (``source`` names their file): it must move away from fp32 (its mean KL above the
    unperturbed graph's) and fail at least one bound. What keeps it from doing so, one line each;
    empty when it is caught."""
    problems = []
    if not perturbed.mean_kl > normal.mean_kl:
        problems.append(f"{what}: mean KL vs fp32 {perturbed.mean_kl:.6f}, not above the "
                        f"unperturbed graph's {normal.mean_kl:.6f}: the perturbation changed "
                        "nothing")
    checks = pair_checks(f"{what} vs unperturbed", normal, perturbed, bounds, source)
    if all(c.ok for c in checks):
        problems.append(f"{what} passed the gate ({source}): " + "; ".join(
            f"{c.check} {c.new} ({c.judge or 'info'})" for c in checks))
    return problems
