"""The genai_pipeline adapter: it drives executorch's real GenAIPipeline and turns exactly the
not-implemented compilation into GenAIUnavailable; everything else propagates. (Importing
executorch's genai_pipeline costs seconds, so these live outside the fast tier.)"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from pytest_qnn_genai.flows.genai import (
    GenAIUnavailable,
    _not_implemented,
    drive_compilation,
    unavailable_reason,
)
from pytest_qnn_genai.targets import Target, soc


class _TinyQdq:
    """Stands in for QdqArtifacts: genai's compilation stage only needs a module and inputs."""

    def graph(self, name: str) -> torch.nn.Module:
        return torch.nn.Linear(4, 4)

    def example_inputs(self, name: str) -> tuple:
        return (torch.zeros(1, 4),)


CASE = SimpleNamespace(decoder_model="stories260k", eval_prompt="Once upon a time")


def test_executorch_genai_compilation_is_reported_unavailable(tmp_path) -> None:
    from executorch.backends.qualcomm.genai_pipeline.strategies.compilation import (
        default_compiler_adapter,
    )

    try:  # the day upstream lands a body this test is meaningless: say so instead of failing
        default_compiler_adapter.DefaultCompilerAdapter().compile_model(
            None, (), None, tmp_path, "x", None, None)
    except NotImplementedError:
        pass
    except Exception:  # noqa: BLE001 - a real body failing on dummy arguments
        pytest.skip("executorch's DefaultCompilerAdapter has a body now")
    with pytest.raises(GenAIUnavailable, match="genai_pipeline compilation not implemented"):
        drive_compilation(_TinyQdq(), CASE, Target(soc("SM8650")), tmp_path)
    assert unavailable_reason().startswith("executorch ")


def test_only_not_implemented_compilation_counts() -> None:
    from executorch.backends.qualcomm.genai_pipeline import StageError

    upstream = NotImplementedError("DefaultCompilerAdapter has no body yet: lowering is ...")
    assert _not_implemented(StageError("compilation", "x", upstream)) is upstream
    assert _not_implemented(StageError("compilation", "x", NotImplementedError("other gap"))) is None
    assert _not_implemented(StageError("compilation", "x", ValueError("bad graph"))) is None
    assert _not_implemented(StageError("quantization", "x", NotImplementedError("q"))) is None
    assert _not_implemented(NotImplementedError("not from the stage")) is None


def test_other_compilation_failures_propagate(tmp_path, monkeypatch) -> None:
    from executorch.backends.qualcomm.genai_pipeline import StageError
    from executorch.backends.qualcomm.genai_pipeline.strategies.compilation import (
        default_compiler_adapter,
    )

    def broken(self, *a, **k):  # noqa: ANN001, ANN002, ANN003
        raise ValueError("lowering failed")

    monkeypatch.setattr(default_compiler_adapter.DefaultCompilerAdapter, "compile_model", broken)
    with pytest.raises(StageError, match="lowering failed"):
        drive_compilation(_TinyQdq(), CASE, Target(soc("SM8650")), tmp_path)
