"""executorch's genai_pipeline front half (model preparation, quantization) on a Hugging Face case.

The new flow upstream is writing (``backends/qualcomm/genai_pipeline``) prepares a model with
``ExecuTorchModelPreparationStrategy`` (``AutoModelForCausalLM`` / ``AutoTokenizer`` from a model
id or local folder, example inputs, calibration data through a ``CalibrationDataAdapter``) and
quantizes it with ``ExecuTorchQuantizationStrategy`` (``torch.export`` -> ``make_quantizer`` ->
``prepare_pt2e`` -> calibrate -> ``convert_pt2e``, a recipe through ``QnnQuantizer.set_recipe``).
:func:`build_genai_qdq` runs exactly those, as ``GenAIPipeline.invoke`` wires them (its public
stages and strategies, compilation and inference left out), on the case's own folder, and saves
the QDQ module that quantization returns: the product the gate holds beside llama.py's QDQ graph.

Upstream's defaults do not get through on a Hugging Face causal LM (executorch 1.5.1); the
harness makes exactly the adjustments in :data:`ADJUSTMENTS` and nothing else, and
:func:`run_unadjusted` keeps the default path runnable so a strict xfail can name upstream's own
failure. A stage failure is upstream's ``StageError`` (stage name + original exception), raised
as :class:`GenAIStageFailed`, which the cache remembers under the build key.

Hazard: upstream's API is resolved by name (:func:`upstream_api`); a renamed or removed class is
one :class:`GenAIApiError` line naming it, never an ``AttributeError`` deep in a build.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.cache import RememberedFailure
from pytest_qnn_genai.sdk.versions import dist_version

if TYPE_CHECKING:
    import numpy as np
    import torch

    from pytest_qnn_genai.checks.qdq_windows import Windows
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.stages.prepare import PreparedModel
    from pytest_qnn_genai.targets import Target
    from pytest_qnn_genai.untyped import Upstream

STAGE = "genai-qdq"  # the cache stage of the product
GRAPH_FILE = "genai_qdq.pt2"
RECORD_FILE = "genai_qdq.json"
PREPARATION, QUANTIZATION = "model_preparation", "quantization"  # upstream's stage names
PACKAGE = "executorch.backends.qualcomm.genai_pipeline"

# What upstream's defaults do not do for a Hugging Face causal LM, and what the harness does
# instead (named in every record and in the docs; the unadjusted path is a strict xfail).
ADJUSTMENTS = (
    ("stage extra_options", "GenAIPipeline builds each stage's input config without the "
     "context's extra_options; the harness's stages fill input_config.extra_options from "
     "PipelineContext.extra_options[stage] before calling upstream's strategy"),
    ("use_cache off", "the model is loaded with config.use_cache true, so torch.export meets a "
     "DynamicCache in the output; the case folder is copied with use_cache false in config.json"),
    ("one-input calibration samples", "the default calibration adapter yields (input_ids, "
     "attention_mask) pairs for a graph exported with (input_ids,) alone; the case's "
     "calibration prompts go in as calibration_options.dataset, one (input_ids,) sample each"),
)

# The public names the harness uses: (module under PACKAGE, attribute).
API = {
    "GenAIPipeline": ("", "GenAIPipeline"),
    "EngineProxy": ("", "EngineProxy"),
    "PipelineContext": ("", "PipelineContext"),
    "StageError": ("", "StageError"),
    "ModelPreparationStage": (".stages", "ModelPreparationStage"),
    "QuantizationStage": (".stages", "QuantizationStage"),
    "ExecuTorchModelPreparationStrategy": (
        ".strategies.model_preparation.executorch_model_preparation_strategy",
        "ExecuTorchModelPreparationStrategy"),
    "ExecuTorchQuantizationStrategy": (
        ".strategies.quantization.executorch_quantization_strategy",
        "ExecuTorchQuantizationStrategy"),
    "ExecuTorchInferenceStrategy": (".strategies.inference", "ExecuTorchInferenceStrategy"),
    "InferenceStage": (".stages", "InferenceStage"),
    "InferenceResult": (".strategies.inference", "InferenceResult"),
    "InferenceInputConfig": ("", "InferenceInputConfig"),
}


class GenAIApiError(RuntimeError):
    """The installed executorch's genai_pipeline lacks a name the harness uses (one line)."""


