"""Two .pte files are identical only when their bytes are: one flipped byte of a same-sized
program fails, naming the part it is in (a constant buffer, a delegate's QNN context binary, a
named-data entry, a method's plan, or the container around them), on real ExecuTorch programs
built here without QNN."""
from __future__ import annotations

import copy
import struct
from pathlib import Path

import pytest
import torch
from executorch.exir import to_edge
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir._serialize._program import (
    PTEFile,
    deserialize_pte_binary,
    serialize_pte_binary,
)
from executorch.exir.schema import (
    BackendDelegate,
    BackendDelegateDataReference,
    BackendDelegateInlineData,
    CompileSpec,
    DataLocation,
)

from pytest_qnn_genai.checks import parity, program_bytes
from pytest_qnn_genai.models.spec import ParityTolerance
from pytest_qnn_genai.sdk.context_binary import CONTEXT_BINARY_ALIGNMENT, CONTEXT_PROTOCOL_MAGIC

LABELS = ("legacy", "new")


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * 2


@pytest.fixture(scope="module")
def tiny() -> tuple[bytes, bytes]:
    """A real program's bytes (torch.export, to_edge, to_executorch) and its linear weight's."""
    torch.manual_seed(0)
    module = Tiny().eval()
    program = to_edge(torch.export.export(module, (torch.randn(2, 4),))).to_executorch()
    return bytes(program.buffer), module.lin.weight.detach().numpy().tobytes()


def _write(folder: Path, name: str, data: bytes) -> Path:
    (folder / name).write_bytes(data)
    return folder / name


def _serialize(pte: PTEFile) -> bytes:
    return bytes(serialize_pte_binary(pte, extract_delegate_segments=True))


