"""``GenAIPipeline.invoke`` on a Hugging Face case: upstream's stages and strategies, the harness's
recipe and compiler injected through upstream's public seams, and nothing else changed.

Contract. :func:`invoke` builds ``GenAIPipeline(preparation, quantization, compilation, None,
EngineProxy)`` from upstream's public classes (a :class:`GenAIRun` says which adapters and which
of :data:`ADJUSTMENTS` apply) and calls its ``invoke``: preparation → quantization → compilation.
Inference is upstream's ``InferenceStage`` run per target on the built program
(``flows/genai_inference.py``): the build is one product per SoC, its runs are per target.
:func:`build` is the product: the QDQ module quantization returned (saved the moment the stage
returns, before lowering touches it), the ``.pte`` the injected ``CompilerAdapter`` wrote, a
record. :func:`run_without` drops one adjustment, so a strict xfail names upstream's own failure
for each.

Hazard: upstream's defaults do not get through on a Hugging Face causal LM (executorch 1.5.1).
Each adjustment is named in :data:`ADJUSTMENTS`, in every record and in the docs; one that is
silently needed is one the gate cannot see upstream fix.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_qnn_genai.flows import genai_recipes
from pytest_qnn_genai.flows.genai_compile import HarnessCompilerAdapter
from pytest_qnn_genai.flows.genai_front import (
    GRAPH_FILE,
    PREPARATION,
    QUANTIZATION,
    RECORD_FILE,
    GenAIApiError,
    GenAIStageFailed,
    NotHuggingFace,
    calibration_samples,
    model_folder,
    not_huggingface_reason,
    padded,
    upstream,
)
from pytest_qnn_genai.sdk.versions import dist_version

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.targets import Target
    from pytest_qnn_genai.untyped import Upstream

COMPILATION = "compilation"  # upstream's stage name
PTE_FILE = "genai.pte"

FORWARDING, USE_CACHE, CALIBRATION, COMPILER = (
    "stage extra_options", "use_cache off", "one-input calibration samples", "compiler injection")
# What upstream's defaults do not do for a Hugging Face causal LM, and what the harness does
# instead (named in every record and in the docs; each has a strict xfail without it).
ADJUSTMENTS = {
    FORWARDING: "GenAIPipeline builds each stage's input config without the context's "
                "extra_options; the harness's stages fill input_config.extra_options from "
                "PipelineContext.extra_options[stage] before calling upstream's strategy",
    USE_CACHE: "the model is loaded with config.use_cache true, so torch.export meets a "
               "DynamicCache in the output; the case folder is copied with use_cache false",
    CALIBRATION: "the default calibration adapter yields (input_ids, attention_mask) pairs for a "
                 "graph exported with (input_ids,) alone; the case's calibration prompts go in "
                 "as calibration_options.dataset, one (input_ids,) sample each",
    COMPILER: "DefaultCompilerAdapter.compile_model has no body in executorch 1.5.1; the "
              "harness's CompilerAdapter (flows/genai_compile.py) is injected into upstream's "
              "ExecuTorchCompilationStrategy, as upstream's docstring says to",
}


@dataclass(frozen=True)
class GenAIRun:
    """One ``GenAIPipeline.invoke``: the case and target, upstream's working folder, the recipe,
    which adjustments apply, and whether compilation runs."""

    case: ModelCase
    target: Target
    recipe: str = genai_recipes.HF_PATH
    prompts: tuple[str, ...] | None = None  # calibrate on these instead of the case's
    adjustments: frozenset[str] = frozenset(ADJUSTMENTS)
    compile: bool = True
    artifact_dir: Path = Path("genai-work")  # upstream's working folder (build: its own)

    def without(self, adjustment: str) -> GenAIRun:
        if adjustment not in ADJUSTMENTS:
            raise KeyError(f"no adjustment {adjustment!r}; adjustments: {', '.join(ADJUSTMENTS)}")
        return dataclasses.replace(self, adjustments=self.adjustments - {adjustment})

    def stage_options(self) -> dict[str, object]:
        """Per-stage extra_options: the case's graph length as ``ar_len``, its calibration
        prompts as one-input samples (with that adjustment), the recipe's quantization
        options."""
        prep: dict[str, object] = {"example_input_options": {"ar_len": self.case.max_context_len}}
        if CALIBRATION in self.adjustments:
            prep["calibration_options"] = {"dataset": calibration_samples(self.case, self.prompts)}
        return {PREPARATION: prep,
                QUANTIZATION: genai_recipes.get(self.recipe).options(self.case),
                # read by upstream's compilation strategy itself (its _COMPILE_EXTRA_KEYS), as
                # llm_utils lowers: linears rewritten to convolutions for HTP
                "convert_linear_to_conv2d": True}


class _Context(Protocol):
    """What the harness reads of upstream's ``PipelineContext``."""

    extra_options: dict[str, dict[str, object]]


Seen = dict[str, tuple[float, object]]  # each stage's seconds and output config