class GenAIStageFailed(RememberedFailure, RuntimeError):
    """An upstream genai stage raised ``StageError``: its stage and original exception, one line.
    Remembered under the build key (the executorch version and this code are in it)."""


class NotHuggingFace(ValueError):
    """The case is not a Hugging Face folder, so genai's model loader cannot prepare it."""


def upstream(name: str) -> Upstream:
    """Upstream's public ``name`` (:data:`API`), or one :class:`GenAIApiError` line naming it."""
    module, attr = API[name]
    where = f"{PACKAGE}{module}"
    try:
        found = getattr(importlib.import_module(where), attr)
    except (ImportError, AttributeError) as e:
        raise GenAIApiError(f"executorch {dist_version('executorch')}: {where}.{attr} not found "
                            f"({type(e).__name__}); genai_pipeline's API changed, update "
                            f"pytest_qnn_genai/flows/genai_front.py") from None
    return found


def is_upstream_failure(exc: BaseException, stage: str, cause: type[BaseException],
                        pattern: str) -> bool:
    """``exc`` is :class:`GenAIStageFailed` from upstream's ``StageError`` of ``stage`` whose
    original exception is a ``cause`` with a message matching ``pattern`` (a regex)."""
    import re

    err = exc.__cause__ if isinstance(exc, GenAIStageFailed) else None
    original = getattr(err, "original_exception", None)
    return (getattr(err, "stage_name", None) == stage and isinstance(original, cause)
            and re.search(pattern, str(original)) is not None)


def not_huggingface_reason(case: ModelCase) -> str | None:
    """Why genai's loader cannot prepare ``case`` (None when it can): ``DefaultModelLoaderAdapter``
    is ``AutoModelForCausalLM.from_pretrained(folder)``, which needs a Hugging Face config.json:
    the case's own folder's, or a GGUF case's imported folder's (:attr:`ModelCase.hf_folder`)."""
    if (case.hf_folder / "config.json").is_file():
        return None
    return (f"{case.name}: genai_pipeline's model loader is AutoModelForCausalLM.from_pretrained "
            f"and needs a Hugging Face folder (config.json); {case.hf_folder.name} has none "
            f"({case.checkpoint} is a {case.family.NAME} checkpoint)")


def model_folder(case: ModelCase, out: Path) -> Path:
    """The case's Hugging Face files (:attr:`ModelCase.hf_folder`: a GGUF case's are its
    import's) copied into ``out`` with ``use_cache`` false (:data:`ADJUSTMENTS`)."""
    out.mkdir(parents=True, exist_ok=True)
    for p in case.hf_folder.iterdir():
        if p.is_file():
            shutil.copy2(p, out / p.name)
    config = json.loads((out / "config.json").read_text())
    config["use_cache"] = False
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def runner_ids(case: ModelCase, text: str) -> list[int]:
    """``text`` as the case's runner encodes it (BOS first where the runner adds one)."""
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

    return encode(load_tokenizer(case.path("tokenizer_model")), text)


def padded(ids: list[int], length: int) -> torch.Tensor:
    """``[1, length]`` int64 ids, right-padded with 0: a causal model's first ``len(ids)`` rows do
    not see the padding (the same padding the staged flow calibrates with)."""
    import torch

    if not 0 < len(ids) <= length:
        raise ValueError(f"need 1..{length} tokens, got {len(ids)}")
    x = torch.zeros((1, length), dtype=torch.int64)
    x[0, :len(ids)] = torch.tensor(ids, dtype=torch.int64)
    return x


def calibration_samples(case: ModelCase, prompts: tuple[str, ...] | None = None,
                        ) -> list[tuple[torch.Tensor]]:
    """One ``(input_ids,)`` sample per calibration prompt (default: the case's), each encoded as
    the runner encodes it, cut to the graph's length and padded."""
    length = case.max_context_len
    return [(padded(runner_ids(case, p)[:length], length),)
            for p in (case.calibration_prompts if prompts is None else prompts)]


