"""The ``new`` flow: this project's staged pipeline (:mod:`pytest_qnn_genai.stages`) lowering the
quantize stage's graphs into a hybrid .pte with the target's compile specs."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.flows.base import BuildRequest, Flow, FlowOutput
from pytest_qnn_genai.hybrid import CALIBRATION, QDQ, TEXT_DECODER

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.stages.quantize import QdqArtifacts
    from pytest_qnn_genai.targets import Target


class StagedFlow(Flow):
    name = "new"
    stage = "compile"
    from_qdq = True
    code = ("pytest_qnn_genai.stages.compile",)

    def key(self, case: ModelCase, target: Target) -> dict[str, object]:
        from pytest_qnn_genai.stages.compile import compile_spec_data

        return {"soc": target.soc.name, "backend": target.backend,
                "spec": compile_spec_data(target, case.lowered_graphs)}

    def build(self, request: BuildRequest, out: Path) -> None:
        """Lowered in a process of its own (:mod:`pytest_qnn_genai.stages.compile_alone`): in a
        process that lowered before, the same graphs give other bytes."""
        from pytest_qnn_genai.stages.compile_alone import compile_alone

        compile_alone(request.require_qdq(self.name), request.target, out)

    def load(self, folder: Path, qdq: QdqArtifacts | None) -> FlowOutput:
        from pytest_qnn_genai.stages.compile import PteArtifacts

        pte = PteArtifacts.load(folder)
        if qdq is None:
            raise ValueError("the staged flow's artifacts need its QDQ graphs")
        return FlowOutput({TEXT_DECODER: pte.pte, QDQ: qdq.path(CALIBRATION)},
                          {"graphs": sorted(qdq.data["graphs"]), "metadata": sorted(qdq.metadata),
                           "compile_spec": pte.compile_spec})


FLOW = StagedFlow()
