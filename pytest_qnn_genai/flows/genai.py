"""Adapter for executorch's ``backends.qualcomm.genai_pipeline``: the third flow.

The upstream package has four stages (model preparation, quantization, compilation, inference)
routed by an ``EngineProxy``. In executorch 1.5.1:

- model preparation's default loader is HuggingFace-only (``AutoModelForCausalLM``), so a
  llama2.c case such as stories260k is prepared and quantized by this project's staged flow (the
  same graphs the ``new`` flow lowers) and handed to genai's compilation stage as its
  ``QuantizationOutputConfig``;
- compilation (``GenAIPipeline.from_proxy``'s ``ExecuTorchCompilationStrategy`` with its
  ``DefaultCompilerAdapter``) raises ``NotImplementedError`` ("has no body yet"), which the
  strategy wraps in ``StageError(stage_name="compilation")``;
- inference needs an injected device runner; the built .pte would be run by this project's
  ``HybridRunner`` like the other flows', so the genai inference stage is not driven.

Exactly the not-implemented compilation becomes :class:`GenAIUnavailable`; every other failure
(an API change, a real lowering error) propagates unchanged, so ``xfail(raises=GenAIUnavailable)``
hides nothing else and the tests start passing the day the upstream compiler adapter lands.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.cache import RememberedFailure
from pytest_qnn_genai.flows.base import BuildRequest, Flow, FlowOutput
from pytest_qnn_genai.hybrid import CALIBRATION, DECODE, QDQ, TEXT_DECODER
from pytest_qnn_genai.sdk.versions import dist_version

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.stages.quantize import QdqArtifacts
    from pytest_qnn_genai.targets import Target

ARTIFACTS_FILE = "genai-artifacts.txt"


class GenAIUnavailable(RememberedFailure, RuntimeError):
    """executorch's genai_pipeline cannot build the case yet: a stage is not implemented.

    A :class:`RememberedFailure`: the cache keeps it under the build's key (which holds the
    executorch version), so warm runs do not retry the same executorch's missing compiler."""


class GenAIFlowError(RuntimeError):
    """The genai_pipeline adapter no longer matches the installed executorch (API changed)."""


def unavailable_reason() -> str:
    """The xfail reason for genai-flow tests on this executorch."""
    return f"executorch {dist_version('executorch')}: genai_pipeline compilation not implemented"


# upstream's own words for the missing compiler (genai_pipeline/strategies/compilation/
# default_compiler_adapter.py, DefaultCompilerAdapter.compile_model, executorch 1.5.1)
NO_BODY_YET = "DefaultCompilerAdapter has no body yet"


def _not_implemented(exc: BaseException) -> BaseException | None:
    """The NotImplementedError behind a genai ``StageError`` from compilation whose message is
    upstream's :data:`NO_BODY_YET`, if that is what it is (walks ``original_exception`` and
    ``__cause__``); any other NotImplementedError is not the known gap."""
    from executorch.backends.qualcomm.genai_pipeline import StageError

    if not (isinstance(exc, StageError) and exc.stage_name == "compilation"):
        return None
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, NotImplementedError) and NO_BODY_YET in str(seen):
            return seen
        seen = getattr(seen, "original_exception", None) or seen.__cause__
    return None


def compile_graph(graph: object, example_inputs: tuple[object, ...], case: ModelCase, target: Target,
                  out_dir: Path) -> list[Path]:
    """Run genai_pipeline's compilation stage on one QDQ graph (with its example inputs) into
    ``out_dir``: the staged flow's decode graph, or genai's own front half's module.

    Returns the artifact paths it reports; raises :class:`GenAIUnavailable` when (and only when)
    the stage is not implemented.
    """
    from executorch.backends.qualcomm import genai_pipeline as gp
    from executorch.backends.qualcomm.export_utils import get_backend_type
    from executorch.backends.qualcomm.genai_pipeline.pipeline_types import (
        STAGE_INFERENCE,
        STAGE_MODEL_PREPARATION,
        STAGE_QUANTIZATION,
    )

    proxy = gp.EngineProxy({}, get_backend_type(target.backend))
    pipe = gp.GenAIPipeline.from_proxy(
        proxy, skip_stages={STAGE_MODEL_PREPARATION, STAGE_QUANTIZATION, STAGE_INFERENCE})
    run_compilation = getattr(pipe, "_run_compilation", None)
    if run_compilation is None:
        raise GenAIFlowError("GenAIPipeline has no _run_compilation any more: update "
                             "pytest_qnn_genai/flows/genai.py to the new orchestrator API")
    context = (gp.PipelineContext.builder().with_model(case.decoder_model)
               .with_soc(target.soc.name).with_prompt(case.eval_prompt)
               .with_artifact_dir(str(out_dir)).build())
    prepared = gp.ModelPreparationOutputConfig(example_inputs=example_inputs)
    quantized = gp.QuantizationOutputConfig(quantized_model=graph)
    try:
        output = run_compilation(context, prepared, quantized)
    except Exception as e:  # noqa: BLE001 - classified below, re-raised unless not-implemented
        cause = _not_implemented(e)
        if cause is None:
            raise
        raise GenAIUnavailable(f"{unavailable_reason()}: {type(cause).__name__}: {cause}") from e
    paths = [Path(p) for p in (output.artifact_paths or [])]
    if not paths:
        raise GenAIFlowError("genai_pipeline compilation returned no artifact paths")
    return paths


def drive_compilation(qdq: QdqArtifacts, case: ModelCase, target: Target, out_dir: Path) -> list[Path]:
    """genai_pipeline's compilation stage on the staged flow's QDQ decode graph
    (:func:`compile_graph`)."""
    return compile_graph(qdq.graph(DECODE), qdq.example_inputs(DECODE), case, target, out_dir)


def build_genai(qdq: QdqArtifacts, case: ModelCase, target: Target, out: Path) -> list[str]:
    """genai_pipeline's compilation of the staged flow's QDQ decode graph, into ``out``.

    The reported artifacts are copied to the top of ``out`` (the cache records top-level files
    only) and listed in :data:`ARTIFACTS_FILE`, the first being the program.
    """
    work = out / "genai-work"
    names = []
    for p in drive_compilation(qdq, case, target, work):
        shutil.copy2(p, out / p.name)
        names.append(p.name)
    shutil.rmtree(work, ignore_errors=True)
    (out / ARTIFACTS_FILE).write_text("\n".join(names) + "\n")
    return names


def artifact_names(folder: Path) -> list[str]:
    """The artifacts :func:`build_genai` wrote into ``folder``, the program first."""
    return (folder / ARTIFACTS_FILE).read_text().split()


class GenAIFlow(Flow):
    """executorch's genai_pipeline compiling the staged flow's QDQ graphs."""

    name = "genai"
    stage = "genai-build"
    from_qdq = True

    def key(self, case: ModelCase, target: Target) -> dict[str, object]:
        return {"case": case.build_fingerprint(), "soc": target.soc.name,
                "backend": target.backend, "executorch": dist_version("executorch")}

    def build(self, request: BuildRequest, out: Path) -> None:
        build_genai(request.require_qdq(self.name), request.case, request.target, out)

    def load(self, folder: Path, qdq: QdqArtifacts | None) -> FlowOutput:
        names = artifact_names(folder)
        files = {TEXT_DECODER: folder / names[0]}
        if qdq is not None:
            files[QDQ] = qdq.path(CALIBRATION)
        return FlowOutput(files, {"artifacts": names})


FLOW = GenAIFlow()