def _harness_stage(base: Upstream, stage_name: str, with_options: bool,
                   seen: dict[str, tuple[float, Upstream]]) -> type:
    """Upstream's stage class ``base`` whose ``invoke`` records its output and seconds in
    ``seen[stage_name]`` and, ``with_options``, first sets ``input_config.extra_options`` from
    ``context.extra_options[stage_name]`` (GenAIPipeline passes none)."""
    import time

    def invoke(self: object, context: Upstream, input_config: Upstream) -> Upstream:
        if with_options:
            options = dict(context.extra_options.get(stage_name, {}))
            input_config = dataclasses.replace(input_config, extra_options=options)
        start = time.monotonic()
        output = base.invoke(self, context, input_config)
        seen[stage_name] = (time.monotonic() - start, output)
        return output

    return type(f"Harness{base.__name__}", (base,), {"invoke": invoke})


def run_front_half(case: ModelCase, target: Target, model_dir: Path, artifact_dir: Path,
                   extra_options: dict[str, object] | None) -> dict[str, tuple[float, Upstream]]:
    """``GenAIPipeline.invoke`` with upstream's preparation and quantization stages (compilation
    and inference left out), on ``model_dir``: each stage's seconds and output config.
    ``extra_options``: per stage (None: upstream's stages get none, as ``from_proxy`` builds
    them)."""
    from executorch.backends.qualcomm.export_utils import get_backend_type

    seen: dict[str, tuple[float, Upstream]] = {}
    adjusted = extra_options is not None
    prep_stage = _harness_stage(upstream("ModelPreparationStage"), PREPARATION, adjusted, seen)
    quant_stage = _harness_stage(upstream("QuantizationStage"), QUANTIZATION, adjusted, seen)
    builder = (upstream("PipelineContext").builder().with_model(str(model_dir))
               .with_soc(target.soc.name).with_prompt(case.eval_prompt)
               .with_artifact_dir(str(artifact_dir)))
    if extra_options is not None:
        builder = builder.with_extra_options(extra_options)
    pipeline = upstream("GenAIPipeline")(
        prep_stage(upstream("ExecuTorchModelPreparationStrategy")()),
        quant_stage(upstream("ExecuTorchQuantizationStrategy")()), None, None,
        upstream("EngineProxy")({}, get_backend_type(target.backend)))
    try:
        pipeline.invoke(builder.build())
    except upstream("StageError") as e:
        raise GenAIStageFailed(f"genai_pipeline {e.stage_name} stage: {e}") from e
    if QUANTIZATION not in seen or seen[QUANTIZATION][1].quantized_model is None:
        raise GenAIApiError("GenAIPipeline.invoke did not run its quantization stage")
    return seen


def stage_options(case: ModelCase, prompts: tuple[str, ...] | None = None) -> dict[str, object]:
    """The per-stage extra_options of the adjusted run: the case's graph length as ``ar_len``,
    its calibration prompts as one-input samples, llama.py's recipe for the case."""
    from pytest_qnn_genai.stages.recipe import make_recipe

    return {PREPARATION: {"example_input_options": {"ar_len": case.max_context_len},
                          "calibration_options": {"dataset": calibration_samples(case, prompts)}},
            QUANTIZATION: {"quant_recipe": make_recipe(case).recipe}}


