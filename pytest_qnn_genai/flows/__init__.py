"""End-to-end build flows (each one a way of turning a model case into a .pte).

``FLOWS`` maps a flow name (``legacy``, ``new``, ``genai``) to an object with
``build(pipeline, case, target) -> FlowArtifacts``; see :mod:`pytest_qnn_genai.flows.base`.
"""
from __future__ import annotations

from typing import Any

from pytest_qnn_genai.flows.base import ARTIFACT_KEYS, QDQ, TEXT_DECODER, Flow, FlowArtifacts

FLOW_NAMES = ("legacy", "new", "genai")


def get_flow(name: str) -> Any:
    """The flow called ``name`` (imports lazily: the legacy module pulls in no executorch)."""
    if name == "legacy":
        from pytest_qnn_genai.flows.legacy_flow import LegacyFlow

        return LegacyFlow()
    if name == "new":
        from pytest_qnn_genai.flows.new import NewFlow

        return NewFlow()
    if name == "genai":
        from pytest_qnn_genai.flows.genai import GenAIFlow

        return GenAIFlow()
    raise KeyError(f"unknown flow {name!r}; flows: {', '.join(FLOW_NAMES)}")


__all__ = ["ARTIFACT_KEYS", "FLOW_NAMES", "QDQ", "TEXT_DECODER", "Flow", "FlowArtifacts",
           "get_flow"]
