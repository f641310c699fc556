"""Which libraries a run of upstream's runners needs on the device, all found before any push.

Two kinds, both pushed into the workspace, where ``LD_LIBRARY_PATH=.`` and the runners' own
``$ORIGIN`` find them:

- **QNN's libraries**, which the QnnBackend opens at run time (``dlopen``: no ``DT_NEEDED`` names
  them), by the machine the runner is built for. ``aarch64`` (a phone): ``libQnnHtp.so``,
  ``libQnnHtpV{arch}Stub.so``, ``libQnnHtpPrepare.so``, ``libQnnSystem.so`` and the Hexagon
  ``libQnnHtpV{arch}Skel.so``, upstream's ``SimpleADB`` push list. ``x86_64`` (QNN's HTP
  simulator): ``libQnnHtp.so``, ``libQnnSystem.so``, ``libHtpPrepare.so`` and, behind the
  project's ABI adapter, ``libQnnHtpReal.so``. Each one's own ``DT_NEEDED`` found beside it go
  too (the x86 QAIRT libraries' bundled libc++).
- **What the runner binaries need** (``DT_NEEDED``, followed through what is found): found beside
  the runner or anywhere in the CMake build folder it was built in (upstream's Android build
  leaves ``libqnn_executorch_backend.so`` in ``backends/qualcomm/``; the harness's x86 build puts
  the executorch libraries beside the runners), else among the QNN libraries' folders. A library
  the device provides itself is not pushed: on Android the NDK's stable system libraries, on this
  machine (an x86 device) what its loader finds (``ldconfig -p``). Anything else found nowhere is
  :class:`LibraryError`, one line naming it, before anything is pushed: upstream's runners link
  ``libqnn_executorch_backend.so`` with an ``$ORIGIN`` runpath, and a phone that lacks it fails
  to start them ("CANNOT LINK EXECUTABLE").

Which QAIRT build the QNN libraries are, and whether they agree with each other and with a
program's context binary, is :mod:`.library_builds` (the version-set preflight).
"""
from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pytest_qnn_genai.elf import ElfError, read_elf
from pytest_qnn_genai.targets import SocSpec

AARCH64, X86_64 = "aarch64", "x86_64"
# Android NDK stable system libraries (developer.android.com/ndk/guides/stable_apis): on every
# device, never pushed. libc++_shared.so is not one of them: an app ships its own.
ANDROID_SYSTEM = frozenset({
    "libc.so", "libm.so", "libdl.so", "liblog.so", "libz.so", "libandroid.so", "libEGL.so",
    "libGLESv1_CM.so", "libGLESv2.so", "libGLESv3.so", "libvulkan.so", "libjnigraphics.so",
    "libmediandk.so", "libOpenSLES.so", "libnativewindow.so", "libsync.so", "libaaudio.so",
    "libamidi.so", "libcamera2ndk.so", "libneuralnetworks.so", "libbinder_ndk.so",
    "libOpenMAXAL.so", "libicu.so", "libstdc++.so"})
LDCONFIG_TIMEOUT_S = 10.0
MAX_BUILD_DEPTH = 6  # how far above a runner its CMake build folder may start


class LibraryError(ValueError):
    """A library a run needs is nowhere to be found (one line naming it and where it looked)."""


