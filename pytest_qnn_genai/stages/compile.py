"""Stage 3, compile: quantize's files → the hybrid QNN ``.pte`` (two graphs + constant metadata).

Works from a :class:`~pytest_qnn_genai.stages.quantize.QdqArtifacts` directory alone (a fresh
process can run it). Lowering is what the legacy ``HybridTextDecoder.compile`` does: both QDQ
graphs go through one ``to_edge_transform_and_lower_to_qnn`` call with the QNN capture passes,
``TagQuantIO`` tagging the LLM IO (uint16 logits/mask, uint8 or uint16 KV), the decode graph's
metadata as constant methods, then ``to_executorch`` with graph IO left unplanned (the runner owns
those buffers) and ``BuildQuantIo``. QNN refusing a graph at prepare raises
:class:`~pytest_qnn_genai.stages.qnn_refusal.QnnRefusal` with QNN's reason (the cache remembers it).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pytest_qnn_genai.hybrid import KV_MODE, LOWERED_GRAPHS, PREFILL, TEXT_DECODER
from pytest_qnn_genai.sdk import require_active
from pytest_qnn_genai.stages.qnn_refusal import lowering
from pytest_qnn_genai.stages.quantize import (
    QdqArtifacts,
    UnsupportedBackendError,
    check_backend,
    quant_io_tagger,
)
from pytest_qnn_genai.targets import Target
from pytest_qnn_genai.untyped import Upstream

if TYPE_CHECKING:
    from executorch.exir.backend.compile_spec_schema import CompileSpec

__all__ = ["ARTIFACTS_JSON", "COMPILE_SPEC_JSON", "BackendOptions", "CompileSpecData",
           "PteArtifacts", "UnsupportedBackendError", "compile_pte", "compile_spec_data",
           "compile_specs", "pte_filename"]

ARTIFACTS_JSON = "artifacts.json"
COMPILE_SPEC_JSON = "compile_spec.json"


class BackendOptions(TypedDict):
    """The HTP backend options of a compile spec (``generate_htp_compiler_spec``'s)."""

    precision: str  # "quantized" | "fp16"
    use_multi_contexts: bool
    use_weight_sharing: bool
    use_dlbc: bool
    use_slc_allocator: bool
    performance_mode: str  # a QnnExecuTorchHtpPerformanceMode name


class MemoryPlanning(TypedDict):
    alloc_graph_input: bool
    alloc_graph_output: bool


class CompileSpecData(TypedDict):
    """A compile spec as readable data (``compile_spec.json``; a cache-key input)."""

    soc: str
    htp_arch: str
    backend: str
    for_emulator: bool
    backend_options: BackendOptions
    shared_buffer: bool
    use_mha2sha: bool
    online_prepare: bool
    graph_names: list[str]
    memory_planning: MemoryPlanning
    skip_node_op_set: list[str]


def compile_spec_data(target: Target,
                      graph_names: tuple[str, ...] = LOWERED_GRAPHS) -> CompileSpecData:
    """The compile spec for ``target`` as readable data (what the legacy flow would pass).

    The x86 emulator supports neither shared buffers nor weight sharing, so those are on only for
    device targets, as with llama.py's ``--enable_x86_64``.
    """
    check_backend(target.backend)
    on_device = not target.is_emulator
    options: BackendOptions = {
        "precision": "quantized",  # the graphs are QDQ: fp16 would need an unquantized flow
        "use_multi_contexts": False,  # stories-sized models are not sharded
        "use_weight_sharing": on_device,
        "use_dlbc": False,
        "use_slc_allocator": False,
        "performance_mode": "kHtpBurst",
    }
    return {
        "soc": target.soc.name,
        "htp_arch": target.soc.htp_arch,
        "backend": target.backend,
        "for_emulator": target.is_emulator,
        "backend_options": options,
        "shared_buffer": on_device,
        "use_mha2sha": True,
        "online_prepare": False,
        "graph_names": list(graph_names),
        "memory_planning": {"alloc_graph_input": False, "alloc_graph_output": False},
        "skip_node_op_set": ["llama.fallback.default"],
    }


def compile_specs(target: Target, precision: str = "quantized") -> list[CompileSpec]:
    """executorch ``CompileSpec`` list for ``target``: :func:`compile_spec_data` with
    ``precision`` ("quantized" for QDQ graphs, "fp16" for an unquantized module). The one place
    compile specs are made, for the staged flow and the smoke block alike."""
    spec = compile_spec_data(target)
    spec["backend_options"]["precision"] = precision
    return _compile_specs(spec, target)


def _compile_specs(spec: CompileSpecData, target: Target) -> list[CompileSpec]:
    """executorch ``CompileSpec`` list built from :func:`compile_spec_data`'s dict."""
    from executorch.backends.qualcomm.serialization.qc_schema import (
        QnnExecuTorchHtpPerformanceMode,
    )
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
    )

    o = spec["backend_options"]
    backend_options = generate_htp_compiler_spec(
        use_fp16=o["precision"] == "fp16", use_dlbc=o["use_dlbc"],
        use_multi_contexts=o["use_multi_contexts"], use_weight_sharing=o["use_weight_sharing"],
        use_slc_allocator=o["use_slc_allocator"],
        htp_performance_mode=QnnExecuTorchHtpPerformanceMode[o["performance_mode"]])
    specs: list[CompileSpec] = generate_qnn_executorch_compiler_spec(
        soc_model=target.soc.chipset, backend_options=backend_options,
        shared_buffer=spec["shared_buffer"], use_mha2sha=spec["use_mha2sha"],
        online_prepare=spec["online_prepare"])
    return specs


