"""The version-set preflight: the QNN libraries pushed to a device are one QAIRT build, and that
build can load the context binaries of the programs run on it.

Every QAIRT library carries its build id as text: ``v2.47.0.260601114230`` in the x86 libraries of
the onnxruntime-qnn wheel (``libQnnHtp.so``, ``libHtpPrepare.so``), ``v2.28.2.241116104011_103376``
in an Android SDK's Stub and Skel (what the HTP stub prints when they differ); ``libQnnSystem.so``
carries only the build stamp (``260601114230\\0``). The stamp (``yymmddHHMMSS``) names the build;
the context binary of a ``.pte`` reports its own build id through QNN's system library
(:mod:`pytest_qnn_genai.sdk.context_binary`).

The hazard: a Stub from one QAIRT next to a Skel or ``libQnnHtp.so`` from another pushes fine and
then fails inside the first run ("Stub lib id mismatch ... Unable to load Remote symbols"), and a
runtime older than the QAIRT that built the context binary cannot load it. So a mixed set is one
:class:`LibraryBuildError` line naming each file's build before anything is pushed, a binary newer
than the set is one line before it runs, and a file whose build cannot be read is one
:class:`LibraryBuildWarning` line naming it (never a silent pass).
"""
from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# the QNN libraries whose builds must agree (the project's x86 ABI adapter, installed as
# libQnnHtp.so in front of libQnnHtpReal.so, is no QAIRT file and carries no build id)
_QNN_NAME = re.compile(r"^lib(QnnHtp|QnnHtpReal|QnnHtpV\d+Stub|QnnHtpV\d+Skel|QnnHtpPrepare|"
                       r"HtpPrepare|QnnSystem)\.so$")
_ADAPTER, _ADAPTED = "libQnnHtp.so", "libQnnHtpReal.so"
_VERSIONED = re.compile(rb"v(\d+)\.(\d+)\.(\d+)\.(\d{12})(?:_(\d+))?")
# a stamp alone ends a string; what comes before it differs (NUL in QAIRT 2.51's libQnnSystem.so,
# other bytes in 2.47's), so only a digit before it is excluded
_BARE = re.compile(rb"(?<![0-9])(\d{12})(?=\x00)")


class LibraryBuildError(ValueError):
    """The QNN libraries are not one build, or cannot load a program's context binary."""


class LibraryBuildWarning(UserWarning):
    """A QNN library's (or a program's) build id could not be read: it was not compared."""


def _plausible(stamp: str) -> bool:
    """A ``yymmddHHMMSS`` build stamp (so a stray 12-digit constant is not taken for one)."""
    month, day, hour, minute, second = (int(stamp[i:i + 2]) for i in range(2, 12, 2))
    return 1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60


@dataclass(frozen=True)
class Build:
    """One QAIRT build id: its release (None where a file carries the stamp alone) and stamp."""

    version: tuple[int, int, int] | None
    stamp: str
    text: str  # as the file carries it

    @classmethod
    def parse(cls, text: str) -> Build | None:
        """A build id as QNN prints it (``v2.51.0.260929181845``), or None."""
        match = _VERSIONED.fullmatch(text.strip().encode())
        if match is None:
            return None
        major, minor, patch, stamp = (match.group(i).decode() for i in range(1, 5))
        return cls((int(major), int(minor), int(patch)), stamp, text.strip())

    @property
    def release(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "?"


def read_build(path: Path) -> Build | str:
    """The build id ``path`` carries, or why it cannot be told (a one-line reason)."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return "the file is empty"
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _build_in(data)
    except (OSError, ValueError) as e:
        return f"cannot read it ({getattr(e, 'strerror', None) or e})"


def _build_in(data: mmap.mmap) -> Build | str:
    found = {m.group(4): m for m in _VERSIONED.finditer(data)}
    if found:
        if len(found) > 1:
            ids = ", ".join(sorted(m.group().decode() for m in found.values()))
            return f"it carries several build ids ({ids})"
        (stamp, match), = found.items()
        version = tuple(int(match.group(i)) for i in (1, 2, 3))
        return Build((version[0], version[1], version[2]), stamp.decode(),
                     match.group().decode())
    stamps = {m.group(1).decode() for m in _BARE.finditer(data)}
    stamps = {s for s in stamps if _plausible(s)}
    if len(stamps) == 1:
        stamp = stamps.pop()
        return Build(None, stamp, stamp)
    if stamps:
        return f"it carries several build stamps ({', '.join(sorted(stamps))})"
    return "no QAIRT build id in it"


@dataclass(frozen=True)
class LibrarySet:
    """The build of each QNN library of one push, and the files whose build was unreadable."""

    builds: tuple[tuple[Path, Build], ...]
    unreadable: tuple[tuple[Path, str], ...]

    @property
    def stamps(self) -> set[str]:
        return {b.stamp for _, b in self.builds}

    @property
    def version(self) -> tuple[int, int, int] | None:
        """The set's QAIRT release (from the files that name it), if one."""
        versions = {b.version for _, b in self.builds if b.version is not None}
        return versions.pop() if len(versions) == 1 else None

    def warnings(self) -> list[str]:
        """One line per library whose build was not compared."""
        return [f"QNN library {path}: build id not read ({why}); its build was not compared "
                "with the other libraries'" for path, why in self.unreadable]

    def check(self, option: str) -> None:
        """:class:`LibraryBuildError` (one line, starting with ``option``) unless every
        readable library is the same build."""
        if len(self.stamps) > 1 or len({b.version for _, b in self.builds} - {None}) > 1:
            each = ", ".join(f"{p.name} {b.text}" for p, b in self.builds)
            raise LibraryBuildError(
                f"{option}: the QNN libraries are not one QAIRT build ({each}); the HTP stub "
                "refuses a skel or backend of another build (\"Stub lib id mismatch\"): push "
                "Stub, Skel, Htp, Prepare and System from one QAIRT SDK")

    def check_binary(self, binary: Build | str, program: str, option: str) -> list[str]:
        """:class:`LibraryBuildError` when the set's release is older than the QAIRT that built
        ``program``'s context binary (a runtime cannot load a newer binary); the warning lines
        when either side's release is unknown."""
        if isinstance(binary, str):
            return [f"{program}: the context binary's build id was not read ({binary}); not "
                    "compared with the QNN libraries'"]
        mine = self.version
        if mine is None or binary.version is None:
            return [f"{program}: context binary QAIRT {binary.text}; the QNN libraries name no "
                    "one release, so the two were not compared"]
        if mine < binary.version:
            raise LibraryBuildError(
                f"{option}: {program}'s context binary was built by QAIRT {binary.text}, newer "
                f"than the QNN libraries ({'.'.join(map(str, mine))}, build "
                f"{'/'.join(sorted(self.stamps))}); a QNN runtime cannot load a newer context "
                f"binary: push QAIRT >= {binary.release} libraries")
        return []


def library_set(libraries: Iterable[Path]) -> LibrarySet:
    """Read the build of every QNN library among ``libraries`` (others are not QAIRT's)."""
    paths = [p for p in libraries if _QNN_NAME.match(p.name)]
    if any(p.name == _ADAPTED for p in paths):
        paths = [p for p in paths if p.name != _ADAPTER]
    builds, unreadable = [], []
    for path in paths:
        found = read_build(path)
        if isinstance(found, Build):
            builds.append((path, found))
        else:
            unreadable.append((path, found))
    return LibrarySet(tuple(builds), tuple(unreadable))