def _flip(data: bytes, offset: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 0x01
    return bytes(out)


def _qnn_blob(binary: bytes, signature: int = 7) -> bytes:
    """A QnnBackend processed blob: executorch's context protocol header, zeros, the binary."""
    header = struct.pack("<IqQ", CONTEXT_PROTOCOL_MAGIC, signature, len(binary))
    return header + bytes(CONTEXT_BINARY_ALIGNMENT - len(header)) + binary


def _with_qnn_delegate(data: bytes, blob: bytes) -> PTEFile:
    """The program with one QnnBackend delegate holding ``blob`` added to its method."""
    pte = deserialize_pte_binary(data)
    program = pte.program
    program.backend_delegate_data.append(BackendDelegateInlineData(data=blob))
    program.execution_plan[0].delegates.append(BackendDelegate(
        id="QnnBackend", compile_specs=[CompileSpec("qnn_compile_spec", b"\x01")],
        processed=BackendDelegateDataReference(location=DataLocation.INLINE,
                                               index=len(program.backend_delegate_data) - 1)))
    return pte


def test_the_same_file_twice_is_identical(tmp_path: Path, tiny: tuple[bytes, bytes]) -> None:
    data, _ = tiny
    diff = program_bytes.compare(_write(tmp_path, "a.pte", data), _write(tmp_path, "b.pte", data))
    assert diff.identical and diff.parts == () and diff.sizes == (len(data), len(data))
    assert all(c.ok for c in parity.compare_pte(tmp_path / "a.pte", tmp_path / "b.pte"))


def test_one_flipped_weight_byte_names_the_constant_buffer(tmp_path: Path,
                                                           tiny: tuple[bytes, bytes]) -> None:
    data, weight = tiny
    at = data.find(weight)
    assert at > 0 and data.count(weight) == 1
    buffers = [b.storage for b in deserialize_pte_binary(data).program.constant_buffer]
    index = next(i for i, b in enumerate(buffers) if b.startswith(weight))
    flipped = _flip(data, at + 5)
    diff = program_bytes.compare(_write(tmp_path, "a.pte", data),
                                 _write(tmp_path, "b.pte", flipped), LABELS)
    assert not diff.identical and diff.sizes == (len(data), len(data))
    assert diff.parts == (f"constant buffer {index}: {len(buffers[index])} bytes in legacy, "
                          f"{len(buffers[index])} in new; 1 byte differs, first at offset 5",)


def test_a_byte_outside_every_parsed_part_is_the_container(tmp_path: Path,
                                                           tiny: tuple[bytes, bytes]) -> None:
    data, _ = tiny
    # the extended header ("eh00" at 8): program size, then the first segment's offset; the
    # zeros between the flatbuffer and the first segment belong to no part
    assert data[8:12] == b"eh00"
    program_size, segment_base = struct.unpack_from("<QQ", data, 16)
    assert segment_base > program_size and not any(data[program_size:segment_base])
    diff = program_bytes.compare(_write(tmp_path, "a.pte", data),
                                 _write(tmp_path, "b.pte", _flip(data, program_size + 1)))
    assert diff.parts == ("container (extended header, segment padding or flatbuffer layout): "
                          f"every parsed part is equal; the files first differ at offset "
                          f"{program_size + 1}",)


def test_a_qnn_context_binary_is_named_by_method_and_delegate(tmp_path: Path,
                                                              tiny: tuple[bytes, bytes]) -> None:
    data, _ = tiny
    binary = bytes(range(200))
    legacy = _serialize(_with_qnn_delegate(data, _qnn_blob(binary)))
    new = _serialize(_with_qnn_delegate(data, _qnn_blob(_flip(binary, 17))))
    assert len(legacy) == len(new)
    diff = program_bytes.compare(_write(tmp_path, "a.pte", legacy),
                                 _write(tmp_path, "b.pte", new), LABELS)
    assert diff.parts == ("method forward delegate 0 QNN context binary: 200 bytes in legacy, "
                          "200 in new; 1 byte differs, first at offset 17",)
    # the same binary with another build stamp (the protocol header's signature: the build's
    # wall time): another file, the same program
    stamped = _serialize(_with_qnn_delegate(data, _qnn_blob(binary, signature=8)))
    assert stamped != legacy and len(stamped) == len(legacy)
    diff = program_bytes.compare(tmp_path / "a.pte", _write(tmp_path, "c.pte", stamped))
    assert diff.identical and diff.parts == ()


def test_blob_difference_counts_bytes_one_side_lacks() -> None:
    assert program_bytes.byte_difference(b"abc", b"abc") == (0, -1)
    assert program_bytes.byte_difference(b"abcd", b"abXdEF") == (3, 2)
    assert program_bytes.byte_difference(b"ab", b"abcd") == (2, 2)
    assert program_bytes.delegate_line("m delegate 1", "QnnBackend", b"\x00" * 30, b"\x01" * 30,
                                       LABELS).startswith(
        "m delegate 1 (QnnBackend, no context binary: QnnBackend blob starts with 0x00000000")


def test_named_data_is_named_by_key(tmp_path: Path, tiny: tuple[bytes, bytes]) -> None:
    data, _ = tiny

    def with_named(blob: bytes) -> bytes:
        store = NamedDataStore()
        store.add_named_data("shared_weights", blob)
        pte = deserialize_pte_binary(data)
        return _serialize(PTEFile(program=pte.program,
                                  named_data=store.get_named_data_store_output()))

    blob = bytes(range(64))
    diff = program_bytes.compare(_write(tmp_path, "a.pte", with_named(blob)),
                                 _write(tmp_path, "b.pte", with_named(_flip(blob, 3))), LABELS)
    assert diff.parts == ("named data 'shared_weights': 64 bytes in legacy, 64 in new; 1 byte "
                          "differs, first at offset 3",)


def test_a_plan_difference_names_the_method_and_field(tmp_path: Path,
                                                      tiny: tuple[bytes, bytes]) -> None:
    data, _ = tiny
    pte = deserialize_pte_binary(data)
    other = copy.deepcopy(pte)
    sizes = other.program.execution_plan[0].non_const_buffer_sizes
    sizes[-1] += 16
    diff = program_bytes.compare(_write(tmp_path, "a.pte", _serialize(pte)),
                                 _write(tmp_path, "b.pte", _serialize(other)), LABELS)
    assert diff.parts == (f"method forward: execution plan differs at non_const_buffer_sizes["
                          f"{len(sizes) - 1}]: {sizes[-1] - 16} vs {sizes[-1]}",)


def test_equal_sizes_and_other_bytes_fail_the_parity_check(tmp_path: Path,
                                                           tiny: tuple[bytes, bytes]) -> None:
    data, weight = tiny
    legacy = _write(tmp_path, "legacy.pte", data)
    new = _write(tmp_path, "new.pte", _flip(data, data.find(weight)))
    sha, size = parity.compare_pte(legacy, new)
    assert size.ok and size.name == "pte_bytes" and size.new == size.legacy == len(data)
    assert not sha.ok and sha.name == "pte_sha256" and sha.delta == "1 part differs"
    message = parity.failures([sha, size])
    assert message.startswith(".pte bytes (sha256) is ")
    assert "which fails byte-identical to legacy's." in message
    assert "    constant buffer 1: 48 bytes in legacy, 48 in new; 1 byte differs, first at " \
           "offset 0" in message.splitlines()
    assert sha.figure().verdict == "fail" and size.figure().verdict == "pass"
    # a case's reasoned tolerance: the bytes are shown (info), the size is judged within 5 %
    loose = ParityTolerance(reason="another recipe", max_encoding_steps=1)
    sha, size = parity.compare_pte(legacy, new, loose)
    assert sha.info and sha.verdict == "info" and "constant buffer 1" in sha.detail
    assert size.ok and size.tolerance == "another recipe" and size.name == "pte_bytes"
