"""Where two ``.pte`` files differ, part by part, or that they do not: their bytes, not their size.

:func:`compare` calls two programs identical only when their sha256 digests are equal, taken over
every byte but the QNN blobs' build stamps (the wall time ExecuTorch writes into each context
protocol header: :func:`pytest_qnn_genai.sdk.context_binary.build_stamps`; two builds of one
program differ there and nowhere else, measured). Otherwise it deserializes both (executorch's
``deserialize_pte_binary``, which folds every segment back into the program) and names each part
that differs, one line each: a method's execution plan (the first differing field, as a path into
the plan), a delegate's processed blob by method and delegate index (for ``QnnBackend`` the QNN
context binary inside it, unwrapped with
:func:`pytest_qnn_genai.sdk.context_binary.strip_protocol`), a constant or mutable-data buffer by
index, a named-data entry by key, any other program field. A blob's line gives its size in each
file, how many bytes differ and the first differing offset; a QNN context binary is opaque (no
schema the harness can parse), so an offset into it is the finest location there is. When every
parsed part is equal and the files still differ, the difference is in the container (the extended
header, padding between segments, the flatbuffer's layout), named with the first differing file
offset. A restored constant buffer runs to the next one's start, so its padding counts as its own.

Hazard: comparing byte counts. A program's size follows its graphs' shapes and bit widths, which
two flows share whatever their values, so a size check passed programs that differ (the 135M
case's two flows: one byte count, two sha256 digests). Comparing raw file digests fails the other
way: every build stamps its own time, so two builds of one program never match.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from pytest_qnn_genai.sdk.context_binary import (
    ContextBinaryError,
    strip_protocol,
    without_build_stamps,
)

QNN = "QnnBackend"
MAX_LINES = 10  # lines per kind of part; the rest are counted in one more line
_HANDLED = frozenset({"execution_plan", "constant_buffer", "backend_delegate_data"})


# The deserialized program (executorch.exir.schema and _serialize), by what this module reads.
class _Buffer(Protocol):
    storage: bytes


class _InlineData(Protocol):
    data: bytes


class _DataReference(Protocol):
    index: int


class _Delegate(Protocol):
    id: str
    processed: _DataReference


class _Plan(Protocol):
    name: str
    delegates: Sequence[_Delegate]


class _Program(Protocol):
    execution_plan: Sequence[_Plan]
    constant_buffer: Sequence[_Buffer]
    backend_delegate_data: Sequence[_InlineData]


class _DataEntry(Protocol):
    buffer_index: int


class _NamedData(Protocol):
    buffers: Sequence[bytes]
    pte_data: Mapping[str, _DataEntry]


class _PteFile(Protocol):
    program: _Program
    mutable_data: Sequence[_Buffer] | None
    named_data: _NamedData | None


@dataclass(frozen=True)
class ProgramDiff:
    """Two programs' sha256 digests (hex, build stamps zeroed) and byte counts, and one line per
    part that differs (empty when the digests are equal)."""

    sha256: tuple[str, str]
    sizes: tuple[int, int]
    parts: tuple[str, ...] = ()

    @property
    def identical(self) -> bool:
        return self.sha256[0] == self.sha256[1]


def byte_difference(a: bytes, b: bytes) -> tuple[int, int]:
    """How many bytes of ``a`` and ``b`` differ (a byte only one holds counts), and the offset
    of the first (``(0, -1)`` when equal)."""
    n = min(len(a), len(b))
    differ = np.frombuffer(a, np.uint8, n) != np.frombuffer(b, np.uint8, n)
    count = int(differ.sum()) + abs(len(a) - len(b))
    if not count:
        return 0, -1
    return count, int(differ.argmax()) if differ.any() else n


def blob_line(what: str, a: bytes, b: bytes, labels: tuple[str, str]) -> str:
    """One line saying where two blobs differ: their sizes, the differing bytes, the first."""
    count, first = byte_difference(a, b)
    noun = "byte differs" if count == 1 else "bytes differ"
    return (f"{what}: {len(a)} bytes in {labels[0]}, {len(b)} in {labels[1]}; {count} {noun}, "
            f"first at offset {first}")


def delegate_line(what: str, delegate_id: str, a: bytes, b: bytes,
                  labels: tuple[str, str]) -> str:
    """Where two processed blobs of a delegate differ: a QnnBackend blob's context binary, or
    the protocol header around it when the binaries are equal."""
    if delegate_id == QNN:
        try:
            binary_a, binary_b = strip_protocol(a), strip_protocol(b)
        except ContextBinaryError as e:
            return blob_line(f"{what} ({delegate_id}, no context binary: {e})", a, b, labels)
        if binary_a != binary_b:
            return blob_line(f"{what} QNN context binary", binary_a, binary_b, labels)
        return blob_line(f"{what} ({QNN}) protocol header, context binary identical",
                         a, b, labels)
    return blob_line(f"{what} ({delegate_id}) processed blob", a, b, labels)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def first_field_difference(a: object, b: object, path: str = "") -> str | None:
    """The first place two deserialized values differ, as ``path: A vs B`` (None when equal):
    dataclasses by field, sequences by item, bytes by offset, a NaN equal to a NaN."""
    if a is b:
        return None
    where = path or "<root>"
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} {_short(a)} vs {type(b).__name__} {_short(b)}"
    if isinstance(a, (bytes, bytearray)) and isinstance(b, (bytes, bytearray)):
        count, first = byte_difference(bytes(a), bytes(b))
        return None if not count else (
            f"{where}: {len(a)} vs {len(b)} bytes, {count} differ, first at offset {first}")
    if is_dataclass(a) and not isinstance(a, type):
        for f in fields(a):
            found = first_field_difference(getattr(a, f.name), getattr(b, f.name),
                                           f"{path}.{f.name}" if path else f.name)
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_field_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{where}: {len(a)} vs {len(b)} items"
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return None
    return None if a == b else f"{where}: {_short(a)} vs {_short(b)}"


def _capped(lines: list[str], kind: str) -> Iterator[str]:
    yield from lines[:MAX_LINES]
    if len(lines) > MAX_LINES:
        yield f"... and {len(lines) - MAX_LINES} more {kind} differ"


def _plans(a: _Program, b: _Program, labels: tuple[str, str]) -> Iterator[str]:
    plans_a = {p.name: p for p in a.execution_plan}
    plans_b = {p.name: p for p in b.execution_plan}
    for name in sorted(plans_a.keys() ^ plans_b.keys()):
        yield f"method {name}: only in {labels[0] if name in plans_a else labels[1]}"
    order_a = [p.name for p in a.execution_plan if p.name in plans_b]
    order_b = [p.name for p in b.execution_plan if p.name in plans_a]
    if order_a != order_b:
        yield f"method order: {order_a} in {labels[0]}, {order_b} in {labels[1]}"
    blobs: list[str] = []
    for name in order_a:
        pa, pb = plans_a[name], plans_b[name]
        found = first_field_difference(pa, pb)
        if found:
            yield f"method {name}: execution plan differs at {found}"
        for i, (da, db) in enumerate(zip(pa.delegates, pb.delegates)):
            data_a = a.backend_delegate_data[da.processed.index].data
            data_b = b.backend_delegate_data[db.processed.index].data
            if da.id == db.id and data_a != data_b:
                blobs.append(delegate_line(f"method {name} delegate {i}", da.id, data_a, data_b,
                                           labels))
    yield from _capped(blobs, "delegate blobs")


def _buffers(kind: str, a: Sequence[_Buffer], b: Sequence[_Buffer],
             labels: tuple[str, str]) -> Iterator[str]:
    if len(a) != len(b):
        yield f"{kind}s: {len(a)} in {labels[0]}, {len(b)} in {labels[1]}"
    yield from _capped([blob_line(f"{kind} {i}", x.storage, y.storage, labels)
                        for i, (x, y) in enumerate(zip(a, b)) if x.storage != y.storage],
                       f"{kind}s")


def _named(a: _NamedData | None, b: _NamedData | None, labels: tuple[str, str]) -> Iterator[str]:
    data_a = {k: bytes(a.buffers[e.buffer_index]) for k, e in a.pte_data.items()} if a else {}
    data_b = {k: bytes(b.buffers[e.buffer_index]) for k, e in b.pte_data.items()} if b else {}
    for key in sorted(data_a.keys() ^ data_b.keys()):
        yield f"named data {key!r}: only in {labels[0] if key in data_a else labels[1]}"
    yield from _capped([blob_line(f"named data {key!r}", data_a[key], data_b[key], labels)
                        for key in sorted(data_a.keys() & data_b.keys())
                        if data_a[key] != data_b[key]], "named data entries")


def part_differences(a: _PteFile, b: _PteFile,
                     labels: tuple[str, str] = ("a", "b")) -> list[str]:
    """One line per part of two deserialized programs that differs (module docstring)."""
    lines = list(_plans(a.program, b.program, labels))
    lines += _buffers("constant buffer", a.program.constant_buffer, b.program.constant_buffer,
                      labels)
    lines += _buffers("mutable data buffer", a.mutable_data or [], b.mutable_data or [], labels)
    lines += _named(a.named_data, b.named_data, labels)
    if is_dataclass(a.program):
        for f in fields(a.program):
            if f.name not in _HANDLED:
                found = first_field_difference(getattr(a.program, f.name),
                                               getattr(b.program, f.name), f"program.{f.name}")
                lines += [found] if found else []
    return lines


def compare(a: Path | str, b: Path | str, labels: tuple[str, str] = ("a", "b")) -> ProgramDiff:
    """Whether two ``.pte`` files are byte-identical, and if not, where they differ (module
    docstring); ``labels`` name the two files in the lines (``("legacy", "new")``)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    data_a, data_b = (without_build_stamps(Path(p).read_bytes()) for p in (a, b))
    digests = (hashlib.sha256(data_a).hexdigest(), hashlib.sha256(data_b).hexdigest())
    sizes = (len(data_a), len(data_b))
    if digests[0] == digests[1]:
        return ProgramDiff(digests, sizes)
    _, first = byte_difference(data_a, data_b)
    parsed: list[_PteFile] = []
    for label, data in zip(labels, (data_a, data_b)):
        try:
            parsed.append(deserialize_pte_binary(data))
        except Exception as e:  # noqa: BLE001 - any parse failure: say so, with the offset
            return ProgramDiff(digests, sizes, (
                f"{label}: not a readable ExecuTorch program ({type(e).__name__}: {e}); the "
                f"files first differ at offset {first}",))
    parts = part_differences(parsed[0], parsed[1], labels)
    if not parts:
        parts = [f"container (extended header, segment padding or flatbuffer layout): every "
                 f"parsed part is equal; the files first differ at offset {first}"]
    return ProgramDiff(digests, sizes, tuple(parts))
