"""Minimal ELF64 shared objects for tests of what the plugin reads from a binary: the machine,
``DT_NEEDED`` and ``DT_RUNPATH``, laid out as a loader reads them (one ``PT_LOAD`` over the file,
a ``PT_DYNAMIC`` whose ``DT_STRTAB`` points into it). Enough for ``pytest_qnn_genai.elf``
(pyelftools) to read an aarch64 runner on an x86 machine; nothing here can run."""
from __future__ import annotations

import struct
from pathlib import Path

EM = {"x86_64": 62, "aarch64": 183}
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RUNPATH = 0, 1, 5, 10, 14, 29
PT_LOAD, PT_DYNAMIC = 1, 2


def write_elf(path: Path, machine: str = "aarch64", needed: tuple[str, ...] = (),
              runpath: str | None = None, soname: str | None = None) -> Path:
    """Write a shared object for ``machine`` needing ``needed`` at ``path``."""
    strings = b"\0"
    offsets: dict[str, int] = {}
    for name in [*needed, *([runpath] if runpath else []), *([soname] if soname else [])]:
        offsets[name] = len(strings)
        strings += name.encode() + b"\0"
    tags = [(DT_NEEDED, offsets[n]) for n in needed]
    if runpath:
        tags.append((DT_RUNPATH, offsets[runpath]))
    if soname:
        tags.append((DT_SONAME, offsets[soname]))
    header, phentsize = 64, 56
    dyn_off = header + 2 * phentsize
    dyn_size = (len(tags) + 3) * 16
    str_off = dyn_off + dyn_size
    tags += [(DT_STRTAB, str_off), (DT_STRSZ, len(strings)), (DT_NULL, 0)]
    dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in tags)
    total = str_off + len(strings)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, EM[machine], 1, 0, header, 0, 0, header,
                               phentsize, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", PT_LOAD, 5, 0, 0, 0, total, total, 0x1000)
    dyn = struct.pack("<IIQQQQQQ", PT_DYNAMIC, 6, dyn_off, dyn_off, dyn_off, dyn_size,
                      dyn_size, 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(ehdr + load + dyn + dynamic + strings)
    return path
