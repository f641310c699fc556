"""What the harness knows of executorch's genai_pipeline on a Hugging Face case: its public names,
its failures, the case's folder and ids as genai reads them, and the saved QDQ module.

Upstream's ``GenAIPipeline`` (``backends/qualcomm/genai_pipeline``, Phase 1 in executorch 1.5.1)
prepares a model with ``ExecuTorchModelPreparationStrategy`` (``AutoModelForCausalLM`` from a
local folder, example inputs, calibration data), quantizes it with
``ExecuTorchQuantizationStrategy`` (``torch.export`` -> ``make_quantizer`` -> ``prepare_pt2e`` ->
calibrate -> ``convert_pt2e``) and compiles through an injected ``CompilerAdapter``;
:mod:`.genai_run` invokes it. This module is what that run and the suites share:
:func:`upstream` resolves upstream's API by name, :class:`GenAIStageFailed` is upstream's
``StageError`` (stage name + original exception, remembered by the cache under the build key),
:class:`GenAIQdq` the product's QDQ module and record, :func:`build_window_rows` any QDQ graph's
rows on the compared windows.

Hazard: upstream's API is resolved by name (:func:`upstream`); a renamed or removed class is
one :class:`GenAIApiError` line naming it, never an ``AttributeError`` deep in a build.
"""
from __future__ import annotations

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
    from pytest_qnn_genai.untyped import Upstream

GRAPH_FILE = "genai_qdq.pt2"
RECORD_FILE = "genai_qdq.json"
PREPARATION, QUANTIZATION = "model_preparation", "quantization"  # upstream's stage names
PACKAGE = "executorch.backends.qualcomm.genai_pipeline"

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
    "CompilationStage": (".stages", "CompilationStage"),
    "ExecuTorchCompilationStrategy": (
        ".strategies.compilation.executorch_compilation_strategy",
        "ExecuTorchCompilationStrategy"),
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
    import's) copied into ``out`` with ``use_cache`` false (an adjustment: ``genai_run``)."""
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


@dataclass(frozen=True)
class GenAIQdq:
    """The saved product: genai's QDQ module, its record and, when the build compiled, its
    program."""

    graph_path: Path
    record: dict[str, object]
    pte: Path | None = None

    @classmethod
    def load(cls, folder: Path) -> GenAIQdq:
        record = json.loads((folder / RECORD_FILE).read_text())
        program = record.get("program")
        return cls(folder / GRAPH_FILE, record, folder / program if program else None)

    def exported(self) -> torch.export.ExportedProgram:
        """The saved QDQ graph. Its graph names the ``quantized_decomposed`` ops, which exist
        only once executorch's QNN quantizer is imported, and its output spec names
        transformers' ``CausalLMOutputWithPast``, which torch's pytree knows only once
        ``transformers.modeling_outputs`` is imported (a process that loads the product from
        the cache has neither quantized nor loaded a model: without them the load fails)."""
        import executorch.backends.qualcomm.quantizer.quantizer  # noqa: F401
        import torch
        import transformers.modeling_outputs  # noqa: F401

        return torch.export.load(self.graph_path)

    def module(self) -> torch.nn.Module:
        """The saved QDQ module (:meth:`exported`)."""
        module: torch.nn.Module = self.exported().module()
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
