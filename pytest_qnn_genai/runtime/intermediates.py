"""One call of a tensor-dumping program (:mod:`pytest_qnn_genai.stages.compile_dumping`) on the
emulator, and the tensors QNN wrote: by name, raw.

Contract: :func:`dump_call` loads the program with ETDump and a debug buffer, executes its one
method once on the given (quantized) inputs and returns its outputs and every tensor the QNN
graph dumped, named
as the QNN tensor (``aten_add_tensor_23``, the ``@0`` suffix dropped), as stored: quantized
integers, in the graph's layout. Dequantizing them is the caller's business (the QDQ graph holds
each output's encoding). Hazard: the debug buffer holds every tensor of the call, caches
included; a buffer too small for them loses tensors silently, so its size is taken from the
program's own inputs and checked against what was written.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from pytest_qnn_genai.runtime.pte_info import torch_dtype

BUFFER_PER_INPUT_BYTE = 64  # debug-buffer bytes per byte of the call's inputs (measured: ~12)


def module_of(node: torch.fx.Node) -> str:
    """The innermost module ``node`` was traced in (its ``nn_module_stack``'s last path:
    ``layers.11.feed_forward.w1_conv``), or ``""``: what names a dumped tensor's op in both the
    graph QNN was given and the QDQ graph it came from."""
    stack = node.meta.get("nn_module_stack") or {}
    return str(list(stack.values())[-1][0]) if stack else ""


class DumpError(RuntimeError):
    """The dump is missing or incomplete (one line)."""


def dump_call(pte: Path, method: str, inputs: Sequence[torch.Tensor],
              ) -> tuple[list[torch.Tensor], dict[str, np.ndarray]]:
    """One call of ``method`` on ``inputs``: its outputs, and every tensor QNN dumped in it
    (module docstring)."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
    from executorch.runtime import Runtime, Verification

    size = max(1 << 24, BUFFER_PER_INPUT_BYTE * sum(t.numel() * t.element_size() for t in inputs))
    program = Runtime.get().load_program(Path(pte), verification=Verification.Minimal,
                                         enable_etdump=True, debug_buffer_size=size)
    outputs = list(program.load_method(method).execute(list(inputs)))
    with tempfile.TemporaryDirectory(prefix="qnn-dump-") as tmp:
        etdump, debug = Path(tmp) / "etdump.etdp", Path(tmp) / "debug.bin"
        program.write_etdump_result_to_file(str(etdump), str(debug))
        dump = deserialize_from_etdump_flatcc(etdump.read_bytes())
        buffer = debug.read_bytes()
    out: dict[str, np.ndarray] = {}
    for run in dump.run_data:
        for event in run.events:
            debug_event = event.debug_event
            tensor = None if debug_event is None else debug_event.debug_entry.tensor
            if debug_event is None or tensor is None or not debug_event.delegate_debug_id_str:
                continue
            dtype = torch.empty(0, dtype=torch_dtype(int(tensor.scalar_type))).numpy().dtype
            count = int(np.prod(tensor.sizes))
            end = tensor.offset + count * dtype.itemsize
            if end > len(buffer):
                raise DumpError(f"{Path(pte).name}: the debug buffer ({size:,} B) ends before "
                                f"{debug_event.delegate_debug_id_str} (at {end:,} B)")
            name = debug_event.delegate_debug_id_str.rsplit("@", 1)[0]
            out[name] = np.frombuffer(buffer, dtype, count, tensor.offset).reshape(tensor.sizes)
    if not out:
        raise DumpError(f"{Path(pte).name}: no tensor was dumped (not a dumping build?)")
    return outputs, out
