"""A kv-mode program compiled to dump every tensor QNN computes: the tool that finds where a
program leaves its QDQ graph (:mod:`pytest_qnn_genai.checks.layer_gap`).

Contract: :func:`compile_dumping` lowers a kv-mode build's ``kv_forward`` graph (QNN's tensor dump
takes one method only, so a kv-mode build) by :func:`~pytest_qnn_genai.stages.compile.lower`, as
``compile_pte`` does, with the QNN backend's ``dump_intermediate_outputs`` option on: each execute then writes
every output tensor of the QNN graph, raw (quantized), named after the edge node that made it
(``aten_rms_norm_default_3``), into ETDump's debug buffer
(:mod:`pytest_qnn_genai.runtime.intermediates`). Hazard: it is a debugging build, compiled apart
from the shipped one; what it says holds for the shipped program only as far as its outputs are
the shipped program's, which the caller checks (``scripts/layer_gap.py`` holds the dumping
build's logits to the shipped program's at every call).

Beside the program it writes :data:`DUMPING_NODES`: the graph QNN was given, as the backend's own
passes left it (mha2sha's per-head split, decompositions), one entry per op in its order: the
name its tensor is dumped under, the op, the innermost module it came from
(``layers.11.feed_forward.w1_conv``, from the node's ``nn_module_stack``) and its axis order. It
is what pairs a dumped tensor with the QDQ graph's node of the same module and op
(:func:`pytest_qnn_genai.checks.layer_gap.compare_ops`), where their order no longer does.
Hazard: it is read by replacing executorch's ``qnn_preprocess.get_qnn_pass_manager_cls`` for the
lowering's duration (restored after), so no other lowering may run in the process meanwhile.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from pytest_qnn_genai.hybrid import DECODE
from pytest_qnn_genai.runtime.intermediates import module_of
from pytest_qnn_genai.sdk import require_active
from pytest_qnn_genai.stages.compile import (
    _compile_specs,
    compile_spec_data,
    lower,
    lowered_names,
)
from pytest_qnn_genai.stages.quantize import QdqArtifacts
from pytest_qnn_genai.targets import Target

DUMPING_PTE = "dumping.pte"
DUMPING_NODES = "dumping.nodes.json"


class NotKvModeError(ValueError):
    """QNN dumps one method's tensors only: the build must be kv mode (its decode graph alone)."""


def compile_dumping(qdq: QdqArtifacts, target: Target, out: Path) -> Path:
    """``qdq``'s decode graph lowered for ``target`` with QNN's tensor dump on, as ``out/``
    :data:`DUMPING_PTE` (module docstring)."""
    if lowered_names(qdq) != (DECODE,):
        raise NotKvModeError(f"{qdq.out_dir}: QNN dumps the tensors of one method only; this "
                             f"build lowers {', '.join(lowered_names(qdq))} (build kv mode)")
    require_active("compilation (QNN lowering)")
    from executorch.backends.qualcomm.serialization.qc_schema_serialize import (
        flatbuffer_to_option,
        option_to_flatbuffer,
    )
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    spec = compile_spec_data(target, (DECODE,))
    specs = []
    for s in _compile_specs(spec, target):
        options = flatbuffer_to_option(s.value)
        options.dump_intermediate_outputs = True
        specs.append(CompileSpec(s.key, option_to_flatbuffer(options)))
    with _recording_qnn_graphs() as graphs:
        buffer = lower(qdq, target, spec, specs, ", dumping its tensors")
    if len(graphs) != 1:
        raise NotKvModeError(f"{qdq.out_dir}: QNN was given {len(graphs)} graphs, not one")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / DUMPING_PTE).write_bytes(buffer)
    (out / DUMPING_NODES).write_text(json.dumps(graphs[0], indent=0))
    return out / DUMPING_PTE


def _describe(graph: torch.fx.GraphModule) -> list[dict[str, object]]:
    """Each op: its dumped name, op, module, and the axis order QNN holds its tensor in (the
    layout pass's ``axis_order``: a conv's NCHW output is dumped NHWC), else ``[]``."""
    return [{"name": n.name, "op": str(n.target), "module": module_of(n),
             "axis_order": list(n.meta.get("axis_order", ()))}
            for n in graph.graph.nodes if n.op == "call_function"]


@contextmanager
def _recording_qnn_graphs() -> Iterator[list[list[dict[str, object]]]]:
    """Each graph the QNN backend builds its ops from while the block runs, as
    :func:`_describe` says it (the pass manager's result, the graph the op builders visit)."""
    from executorch.backends.qualcomm import qnn_preprocess

    graphs: list[list[dict[str, object]]] = []
    original = qnn_preprocess.get_qnn_pass_manager_cls

    def recording(backend_type: object) -> type:
        base = original(backend_type)

        class Recording(base):  # type: ignore[misc, valid-type]
            def transform_for_preprocess_pipeline(self, *args: object,
                                                  **kwargs: object) -> torch.fx.GraphModule:
                graph: torch.fx.GraphModule = super().transform_for_preprocess_pipeline(
                    *args, **kwargs)
                graphs.append(_describe(graph))
                return graph

        return Recording

    qnn_preprocess.get_qnn_pass_manager_cls = recording
    try:
        yield graphs
    finally:
        qnn_preprocess.get_qnn_pass_manager_cls = original
