"""The process-wide set of loaded ExecuTorch programs.

The QNN backend shares one delegate handle between every load of the same context binary in a
process and deletes it when any of those loads is freed, which breaks the others ("execute failed
with error 0x1", "DelegateHandle has been deleted"). So every .pte this package runs is loaded here,
once per content, and kept for the life of the process.
"""
from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.untyped import Upstream

if TYPE_CHECKING:
    import torch


class TensorInfo(Protocol):
    """``executorch.runtime``'s ``TensorInfo`` of one method input or output."""

    def dtype(self) -> int: ...  # an ExecuTorch ScalarType code

    def sizes(self) -> Sequence[int]: ...


class MethodMeta(Protocol):
    """``executorch.runtime``'s ``MethodMeta``: a method's IO, read without loading it."""

    def num_inputs(self) -> int: ...

    def num_outputs(self) -> int: ...

    def input_tensor_meta(self, index: int) -> TensorInfo: ...

    def output_tensor_meta(self, index: int) -> TensorInfo: ...


class Method(Protocol):
    """A loaded ``executorch.runtime.Method``. Its outputs are EValues: tensors of a graph
    method, Python scalars of a constant method, so the caller says which it reads."""

    def execute(self, inputs: Sequence[object]) -> list[Upstream]: ...


class Program(Protocol):
    """A loaded ``executorch.runtime.Program``."""

    @property
    def method_names(self) -> Collection[str]: ...

    def metadata(self, method_name: str) -> MethodMeta: ...

    def load_method(self, name: str) -> Method: ...


@dataclass
class LoadedProgram:
    """A loaded program, its loaded methods and what loading them cost."""

    program: Program
    program_s: float  # load_program time
    methods: dict[str, Method] = field(default_factory=dict)
    methods_s: float = 0.0  # load_method time of the methods loaded through :func:`load`


_PROGRAMS: dict[str, LoadedProgram] = {}


def load(path: Path | str, methods: Sequence[str] = ()) -> tuple[LoadedProgram, bool]:
    """The process-wide load of ``path``'s program with ``methods`` loaded; True if reused."""
    from executorch.runtime import Runtime

    key = file_sha256(Path(path))
    reused = key in _PROGRAMS
    if not reused:
        start = time.perf_counter()
        program = Runtime.get().load_program(str(path))
        _PROGRAMS[key] = LoadedProgram(program, time.perf_counter() - start)
    entry = _PROGRAMS[key]
    todo = [m for m in methods if m not in entry.methods]
    if todo:
        start = time.perf_counter()
        entry.methods.update({m: entry.program.load_method(m) for m in todo})
        entry.methods_s += time.perf_counter() - start
    return entry, reused


def method(path: Path | str, name: str) -> Method:
    """A loaded method of ``path``'s program (loaded once per process)."""
    return load(path, (name,))[0].methods[name]


def run_method(pte: Path, inputs: Sequence[torch.Tensor], name: str = "forward") -> list[torch.Tensor]:
    """Execute one method of a .pte with ``executorch.runtime`` (the x86 HTP emulator for QNN)."""
    return list(method(pte, name).execute(list(inputs)))
