"""genai_front against the installed executorch's genai_pipeline: every public name the harness
uses resolves, and a renamed one is one line naming it, from the name lookup and from a build.
(Importing executorch's genai_pipeline costs seconds, so these live outside the fast tier.)"""
from __future__ import annotations

import importlib

import pytest

from pytest_qnn_genai.flows import genai_front, genai_run
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
        genai_run.build(genai_run.GenAIRun(available()["qwen3_toy"], Target(soc("SM8650"))),
                        tmp_path)


def _failed(stage: str, original: Exception) -> genai_front.GenAIStageFailed:
    from executorch.backends.qualcomm.genai_pipeline import StageError

    err = StageError(stage, "Quantization failed", original)
    try:
        raise genai_front.GenAIStageFailed(f"genai_pipeline {stage} stage: {err}") from err
    except genai_front.GenAIStageFailed as e:
        return e


DYNAMIC_CACHE = r"Found <class 'transformers\.cache_utils\.DynamicCache'> in output"


def test_the_recorded_upstream_failure_is_recognized() -> None:
    exc = _failed("quantization", RuntimeError(
        "Found <class 'transformers.cache_utils.DynamicCache'> in output, which is not ..."))
    assert genai_front.is_upstream_failure(exc, "quantization", RuntimeError, DYNAMIC_CACHE)


@pytest.mark.parametrize(("stage", "original"), [
    ("model_preparation", RuntimeError("Found <class 'transformers.cache_utils.DynamicCache'> "
                                       "in output")),  # another stage
    ("quantization", TypeError("Found <class 'transformers.cache_utils.DynamicCache'> in "
                               "output")),  # another type
    ("quantization", RuntimeError("something else broke")),  # another message
])
def test_a_different_failure_is_not_the_recorded_one(stage, original) -> None:
    exc = _failed(stage, original)
    assert not genai_front.is_upstream_failure(exc, "quantization", RuntimeError, DYNAMIC_CACHE)
    assert not genai_front.is_upstream_failure(RuntimeError("x"), "quantization", RuntimeError,
                                               DYNAMIC_CACHE)


def test_an_upstream_stage_failure_is_remembered_under_the_build_key(tmp_path) -> None:
    """A folder genai's loader cannot read: upstream's StageError from model preparation, as
    GenAIStageFailed (its stage and original exception in one line), remembered by the cache:
    the next lookup of the key raises it again without building."""
    import dataclasses

    from pytest_qnn_genai.cache import ArtifactCache

    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text("{}")  # no model_type: AutoModelForCausalLM refuses it
    case = dataclasses.replace(available()["qwen3_toy"], folder=folder)  # its recipe, no model
    calls: list[int] = []

    def build(out) -> None:  # noqa: ANN001
        calls.append(1)
        genai_run.run_without(genai_run.GenAIRun(case, Target(soc("SM8650")), artifact_dir=out),
                              None)

    cache = ArtifactCache(tmp_path / "cache", {"executorch": "x"}, progress=lambda _m: None)
    with pytest.raises(genai_front.GenAIStageFailed, match=r"model_preparation stage: "
                       r"\[model_preparation\] Model preparation failed \(caused by "):
        cache.get_or_build("genai", {"case": "broken"}, build, label="broken")
    with pytest.raises(genai_front.GenAIStageFailed) as again:
        cache.get_or_build("genai", {"case": "broken"}, build, label="broken")
    assert calls == [1] and again.value.remembered
