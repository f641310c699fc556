"""The staged flow (prepare → quantize → compile) as a :class:`~pytest_qnn_genai.flows.base.Flow`."""
from __future__ import annotations

from typing import Any

from pytest_qnn_genai.flows.base import QDQ, TEXT_DECODER, FlowArtifacts, build_seconds


class NewFlow:
    """``Pipeline.qdq`` + ``Pipeline.pte``: the pipeline this project gates."""

    name = "new"

    def build(self, pipeline: Any, case: Any, target: Any) -> FlowArtifacts:
        from pytest_qnn_genai.stages.prepare import CALIBRATION

        qdq_entry = pipeline.qdq_entry(case, target)
        pte_entry = pipeline.pte_entry(case, target)
        qdq = pipeline.qdq(case, target)
        pte = pipeline.pte(case, target)
        return FlowArtifacts(
            self.name, {TEXT_DECODER: pte.pte, QDQ: qdq.path(CALIBRATION)},
            {"quantize": build_seconds(qdq_entry), "compile": build_seconds(pte_entry)},
            {"graphs": sorted(qdq.data["graphs"]), "metadata": sorted(qdq.metadata),
             "compile_spec": pte.compile_spec})