def _harness_stage(base: Upstream, stage_name: str, forward: bool, seen: Seen,
                   after: Callable[[object], None] | None = None) -> type:
    """Upstream's stage class ``base`` whose ``invoke`` records its output and seconds in
    ``seen[stage_name]``, calls ``after`` with the output, and, ``forward``, first sets
    ``input_config.extra_options`` from ``context.extra_options[stage_name]``."""
    def invoke(self: object, context: _Context, input_config: Upstream) -> object:
        if forward:
            options = dict(context.extra_options.get(stage_name, {}))
            input_config = dataclasses.replace(input_config, extra_options=options)
        start = time.monotonic()
        output = base.invoke(self, context, input_config)
        seen[stage_name] = (time.monotonic() - start, output)
        if after is not None:
            after(output)
        return output

    return type(f"Harness{base.__name__}", (base,), {"invoke": invoke})


def invoke(run: GenAIRun, after_quantization: Callable[[object], None] | None = None,
           ) -> tuple[Seen, object]:
    """``GenAIPipeline.invoke`` for ``run`` (see the module docstring): each stage's seconds and
    output config, and the quantizer adapter (its block map's size). Upstream's ``StageError``
    is raised as :class:`GenAIStageFailed`."""
    from executorch.backends.qualcomm.export_utils import get_backend_type

    reason = not_huggingface_reason(run.case)
    if reason is not None:
        raise NotHuggingFace(reason)
    folder = (model_folder(run.case, run.artifact_dir / "model") if USE_CACHE in run.adjustments
              else run.case.hf_folder)
    recipe = genai_recipes.get(run.recipe)
    seen: Seen = {}
    forward = FORWARDING in run.adjustments
    prep = _harness_stage(upstream("ModelPreparationStage"), PREPARATION, forward, seen)
    quant = _harness_stage(upstream("QuantizationStage"), QUANTIZATION, forward, seen,
                           after_quantization)
    adapter = recipe.adapter()
    compilation = None
    if run.compile:
        compiler = HarnessCompilerAdapter(run.target) if COMPILER in run.adjustments else None
        compilation = _harness_stage(upstream("CompilationStage"), COMPILATION, False, seen)(
            upstream("ExecuTorchCompilationStrategy")(compiler))
    context = (upstream("PipelineContext").builder().with_model(str(folder))
               .with_soc(run.target.soc.name).with_prompt(run.case.eval_prompt)
               .with_artifact_dir(str(run.artifact_dir))
               .with_extra_options(run.stage_options()).build())
    pipeline = upstream("GenAIPipeline")(
        prep(upstream("ExecuTorchModelPreparationStrategy")()),
        quant(upstream("ExecuTorchQuantizationStrategy")(adapter)), compilation, None,
        upstream("EngineProxy")({}, get_backend_type(run.target.backend)))
    try:
        pipeline.invoke(context)
    except upstream("StageError") as e:
        raise GenAIStageFailed(f"genai_pipeline {e.stage_name} stage: {e}") from e
    if QUANTIZATION not in seen or getattr(seen[QUANTIZATION][1], "quantized_model", None) is None:
        raise GenAIApiError("GenAIPipeline.invoke did not run its quantization stage")
    return seen, adapter


def build(run: GenAIRun, out: Path) -> None:
    """``run`` into ``out``: :data:`GRAPH_FILE` (the QDQ module, ``torch.export``-ed),
    :data:`PTE_FILE` when it compiles, :data:`RECORD_FILE`."""
    import torch

    saved: list[float] = []

    def save(output: object) -> None:
        start = time.monotonic()
        example = (padded([0], run.case.max_context_len),)
        model: torch.nn.Module = getattr(output, "quantized_model")  # noqa: B009 - an upstream config
        torch.export.save(torch.export.export(model, example, strict=False),
                          out / GRAPH_FILE)
        saved.append(time.monotonic() - start)

    work = dataclasses.replace(run, artifact_dir=out / "work")
    seen, adapter = invoke(work, save)
    seconds = {stage: round(s, 3) for stage, (s, _) in seen.items()}
    if run.compile:
        paths = [Path(p) for p in getattr(seen[COMPILATION][1], "artifact_paths", None) or []]
        if len(paths) != 1:
            raise GenAIApiError(f"genai compilation reported {len(paths)} artifacts, not one")
        shutil.copy2(paths[0], out / PTE_FILE)
    shutil.rmtree(out / "work", ignore_errors=True)
    case, target = run.case, run.target
    record = {"case": case.name, "soc": target.soc.name, "backend": target.backend,
              "ar_len": case.max_context_len, "recipe": run.recipe,
              "block_map_entries": getattr(adapter, "keys", 0),
              "calibration_samples": len(case.calibration_prompts if run.prompts is None
                                         else run.prompts),
              "seconds": {**seconds, "save": round(saved[0], 3)},
              "program": PTE_FILE if run.compile else None,
              "executorch": dist_version("executorch"),
              "adjustments": sorted(run.adjustments)}
    (out / RECORD_FILE).write_text(json.dumps(record, indent=2))


def run_without(run: GenAIRun, adjustment: str | None) -> None:
    """``run`` with ``adjustment`` dropped (None: every adjustment dropped, upstream's defaults
    as they are): raises what upstream raises, as :class:`GenAIStageFailed`."""
    plain = (dataclasses.replace(run, adjustments=frozenset()) if adjustment is None
             else run.without(adjustment))
    invoke(plain)
