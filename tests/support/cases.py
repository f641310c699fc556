"""The packaged cases ``make test`` judges: the default tier (a nightly-tier case, the 135M real
model, is built and judged by the nightly and by ``make gate MODELS=...``, never by the plugin's
own tests, whose builds would take half an hour on two cores)."""
from __future__ import annotations

from pytest_qnn_genai.models.registry import ModelCase, select


def default_cases() -> dict[str, ModelCase]:
    """The default-tier packaged cases by name (what ``--models`` selects when empty)."""
    return {case.name: case for case in select([])}
