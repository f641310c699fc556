"""What a .pte file holds: methods, their IO tensors, constant values, delegates and CPU operators.

Tensor metadata comes from the ExecuTorch runtime (``executorch.runtime.Runtime``); delegate ids,
value kinds and the non-delegated operators come from the serialized program. Graph methods are
never loaded here, so no QNN library is needed to inspect a QNN .pte.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from pytest_qnn_genai.runtime import programs
from pytest_qnn_genai.runtime.programs import MethodMeta, Program
from pytest_qnn_genai.untyped import Json

# ExecuTorch ScalarType codes (runtime/core/portable_type/scalar_type.h) -> torch dtype.
_TORCH_DTYPES: dict[int, torch.dtype] = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
    5: torch.float16, 6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16,
    27: torch.uint16, 28: torch.uint32, 29: torch.uint64,
}


class PteInfoError(ValueError):
    """A file that is not a readable ExecuTorch program (reported as one line)."""


def torch_dtype(code: int) -> torch.dtype:
    """The torch dtype of an ExecuTorch ScalarType code."""
    try:
        return _TORCH_DTYPES[int(code)]
    except KeyError:
        raise PteInfoError(f"unsupported ExecuTorch scalar type code {code}") from None


def dtype_name(code: int) -> str:
    """Short dtype name of an ExecuTorch ScalarType code, e.g. ``"uint16"``."""
    dt = _TORCH_DTYPES.get(int(code))
    return str(dt).removeprefix("torch.") if dt is not None else f"scalar_type_{int(code)}"


@dataclass(frozen=True)
class TensorMeta:
    """One method input or output: a tensor (dtype, shape) or a non-tensor value kind."""

    dtype: str  # "uint16", ...; for non-tensor values the value kind ("int", "float", "bool")
    shape: tuple[int, ...] = ()
    is_tensor: bool = True


@dataclass(frozen=True)
class MethodInfo:
    """One method of the program."""

    name: str
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]
    delegates: tuple[str, ...]  # backend ids of the method's delegate calls, e.g. ("QnnBackend",)
    cpu_operators: tuple[str, ...]  # non-delegated kernels, e.g. ("aten::add.out",)
    qnn_options: tuple[dict[str, Json], ...] = ()  # each QnnBackend delegate's compile options

    @property
    def is_constant(self) -> bool:
        """A method with no inputs whose outputs are metadata values (``get_max_seq_len``...)."""
        return not self.inputs


@dataclass(frozen=True)
class PteInfo:
    """Everything :func:`inspect_pte` reads from a .pte file."""

    path: Path
    size_bytes: int
    methods: dict[str, MethodInfo]
    constants: dict[str, Json] = field(default_factory=dict)  # constant method -> value(s)
    plan_order: tuple[str, ...] = ()  # method names as the program stores them (method indices)

    @property
    def method_names(self) -> list[str]:
        return sorted(self.methods)

    @property
    def graph_methods(self) -> list[str]:
        """Methods that take inputs (the model's computation graphs)."""
        return sorted(n for n, m in self.methods.items() if not m.is_constant)

    @property
    def delegates(self) -> set[str]:
        """All backend ids used anywhere in the program."""
        return {d for m in self.methods.values() for d in m.delegates}


def _plain(value: object) -> Json:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def constant_values(program: Program) -> dict[str, Json]:
    """Execute every input-less method of a loaded ``executorch.runtime.Program``.

    A single output is returned as its value, several outputs as a list.
    """
    out: dict[str, Json] = {}
    for name in sorted(program.method_names):
        if program.metadata(name).num_inputs() != 0:
            continue
        values = [_plain(v) for v in program.load_method(name).execute([])]
        out[name] = values[0] if len(values) == 1 else values
    return out


# The flatbuffer program as executorch.exir.schema decodes it, by what this module reads of it.
class _EValue(Protocol):
    val: object  # Tensor, Int, Double, ...: its class names the kind


class _Instruction(Protocol):
    instr_args: object  # KernelCall (op_index), DelegateCall (delegate_index), ...


class _Chain(Protocol):
    instructions: Sequence[_Instruction]


class _Operator(Protocol):
    name: str
    overload: str


class _CompileSpec(Protocol):
    key: str
    value: bytes


class _Delegate(Protocol):
    id: str
    compile_specs: Sequence[_CompileSpec]


class ExecutionPlan(Protocol):
    """One method's plan in the flatbuffer."""

    name: str
    inputs: Sequence[int]  # indices into ``values``
    outputs: Sequence[int]
    values: Sequence[_EValue]
    chains: Sequence[_Chain]
    operators: Sequence[_Operator]
    delegates: Sequence[_Delegate]


class SerializedProgram(Protocol):
    execution_plan: Sequence[ExecutionPlan]


_VALUE_KINDS = {"Int": "int", "Double": "float", "Bool": "bool", "String": "str", "Null": "none"}


def _value_kinds(plan: ExecutionPlan, indices: list[int]) -> list[str]:
    return [type(plan.values[i].val).__name__ for i in indices]


def _io_meta(meta: MethodMeta, kinds: list[str], output: bool) -> tuple[TensorMeta, ...]:
    items = []
    for i, kind in enumerate(kinds):
        if kind == "Tensor":  # never ask the runtime for tensor meta of a non-tensor: it crashes
            ti = meta.output_tensor_meta(i) if output else meta.input_tensor_meta(i)
            items.append(TensorMeta(dtype_name(ti.dtype()), tuple(int(s) for s in ti.sizes())))
        else:
            items.append(TensorMeta(_VALUE_KINDS.get(kind, kind.lower()), (), False))
    return tuple(items)


def _called(plan: ExecutionPlan, kind: str, index_field: str) -> set[int]:
    """Indices (``index_field``) of every ``kind`` instruction in the plan's chains."""
    return {getattr(instr.instr_args, index_field) for chain in plan.chains
            for instr in chain.instructions if type(instr.instr_args).__name__ == kind}


def _operator_names(plan: ExecutionPlan) -> tuple[str, ...]:
    ops = (plan.operators[i] for i in _called(plan, "KernelCall", "op_index"))
    return tuple(sorted({f"{op.name}.{op.overload}" if op.overload else op.name for op in ops}))


def _delegate_ids(plan: ExecutionPlan) -> tuple[str, ...]:
    used = _called(plan, "DelegateCall", "delegate_index")
    return tuple(sorted({plan.delegates[i].id for i in used}))


def _enum_names(value: object) -> Json:
    """A decoded options dataclass as plain data: enums by name, nested dataclasses as dicts."""
    from dataclasses import fields, is_dataclass
    from enum import Enum

    if isinstance(value, Enum):
        return value.name
    if is_dataclass(value):
        return {f.name: _enum_names(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [_enum_names(v) for v in value]
    return value


def _qnn_options(plan: ExecutionPlan) -> tuple[dict[str, Json], ...]:
    """The compile options each QnnBackend delegate of the plan was lowered with, decoded from the
    ``qnn_compile_spec`` flatbuffer the program carries (what the device will be told)."""
    from executorch.backends.qualcomm.serialization.qc_schema_serialize import (
        flatbuffer_to_option,
    )

    out = []
    for i in sorted(_called(plan, "DelegateCall", "delegate_index")):
        delegate = plan.delegates[i]
        if delegate.id != "QnnBackend":
            continue
        for spec in delegate.compile_specs:
            if spec.key == "qnn_compile_spec":
                out.append(_enum_names(flatbuffer_to_option(bytes(spec.value))))
    return tuple(out)


def _deserialize(data: bytes) -> SerializedProgram:
    from executorch.exir._serialize._program import deserialize_pte_binary

    result = deserialize_pte_binary(data)
    program: SerializedProgram = getattr(result, "program", result)
    return program


def inspect_pte(path: Path | str) -> PteInfo:
    """Read methods, IO tensor metadata, constant values, delegates and CPU operators of a .pte."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PteInfoError(f"{path}: cannot read ({e.strerror})") from None
    if data[4:6] != b"ET":  # the flatbuffer file identifier, "ET12" for this schema
        raise PteInfoError(f"{path}: not an ExecuTorch program (no 'ET' file identifier)")
    try:
        serialized = _deserialize(data)
        plans = {plan.name: plan for plan in serialized.execution_plan}
        program = programs.load(path)[0].program
    except Exception as e:  # noqa: BLE001 - any parse failure: not a program
        raise PteInfoError(f"{path}: not an ExecuTorch program ({type(e).__name__}: {e})") from None
    methods: dict[str, MethodInfo] = {}
    for name in sorted(program.method_names):
        plan, meta = plans[name], program.metadata(name)
        methods[name] = MethodInfo(
            name=name,
            inputs=_io_meta(meta, _value_kinds(plan, list(plan.inputs)), output=False),
            outputs=_io_meta(meta, _value_kinds(plan, list(plan.outputs)), output=True),
            delegates=_delegate_ids(plan),
            cpu_operators=_operator_names(plan),
            qnn_options=_qnn_options(plan),
        )
    return PteInfo(path=path, size_bytes=len(data), methods=methods,
                   constants=constant_values(program),
                   plan_order=tuple(plan.name for plan in serialized.execution_plan))


def compile_options(path: Path | str) -> dict[str, Json]:
    """The QNN compile options the program was lowered with: the one set every QnnBackend
    delegate carries (:class:`PteInfoError` when there is none, or the delegates disagree)."""
    info = inspect_pte(path)
    found = {m: opts for m, meth in info.methods.items() for opts in meth.qnn_options}
    if not found:
        raise PteInfoError(f"{path}: no QnnBackend delegate with QNN compile options")
    first_method, first = next(iter(found.items()))
    for method, opts in found.items():
        if opts != first:
            raise PteInfoError(f"{path}: QnnBackend delegates of {first_method} and {method} "
                               "were lowered with different compile options")
    return first