def qnn_library_names(machine: str, soc: SocSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(required, optional) QNN library names a runner built for ``machine`` loads on ``soc``."""
    if machine == X86_64:
        return ("libQnnHtp.so", "libQnnSystem.so", "libHtpPrepare.so"), ("libQnnHtpReal.so",)
    arch = soc.htp_arch_number
    return (("libQnnHtp.so", f"libQnnHtpV{arch}Stub.so", "libQnnHtpPrepare.so",
             "libQnnSystem.so", f"libQnnHtpV{arch}Skel.so"), ())


def qnn_search_dirs(root: Path, machine: str, soc: SocSpec) -> list[Path]:
    """Where QNN's libraries may sit under ``root``: flat, or a QNN SDK's layout."""
    if machine == X86_64:
        return [root, root / "lib" / "x86_64-linux-clang"]
    return [root, root / "lib" / "aarch64-android",
            root / "lib" / f"hexagon-{soc.htp_arch}" / "unsigned"]


@cache
def host_libraries() -> frozenset[str]:
    """The library names this machine's loader resolves by itself (``ldconfig -p``)."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False,
                             timeout=LDCONFIG_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    names = {line.split()[0] for line in out.splitlines()[1:] if line.strip()}
    return frozenset(names | {"ld-linux-x86-64.so.2", "linux-vdso.so.1"})


def system_library(name: str, machine: str) -> bool:
    """True if a device of ``machine`` provides ``name`` itself."""
    return name in (host_libraries() if machine == X86_64 else ANDROID_SYSTEM)


def build_folder(binary: Path) -> Path | None:
    """The CMake build folder ``binary`` was built in (the nearest ancestor with a
    ``CMakeCache.txt``), or None."""
    for parent in list(Path(binary).resolve().parents)[:MAX_BUILD_DEPTH]:
        if (parent / "CMakeCache.txt").is_file():
            return parent
    return None


def _find(name: str, dirs: Sequence[Path], tree: Path | None) -> Path | None:
    hit = next((d / name for d in dirs if (d / name).is_file()), None)
    if hit is None and tree is not None:
        hit = next((p for p in sorted(tree.rglob(name)) if p.is_file()), None)
    return hit


@dataclass(frozen=True)
class DeviceLibraries:
    """Everything one device session pushes besides the runners and the programs."""

    machine: str  # what the runners are built for
    qnn: tuple[Path, ...]
    runner: tuple[Path, ...]  # what the runner binaries need (e.g. libqnn_executorch_backend.so)

    @property
    def files(self) -> list[Path]:
        """Every library, each name once (the first found wins)."""
        out: dict[str, Path] = {}
        for path in (*self.qnn, *self.runner):
            out.setdefault(path.name, path)
        return list(out.values())


def _cpu_needed(lib: Path, machine: str) -> tuple[str, ...]:
    """``DT_NEEDED`` of a library the CPU loads (none for a DSP library or a non-ELF file)."""
    try:
        info = read_elf(lib)
    except ElfError:
        return ()
    return info.needed if info.machine == machine else ()


def _closure(start: Iterable[str], dirs: Sequence[Path], tree: Path | None, machine: str,
             needed_by: str) -> dict[str, Path]:
    """Every non-system library ``start`` needs (transitively), found in ``dirs`` or ``tree``."""
    found: dict[str, Path] = {}
    todo = [(name, needed_by) for name in start]
    while todo:
        name, by = todo.pop()
        if name in found:
            continue
        hit = _find(name, dirs, tree)
        if hit is None:
            if system_library(name, machine):
                continue
            looked = ", ".join(str(d) for d in [*dirs, *([tree] if tree else [])])
            raise LibraryError(f"{by} needs {name} (DT_NEEDED) and it is not an {machine} system "
                               f"library; not found in {looked}")
        found[name] = hit
        todo += [(n, name) for n in _cpu_needed(hit, machine)]
    return found


def device_libraries(runners: Sequence[Path], qnn_root: Path, soc: SocSpec,
                     qnn_option: str = "--qnn-device-libs") -> DeviceLibraries:
    """The libraries a session of ``runners`` on ``soc`` pushes (see the module docstring);
    LibraryError (one line, starting with the option to fix) for anything missing."""
    try:
        machine = read_elf(runners[0]).machine
    except ElfError as e:
        raise LibraryError(f"--runner: {e}") from None
    qnn_dirs = qnn_search_dirs(qnn_root, machine, soc)
    required, optional = qnn_library_names(machine, soc)
    qnn: dict[str, Path] = {}
    for name in (*required, *optional):
        hit = _find(name, qnn_dirs, None)
        if hit is None and name in required:
            raise LibraryError(
                f"{qnn_option}: {name} not found in {qnn_root} (looked in "
                f"{', '.join(str(d) for d in qnn_dirs)}); an {machine} run on {soc.name} needs "
                f"{', '.join(required)}")
        if hit is not None:
            qnn[name] = hit
    needed = set()
    for lib in list(qnn.values()):  # the Hexagon skel runs on the DSP: only the CPU's libraries
        needed |= set(_cpu_needed(lib, machine))
    try:
        qnn.update(_closure(needed, [lib.parent for lib in qnn.values()], None, machine,
                            "the QNN libraries"))
    except LibraryError as e:
        raise LibraryError(f"{qnn_option}: {e}") from None
    runner_libs: dict[str, Path] = {}
    for runner in runners:
        try:
            info = read_elf(runner)
        except ElfError as e:
            raise LibraryError(f"--runner: {e}") from None
        if info.machine != machine:
            raise LibraryError(f"--runner: {runner.name} is built for {info.machine}, "
                               f"{runners[0].name} for {machine}")
        dirs = [runner.parent, *qnn_dirs]
        try:
            runner_libs.update(_closure(info.needed, dirs, build_folder(runner), machine,
                                        runner.name))
        except LibraryError as e:
            raise LibraryError(f"--runner: {e}") from None
    return DeviceLibraries(machine, tuple(qnn.values()),
                           tuple(p for n, p in runner_libs.items() if n not in qnn))
