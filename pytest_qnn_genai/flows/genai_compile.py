"""genai_pipeline's compilation through its public seam: :class:`HarnessCompilerAdapter`, a
``CompilerAdapter`` over the harness's own lowering.

Contract. executorch 1.5.1's ``DefaultCompilerAdapter.compile_model`` raises
``NotImplementedError`` ("has no body yet ... Inject a custom CompilerAdapter until then"), so the
harness injects this one into upstream's ``ExecuTorchCompilationStrategy`` and ``GenAIPipeline``
runs its compilation stage as it is. ``compile_model`` is the body upstream's docstring describes,
as upstream's own Hugging Face path lowers (``examples/qualcomm/oss_scripts/llm_utils``): one
``to_edge_transform_and_lower_to_qnn`` over the one graph it is handed, with that path's compile
specs (:func:`hf_path_specs`: the orchestrator passes none) and the strategy's forwarded options
(``convert_linear_to_conv2d``), then ``to_executorch``, written to ``<artifact_dir>/<name>.pte``.
QNN refusing the graph is :class:`~pytest_qnn_genai.stages.qnn_refusal.QnnRefusal` with QNN's
reason, as for every lowering here.

The graph's constant subgraphs are computed first (:func:`folded`; quantize and dequantize ops
kept): the Hugging Face modelling builds its causal mask and rotary tables from constants, and
QNN refuses a partition with no graph input ("No graph inputs present for graph"), so the
program would not build. llm_utils never meets this: its wrapper feeds positions as inputs.

Hazard: upstream's strategy names the file after ``context.model_name``, which for a local
model is the folder's path: only its last part is used, so the program never lands outside
``artifact_dir``.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.sdk import require_active
from pytest_qnn_genai.stages.qnn_refusal import lowering

if TYPE_CHECKING:
    import torch

    from pytest_qnn_genai.targets import Target
    from pytest_qnn_genai.untyped import Upstream

_RESULT = ("executorch.backends.qualcomm.genai_pipeline.strategies.compilation.compiler_adapter",
           "CompilationResult")


class HarnessCompilerAdapter:
    """Upstream's ``CompilerAdapter`` protocol for ``target`` (see the module docstring)."""

    def __init__(self, target: Target) -> None:
        self._target = target

    def compile_model(self, model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...],
                      compile_specs: list[object] | None, artifact_dir: Path, file_name: str,
                      soc_model: object, backend_type: object,
                      constant_methods: dict[str, object] | None = None,
                      dep_table: dict[str, object] | None = None,
                      passes_job: object = None,
                      extra_options: dict[str, object] | None = None) -> Upstream:
        soc = getattr(soc_model, "name", str(soc_model))
        if soc != self._target.soc.name:
            raise ValueError(f"compile_model for {soc}, but the adapter was made for "
                             f"{self._target.soc.name}")
        require_active("genai_pipeline compilation (QNN lowering)")
        from executorch.backends.qualcomm.utils.utils import to_edge_transform_and_lower_to_qnn

        name = Path(file_name).name
        specs = compile_specs if compile_specs is not None else hf_path_specs(self._target)
        with lowering(f"genai_pipeline {name} for {self._target.soc.name}-{self._target.backend}"):
            edge = to_edge_transform_and_lower_to_qnn(
                folded(model, example_inputs), example_inputs, specs, constant_methods=constant_methods,
                dep_table=dep_table, passes_job=passes_job, **(extra_options or {}))
        out = Path(artifact_dir) / f"{name}.pte"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(edge.to_executorch().buffer)
        module, attr = _RESULT
        return getattr(importlib.import_module(module), attr)(artifact_paths=[out])


def folded(model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...]) -> torch.nn.Module:
    """``model`` with its constant subgraphs computed (the quantize and dequantize ops kept)."""
    import torch
    from executorch.exir.passes.constant_prop_pass import _QUANT_PRIMITIVES, constant_prop_pass

    ep = torch.export.export(model, example_inputs, strict=False)
    skip = {*_QUANT_PRIMITIVES, torch.ops.aten.full.default}
    module: torch.nn.Module = constant_prop_pass(ep, custom_skip_targets=skip).module()
    return module


def hf_path_specs(target: Target) -> list[object]:
    """The compile specs upstream's Hugging Face path lowers with (``llm_utils``
    ``QnnLLMEdgeManager.to_edge_transform_and_lower_to_qnn``: a quantized HTP program, every
    other option at its default) for ``target``'s SoC."""
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
    )

    specs: list[object] = generate_qnn_executorch_compiler_spec(
        soc_model=target.soc.chipset, backend_options=generate_htp_compiler_spec(use_fp16=False))
    return specs
