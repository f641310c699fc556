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
"""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.hybrid import DECODE
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
    buffer = lower(qdq, target, spec, specs, ", dumping its tensors")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / DUMPING_PTE).write_bytes(buffer)
    return out / DUMPING_PTE
