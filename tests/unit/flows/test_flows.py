"""The flow family: every registered flow holds to the protocol, a flow is one module, an
unknown flow builds nothing (the genai adapter against executorch's real GenAIPipeline is
tests/integration/flows/test_genai_flow.py)."""
from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

import pytest_qnn_genai
from pytest_qnn_genai import flows as flows_package
from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.cache.code import clear_cache
from pytest_qnn_genai.flows import registry
from pytest_qnn_genai.flows.base import Flow
from pytest_qnn_genai.hybrid import ARTIFACT_KEYS
from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.pipeline import Pipeline
from pytest_qnn_genai.targets import Target, soc

TARGET = Target(soc("SM8650"))

ONE_MODULE_FLOW = '''
"""A flow written by a contributor: one module, nothing registered anywhere else."""
from pathlib import Path

from pytest_qnn_genai.flows.base import BuildRequest, Flow, FlowOutput
from pytest_qnn_genai.hybrid import QDQ, TEXT_DECODER


class CopyFlow(Flow):
    name = "copyflow"
    stage = "copyflow-build"

    def key(self, case, target):
        return {"case": case.build_fingerprint(), "soc": target.soc.name}

    def build(self, request: BuildRequest, out: Path) -> None:
        (out / "model.pte").write_bytes(request.case.name.encode())
        (out / "qdq.pt2").write_bytes(b"graph")

    def load(self, folder: Path, qdq) -> FlowOutput:
        return FlowOutput({TEXT_DECODER: folder / "model.pte", QDQ: folder / "qdq.pt2"},
                          {"built by": "copyflow"})


FLOW = CopyFlow()
'''


@pytest.fixture
def fresh_registry():
    registry.flows.cache_clear()
    yield registry
    registry.flows.cache_clear()


def test_the_registered_flows_hold_to_the_protocol(fresh_registry) -> None:
    found = registry.flows()
    assert set(found) == {"legacy", "new"}  # genai_pipeline is a product (pipeline/genai.py)
    for name, flow in found.items():
        assert isinstance(flow, Flow) and flow.name == name
        assert flow.stage and isinstance(flow.from_qdq, bool)
        key = flow.key(available()["stories260k"], TARGET)
        assert key and all(isinstance(k, str) for k in key)
        for module in flow.code:  # every module named in its key exists
            __import__(module)


def test_an_unknown_flow_is_one_line_and_builds_nothing(tmp_path: Path, fresh_registry) -> None:
    pipeline = Pipeline(ArtifactCache(tmp_path, {}))
    with pytest.raises(registry.UnknownFlowError) as info:
        pipeline.artifacts("x", available()["stories260k"], TARGET)
    assert str(info.value) == "unknown flow 'x'; flows: legacy, new"
    assert not any(tmp_path.iterdir()), "an unknown flow must build nothing"


def test_adding_a_flow_is_adding_one_module(tmp_path: Path, fresh_registry,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A module with a FLOW in the flows package is found, built through the cache under its own
    stage, keyed by its own code, and handed back in the same shape as every flow's."""
    package = tmp_path / "pkg" / "pytest_qnn_genai"  # a checkout with the contributor's module
    shutil.copytree(Path(pytest_qnn_genai.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.pth", "*.bin",
                                                  "*.model", "*.safetensors"))
    (package / "flows" / "copyflow.py").write_text(textwrap.dedent(ONE_MODULE_FLOW))
    monkeypatch.setattr(flows_package, "__path__",
                        [*flows_package.__path__, str(package / "flows")])
    monkeypatch.delitem(sys.modules, "pytest_qnn_genai.flows.copyflow", raising=False)
    assert "copyflow" in registry.flows()
    clear_cache()
    pipeline = Pipeline(ArtifactCache(tmp_path / "cache", {}, progress=lambda _m: None),
                        package_root=package)
    case = available()["stories260k"]
    art = pipeline.artifacts("copyflow", case, TARGET)
    assert set(art.files) == set(ARTIFACT_KEYS) and art.pte.read_bytes() == b"stories260k"
    assert art.info == {"built by": "copyflow"} and set(art.build_s) == {"copyflow-build"}
    again = pipeline.artifacts("copyflow", case, TARGET)
    assert again.pte == art.pte and pipeline.cache.stats.builds == 1
    clear_cache()