def _passes(qdq: QdqArtifacts, graph: str) -> tuple[Upstream, Upstream]:
    """Capture-program passes and dependency table for one graph, with its IO tagging on."""
    from executorch.backends.qualcomm._passes import TagQuantIO
    from executorch.backends.qualcomm._passes.qnn_pass_manager import get_qnn_pass_manager_cls
    from executorch.backends.qualcomm.utils.constants import (
        QCOM_PASS_ACTIVATE_KEY,
        QCOM_PASS_ARGS_KWARGS_DEFAULTS_KEY,
    )

    manager = get_qnn_pass_manager_cls()
    passes_job = manager.get_capture_program_passes()
    passes_job[TagQuantIO][QCOM_PASS_ACTIVATE_KEY] = True
    passes_job[TagQuantIO][QCOM_PASS_ARGS_KWARGS_DEFAULTS_KEY]["get_quant_io_dtype_fn"] = (
        quant_io_tagger(qdq.data["graphs"][graph]["metadata"], qdq.data["decoder_model"],
                        qdq.data["fixed_point_type"]))
    return passes_job, manager.get_passes_dependency_for_capture_program()


def lowered_names(qdq: QdqArtifacts) -> tuple[str, ...]:
    """The graphs of ``qdq`` a program lowers, in executorch's order (kv mode: decode alone)."""
    return tuple(n for n in LOWERED_GRAPHS if n in qdq.data["graphs"])


def pte_filename(qdq: QdqArtifacts) -> str:
    """The legacy file name, e.g. ``stories260k_hybrid_llama_qnn.pte`` (kv mode: ``_kv_``)."""
    mode = "hybrid" if PREFILL in qdq.data["graphs"] else KV_MODE
    return f"{qdq.data['decoder_model']}_{mode}_llama_qnn.pte"


@dataclass
class PteArtifacts:
    """Compile's files: the .pte, ``artifacts.json`` and ``compile_spec.json``."""

    out_dir: Path
    artifacts: dict[str, str]
    compile_spec: CompileSpecData

    @classmethod
    def load(cls, out_dir: Path) -> PteArtifacts:
        """Open a compile output directory (checks that the listed files exist)."""
        out_dir = Path(out_dir)
        artifacts = json.loads((out_dir / ARTIFACTS_JSON).read_text())
        for key, name in artifacts.items():
            if not (out_dir / name).is_file():
                raise FileNotFoundError(f"{out_dir}: {key} file {name} is missing")
        return cls(out_dir, artifacts, json.loads((out_dir / COMPILE_SPEC_JSON).read_text()))

    @property
    def pte(self) -> Path:
        """The hybrid text-decoder program."""
        return self.out_dir / self.artifacts[TEXT_DECODER]


def lower(qdq: QdqArtifacts, target: Target, spec: CompileSpecData,
          compile_specs: list[CompileSpec], what: str = "") -> bytes:
    """The program of ``qdq``'s graphs ``spec`` names, lowered for ``target`` with
    ``compile_specs`` (``what``: said beside the model in the lowering's messages)."""
    from executorch.backends.qualcomm._passes.build_quant_io import BuildQuantIo
    from executorch.backends.qualcomm.utils.utils import to_edge_transform_and_lower_to_qnn
    from executorch.exir.capture._config import ExecutorchBackendConfig
    from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass

    names = spec["graph_names"]
    jobs = {name: _passes(qdq, name) for name in names}
    with lowering(f"{qdq.data['decoder_model']} for {target.soc.name}-{target.backend}{what}"):
        edge = to_edge_transform_and_lower_to_qnn(
            module={name: qdq.graph(name) for name in names},
            inputs={name: qdq.example_inputs(name) for name in names},
            compiler_specs={name: compile_specs for name in names},
            constant_methods=dict(qdq.metadata),
            dep_table={name: jobs[name][1] for name in names},
            passes_job={name: jobs[name][0] for name in names},
            skip_node_op_set=set(spec["skip_node_op_set"]),
        )
    program = edge.to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(**spec["memory_planning"]),
        passes=[BuildQuantIo()]))
    buffer: bytes = program.buffer
    return buffer


def compile_pte(qdq: QdqArtifacts, target: Target, out_dir: Path) -> PteArtifacts:
    """Lower ``qdq``'s prefill and decode graphs (kv mode: its decode graph) for ``target`` into
    one ``.pte``.

    Needs an active QNN SDK (:func:`pytest_qnn_genai.sdk.activate`).
    """
    spec = compile_spec_data(target, lowered_names(qdq))
    if (qdq.data["soc"], qdq.data["backend"]) != (target.soc.name, target.backend):
        raise ValueError(f"{qdq.out_dir} was quantized for {qdq.data['soc']}/{qdq.data['backend']}"
                         f", not {target.soc.name}/{target.backend}: quantize for this target")
    require_active("compilation (QNN lowering)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / ARTIFACTS_JSON).unlink(missing_ok=True)  # written last: marks a complete run
    buffer = lower(qdq, target, spec, _compile_specs(spec, target))
    pte = pte_filename(qdq)
    (out_dir / pte).write_bytes(buffer)
    (out_dir / COMPILE_SPEC_JSON).write_text(json.dumps(spec, indent=1))
    artifacts = {TEXT_DECODER: pte}
    (out_dir / ARTIFACTS_JSON).write_text(json.dumps(artifacts, indent=1))
    return PteArtifacts(out_dir, artifacts, spec)
