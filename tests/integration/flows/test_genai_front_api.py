"""genai_front against the installed executorch's genai_pipeline: every public name the harness
uses resolves, and a renamed one is one line naming it, from the name lookup and from a build.
(Importing executorch's genai_pipeline costs seconds, so these live outside the fast tier.)"""
from __future__ import annotations

import importlib

import pytest

from pytest_qnn_genai.flows import genai_front
from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.targets import Target, soc


def test_a_renamed_upstream_api_is_one_line_naming_it(monkeypatch) -> None:
    module_name, attr = genai_front.API["QuantizationStage"]
    module = importlib.import_module(genai_front.PACKAGE + module_name)
    monkeypatch.delattr(module, attr)  # as if upstream renamed it
    with pytest.raises(genai_front.GenAIApiError) as info:
        genai_front.upstream("QuantizationStage")
    message = str(info.value)
    assert "\n" not in message
    assert f"{genai_front.PACKAGE}.stages.QuantizationStage not found" in message


def test_every_name_the_harness_uses_resolves() -> None:
    for name in genai_front.API:
        assert genai_front.upstream(name).__name__ == genai_front.API[name][1]


def test_a_build_with_a_renamed_upstream_api_fails_naming_it(monkeypatch, tmp_path) -> None:
    module_name, attr = genai_front.API["ExecuTorchQuantizationStrategy"]
    module = importlib.import_module(genai_front.PACKAGE + module_name)
    monkeypatch.delattr(module, attr)
    with pytest.raises(genai_front.GenAIApiError, match="ExecuTorchQuantizationStrategy not found"):
        genai_front.build_genai_qdq(available()["qwen3_toy"], Target(soc("SM8650")), tmp_path)