def build_genai_qdq(case: ModelCase, target: Target, out: Path,
                    prompts: tuple[str, ...] | None = None) -> None:
    """genai's front half on ``case`` for ``target``'s SoC and backend, into ``out``: the QDQ
    module (``torch.export``-ed, :data:`GRAPH_FILE`) and a record (:data:`RECORD_FILE`).
    ``prompts``: calibrate on these instead of the case's calibration prompts."""
    import time

    import torch

    reason = not_huggingface_reason(case)
    if reason is not None:
        raise NotHuggingFace(reason)
    work = out / "work"
    seen = run_front_half(case, target, model_folder(case, work / "model"), work,
                          stage_options(case, prompts))
    start = time.monotonic()
    example = (padded([0], case.max_context_len),)
    torch.export.save(torch.export.export(seen[QUANTIZATION][1].quantized_model, example,
                                          strict=False), out / GRAPH_FILE)
    save_s = time.monotonic() - start
    shutil.rmtree(work, ignore_errors=True)
    record = {"case": case.name, "soc": target.soc.name, "backend": target.backend,
              "ar_len": case.max_context_len, "calibration_samples":
              len(case.calibration_prompts if prompts is None else prompts),
              "seconds": {PREPARATION: round(seen[PREPARATION][0], 3),
                          QUANTIZATION: round(seen[QUANTIZATION][0], 3), "save": round(save_s, 3)},
              "executorch": dist_version("executorch"),
              "adjustments": [name for name, _ in ADJUSTMENTS]}
    (out / RECORD_FILE).write_text(json.dumps(record, indent=2))


def run_unadjusted(case: ModelCase, target: Target, artifact_dir: Path,
                   use_cache_off: bool = False) -> None:
    """Upstream's default path (no extra_options, the case's Hugging Face folder as it is;
    ``use_cache_off``: only the use_cache adjustment): raises what upstream raises, as
    :class:`GenAIStageFailed`."""
    folder = model_folder(case, artifact_dir / "model") if use_cache_off else case.hf_folder
    run_front_half(case, target, folder, artifact_dir, None)


@dataclass(frozen=True)
class GenAIQdq:
    """The saved product: genai's QDQ module and its record."""

    graph_path: Path
    record: dict[str, object]

    @classmethod
    def load(cls, folder: Path) -> GenAIQdq:
        return cls(folder / GRAPH_FILE, json.loads((folder / RECORD_FILE).read_text()))

    def module(self) -> torch.nn.Module:
        """The saved QDQ module. Its graph names the ``quantized_decomposed`` ops, which exist
        only once executorch's QNN quantizer is imported, and its output spec names
        transformers' ``CausalLMOutputWithPast``, which torch's pytree knows only once
        ``transformers.modeling_outputs`` is imported (a process that loads the product from
        the cache has neither quantized nor loaded a model: without them the load fails)."""
        import executorch.backends.qualcomm.quantizer.quantizer  # noqa: F401
        import torch
        import transformers.modeling_outputs  # noqa: F401

        module: torch.nn.Module = torch.export.load(self.graph_path).module()
        return module

    def window_logits(self, windows: list[list[int]]) -> list[np.ndarray]:
        """The module's logits ``[len(ids), vocab]`` of each id list (one causal pass each)."""
        import numpy as np
        import torch

        module = self.module()
        length = int(str(self.record["ar_len"]))
        rows = []
        with torch.no_grad():
            for ids in windows:
                out = module(padded(ids, length))
                logits = getattr(out, "logits", None)
                logits = logits if logits is not None else out[0]
                rows.append(np.asarray(logits[0, :len(ids)].float().numpy()))
        return rows


GENAI, STATIC_LLAMA = "genai", "static_llama"  # the two kinds of QDQ graph window_rows reads


def build_window_rows(graph: Path, reader: str, windows: Windows, out: Path,
                      prepared: PreparedModel | None = None) -> None:
    """A QDQ graph's continuation rows of every window into ``out`` (``checks.qdq_windows``):
    ``reader`` :data:`GENAI` for genai's module (its folder's record gives the length),
    :data:`STATIC_LLAMA` for a calibration-shaped graph (llama.py's ``decode_qdq.pt2``, the staged
    ``calibration`` graph), run with ``prepared``'s inputs."""
    from pytest_qnn_genai.checks.qdq_windows import save_rows

    if reader == GENAI:
        full = GenAIQdq.load(graph.parent).window_logits(windows.ids())
    elif reader == STATIC_LLAMA and prepared is not None:
        import torch

        from pytest_qnn_genai.stages.prepare import run_calibration_graph

        module = torch.export.load(graph).module()
        full = [run_calibration_graph(module, prepared, ids) for ids in windows.ids()]
    else:
        raise ValueError(f"reader {reader!r} (with prepared: {prepared is not None})")
    save_rows(windows.rows(full), out)
