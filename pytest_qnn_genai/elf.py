"""What the harness must know about a native binary (a runner, a shared library) before it runs it.

:func:`read_elf` reads, with ``pyelftools``, the machine a binary is built for (``x86_64`` for the
emulator and the loopback phone, ``aarch64`` for a real phone), its ``DT_NEEDED`` libraries, its
``DT_RUNPATH``/``DT_RPATH`` and ``DT_SONAME``, from the dynamic *segment* (what the loader reads),
so a binary stripped of its section headers reads the same. Anything that is not an ELF file is
:class:`ElfError` (one line).

:func:`needed_closure` follows ``DT_NEEDED`` through the libraries found in one folder, the way
the loader does for a binary whose only search path is ``$ORIGIN``: what a runner needs beside it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError as _PyElfError
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile

# e_machine → the names the harness (and ``uname -m``) uses
MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64", "EM_ARM": "arm", "EM_386": "x86"}


_STRING_TAGS = {"DT_NEEDED": "needed", "DT_RUNPATH": "runpath", "DT_RPATH": "rpath",
                "DT_SONAME": "soname"}


class ElfError(ValueError):
    """The file is missing or not an ELF binary (one line)."""


@dataclass(frozen=True)
class ElfInfo:
    """The dynamic-linking facts of one ELF file."""

    path: Path
    machine: str  # x86_64, aarch64, arm, x86, or pyelftools' EM_* name for anything else
    needed: tuple[str, ...]  # DT_NEEDED, in order
    runpath: tuple[str, ...]  # DT_RUNPATH entries (":"-separated in the file)
    rpath: tuple[str, ...]  # DT_RPATH entries (the older tag; ignored by the loader with RUNPATH)
    soname: str | None

    @property
    def search_path(self) -> tuple[str, ...]:
        """Where the loader looks for :attr:`needed` (before the system folders): RUNPATH if
        present, else RPATH."""
        return self.runpath or self.rpath


def _split(value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(":") if p)


def read_elf(path: Path) -> ElfInfo:
    """The machine, ``DT_NEEDED``, RUNPATH/RPATH and SONAME of ``path``."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            elf = ELFFile(handle)
            machine = MACHINES.get(elf["e_machine"], str(elf["e_machine"]))
            needed: list[str] = []
            runpath: tuple[str, ...] = ()
            rpath: tuple[str, ...] = ()
            soname = None
            for segment in elf.iter_segments():
                if not isinstance(segment, DynamicSegment):
                    continue
                for tag in segment.iter_tags():
                    kind = tag.entry.d_tag
                    # pyelftools sets the tag's string as an attribute named for its kind
                    text = vars(tag).get(_STRING_TAGS.get(kind, ""), "")
                    if kind == "DT_NEEDED":
                        needed.append(text)
                    elif kind == "DT_RUNPATH":
                        runpath = _split(text)
                    elif kind == "DT_RPATH":
                        rpath = _split(text)
                    elif kind == "DT_SONAME":
                        soname = text
    except FileNotFoundError:
        raise ElfError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ElfError(f"{path}: is a directory, not an ELF binary") from None
    except _PyElfError as exc:
        raise ElfError(f"{path}: not an ELF binary ({exc})") from None
    return ElfInfo(path, machine, tuple(needed), runpath, rpath, soname)


def needed_closure(binary: Path, lib_dir: Path) -> tuple[str, ...]:
    """The names of every library in ``lib_dir`` that ``binary`` needs, directly or through
    another library found there (sorted). Names not in ``lib_dir`` (libc, libstdc++, ...) are
    left to the system and not followed."""
    found: set[str] = set()
    todo = list(read_elf(binary).needed)
    while todo:
        name = todo.pop()
        if name in found or not (lib_dir / name).is_file():
            continue
        found.add(name)
        todo.extend(read_elf(lib_dir / name).needed)
    return tuple(sorted(found))
