"""The flow registry: the three flows by name, and an unknown flow builds nothing (the genai
adapter against executorch's real GenAIPipeline is tests/integration/flows/test_genai_flow.py)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.flows.base import FLOW_NAMES
from pytest_qnn_genai.pipeline import Pipeline
from pytest_qnn_genai.targets import Target, soc

CASE = SimpleNamespace(decoder_model="stories260k", eval_prompt="Once upon a time")


def test_flows_are_registered(tmp_path) -> None:
    assert FLOW_NAMES == ("legacy", "new", "genai")
    pipeline = Pipeline(ArtifactCache(tmp_path, {}))
    with pytest.raises(KeyError, match="unknown flow 'x'; flows: legacy, new, genai"):
        pipeline.artifacts("x", CASE, Target(soc("SM8650")))
    assert not any(tmp_path.iterdir()), "an unknown flow must build nothing"
