"""The ELF reader on real binaries: the machine, DT_NEEDED, RUNPATH/RPATH, SONAME."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pytest_qnn_genai.elf import ElfError, needed_closure, read_elf
from pytest_qnn_genai.runners.sources import find_wheel


def test_system_executable() -> None:
    info = read_elf(Path("/bin/ls"))
    assert info.machine == "x86_64"
    assert "libc.so.6" in info.needed
    assert info.runpath == () and info.rpath == () and info.search_path == ()


def test_wheel_library() -> None:
    lib = find_wheel().lib_dir / "libexecutorch_backend_qnn.so"
    info = read_elf(lib)
    assert info.machine == "x86_64"
    assert info.soname == "libexecutorch_backend_qnn.so"
    assert "libexecutorch.so" in info.needed
    assert "$ORIGIN" in info.runpath and info.search_path == info.runpath


def test_needed_closure_follows_the_folder_only() -> None:
    lib_dir = find_wheel().lib_dir
    closure = needed_closure(lib_dir / "libexecutorch_kernels_optimized.so", lib_dir)
    assert closure == ("libexecutorch.so", "libexecutorch_threadpool.so")  # libc & co: system


def test_aarch64_header(tmp_path: Path) -> None:
    """A phone binary's machine (a bare ELF64 header: no aarch64 binary ships on this host)."""
    header = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
              + struct.pack("<HHIQQQIHHHHHH", 3, 183, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0))
    (tmp_path / "runner").write_bytes(header)
    info = read_elf(tmp_path / "runner")
    assert info.machine == "aarch64" and info.needed == ()


@pytest.mark.parametrize("content", [b"#!/bin/sh\necho hi\n", b""])
def test_not_elf(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "script").write_bytes(content)
    with pytest.raises(ElfError, match="not an ELF binary") as exc:
        read_elf(tmp_path / "script")
    assert "\n" not in str(exc.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ElfError, match="no such file"):
        read_elf(tmp_path / "nothing")
