"""The third flow, executorch's genai_pipeline, held to the same parity checks.

Until upstream implements genai_pipeline compilation the build raises ``GenAIUnavailable`` (only
for upstream's own "DefaultCompilerAdapter has no body yet") and these tests xfail strictly on
exactly that exception: any other error fails them, and the day the compiler lands they XPASS,
which fails the run until the mark is removed and the parity checks run for real.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai.checks import parity
from pytest_qnn_genai.flows.genai import GenAIUnavailable, unavailable_reason
from pytest_qnn_genai.pipeline.products import needs

if TYPE_CHECKING:
    from pytest_qnn_genai.flows.base import FlowArtifacts

# strict: the day upstream implements compilation these tests pass, and XPASS fails the run until
# this mark is removed; raises: any failure but upstream's exact "no body yet" fails them.
pytestmark = [pytest.mark.parity, pytest.mark.flow("genai", "new"),
              pytest.mark.xfail(raises=GenAIUnavailable, reason=unavailable_reason(), strict=True)]


@pytest.fixture(scope="session")
@needs("genai")
def genai_artifacts(qnn_pipeline, qnn_sdk, qnn_case, qnn_target) -> FlowArtifacts:
    return qnn_pipeline.artifacts("genai", qnn_case, qnn_target)


def test_genai_builds_the_same_program(genai_artifacts, new_signature) -> None:
    checks = parity.compare_signatures(parity.program_signature(genai_artifacts.pte),
                                       new_signature)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_genai_pte_size(genai_artifacts, new_artifacts) -> None:
    checks = parity.compare_pte(genai_artifacts.pte, new_artifacts.pte)
    assert all(c.ok for c in checks), parity.failures(checks)
