"""Build ExecuTorch's own ``qnn_llama_runner`` and ``qnn_executor_runner`` for x86_64 into a
self-contained folder.

:func:`build_runners` configures ``CMakeLists.txt`` (this room) against an ExecuTorch source tree
and the installed executorch wheel in a temporary build folder (the tree is only read), compiles
both runners and writes into ``out``:

- both executables, whose only search path is RUNPATH ``$ORIGIN`` (checked with
  :mod:`pytest_qnn_genai.elf`), as upstream builds them for a phone;
- every wheel library they need, directly or through each other (hard links or copies), beside
  them: a library missing from the folder (or not pushed to a phone) makes the runner fail to
  load ("error while loading shared libraries"). Checked by asking the loader
  (``LD_TRACE_LOADED_OBJECTS``) where each library comes from: all from ``out``;
- ``runners.json`` (:data:`DESCRIPTION`): files and sha256, the libraries each runner needs, the
  build's seconds, whether logging is on.

``logging=False`` compiles ``ET_LOG``/``TK_LOG`` out of every translation unit built here
(``ET_LOG_ENABLED=0``, ``TK_LOG_ENABLED=0``), standing for a release or Android build whose log
goes nowhere; the ``PyTorchObserver`` line is a ``printf`` and stays. The wheel's own libraries
(runtime, QNN backend) log as they were built.

:func:`key_inputs` is what a cache key must hold for such a folder. Its file digests come from
:func:`sources.read_set`; after each build the compiler's depfiles are checked against them, and a
file the compiler read but the key missed fails the build (a stale cache would pass silently).

A cold build takes minutes, several times longer on a loaded machine (the README's "Upstream's
runners, built for x86" and the docs' measurements page have the figures).
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from pytest_qnn_genai.elf import needed_closure, read_elf
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.progress import Writer, stderr_writer
from pytest_qnn_genai.runners import toolchain
from pytest_qnn_genai.runners.sources import (
    EXECUTOR_RUNNER_SOURCES,
    EXECUTOR_RUNNER_WHEEL_LIBS,
    LLAMA_RUNNER_SOURCES,
    LLAMA_RUNNER_WHEEL_LIBS,
    ROOM,
    TOKENIZER_REGEX_SOURCES,
    TOKENIZER_SOURCES,
    ReadSet,
    RunnerBuildError,
    Wheel,
    check_tree,
    find_wheel,
    read_set,
)

LLAMA_RUNNER = "qnn_llama_runner"
EXECUTOR_RUNNER = "qnn_executor_runner"
RUNNERS = (LLAMA_RUNNER, EXECUTOR_RUNNER)
DESCRIPTION = "runners.json"
DEFAULT_TIMEOUT_S = 1800.0  # several times a cold build on busy cores: past it, the build hung
MACHINE = "x86_64"


@dataclass(frozen=True)
class RunnerBuild:
    """A folder made by :func:`build_runners`: the runners and the wheel libraries beside them."""

    folder: Path
    logging: bool
    build_s: float
    needs: dict[str, tuple[str, ...]]  # runner name -> the wheel libraries it loads from $ORIGIN

    @property
    def llama_runner(self) -> Path:
        return self.folder / LLAMA_RUNNER

    @property
    def executor_runner(self) -> Path:
        return self.folder / EXECUTOR_RUNNER

    def libraries(self, runner: str) -> list[Path]:
        """The library files ``runner`` needs beside it (what a phone must have pushed)."""
        return [self.folder / name for name in self.needs[runner]]

    @classmethod
    def load(cls, folder: Path) -> RunnerBuild:
        """The build described by ``folder/runners.json``."""
        path = Path(folder) / DESCRIPTION
        if not path.is_file():
            raise RunnerBuildError(f"{folder}: no {DESCRIPTION}; not a folder made by "
                                   "pytest_qnn_genai.runners.build_runners")
        data = json.loads(path.read_text())
        return cls(Path(folder), bool(data["logging"]), float(data["build_s"]),
                   {name: tuple(r["needs"]) for name, r in data["runners"].items()})


def key_inputs(src: Path, *, logging: bool) -> dict[str, object]:
    """Everything the runners built from ``src`` depend on, for a cache key: the digests of the
    tree's, the wheel's and the project's files the build reads, the executorch version, the
    compiler's and CMake's ``--version``, the Debian packages' versions, and ``logging``. (The
    Python code that drives the build is the cache's code digest.) One-line
    :class:`RunnerBuildError` for a missing tree, file or package."""
    tree = check_tree(src)
    wheel = find_wheel()
    files = read_set(tree, wheel)
    return {"executorch_src_files": files.tree, "wheel_files": files.wheel,
            "build_files": files.project, "executorch": importlib.metadata.version("executorch"),
            "compiler": toolchain.tool_version(toolchain.compiler()),
            "cmake": toolchain.tool_version("cmake"), "debian": toolchain.debian_versions(),
            "logging": logging}


def _cmake_list(items: tuple[str, ...]) -> str:
    return ";".join(items)


def configure_command(src: Path, wheel: Wheel, build_dir: Path, logging: bool) -> list[str]:
    """The ``cmake`` configure command line of :func:`build_runners`."""
    return ["cmake", "-S", str(ROOM), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_CXX_COMPILER={toolchain.compiler()}", f"-DET_SRC={src}",
            f"-DET_WHEEL={wheel.root}", f"-DRUNNER_LOGGING={'ON' if logging else 'OFF'}",
            f"-DLLAMA_RUNNER_SOURCES={_cmake_list(LLAMA_RUNNER_SOURCES)}",
            f"-DEXECUTOR_RUNNER_SOURCES={_cmake_list(EXECUTOR_RUNNER_SOURCES)}",
            f"-DTOKENIZER_SOURCES={_cmake_list(TOKENIZER_SOURCES)}",
            f"-DTOKENIZER_REGEX_SOURCES={_cmake_list(TOKENIZER_REGEX_SOURCES)}",
            f"-DLLAMA_RUNNER_WHEEL_LIBS={_cmake_list(LLAMA_RUNNER_WHEEL_LIBS)}",
            f"-DEXECUTOR_RUNNER_WHEEL_LIBS={_cmake_list(EXECUTOR_RUNNER_WHEEL_LIBS)}"]


def build_runners(src: Path, out: Path, *, logging: bool = True,
                  timeout_s: float = DEFAULT_TIMEOUT_S, progress: Writer = stderr_writer,
                  jobs: int | None = None) -> RunnerBuild:
    """Configure and build both runners from the tree ``src`` and write the self-contained folder
    ``out`` (module docstring). ``timeout_s`` bounds the whole build; ``jobs``: parallel
    compiles (default: the CPU count)."""
    start = time.monotonic()
    deadline = start + timeout_s
    tree = check_tree(src)
    wheel = find_wheel()
    toolchain.debian_versions()  # one line naming `make build-deps` before any cmake error
    files = read_set(tree, wheel)
    scratch = Path(tempfile.mkdtemp(prefix="qnn-genai-runners-"))
    log = scratch / "build.log"
    build_dir = scratch / "build"
    mode = "" if logging else ", no logging"
    try:
        try:
            toolchain.run_logged(configure_command(tree, wheel, build_dir, logging),
                                 f"configure upstream runners{mode}", log, deadline, progress)
            configure_s = time.monotonic() - start
            toolchain.run_logged(["cmake", "--build", str(build_dir), "-j",
                                  str(jobs or os.cpu_count() or 1)],
                                 f"build qnn_llama_runner + qnn_executor_runner{mode}", log,
                                 deadline, progress)
        except RunnerBuildError as exc:
            kept = Path(tempfile.mkstemp(prefix="qnn-genai-runners-", suffix=".log")[1])
            shutil.copyfile(log, kept)
            raise RunnerBuildError(f"{exc}\n    whole output: {kept}") from None
        _check_key_covers(build_dir, tree, wheel, files)
        return _assemble(build_dir, out, wheel, logging, configure_s, start,
                         {"executorch_src": str(tree), "executorch_wheel": str(wheel.root),
                          "jobs": jobs or os.cpu_count() or 1})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def compiler_reads(build_dir: Path) -> set[str]:
    """Every file the compiler read, as named in the depfiles (``*.o.d``) under ``build_dir``,
    resolved to real paths."""
    reads: set[str] = set()
    for depfile in build_dir.rglob("*.o.d"):
        text = depfile.read_text(errors="replace").replace("\\\n", " ")
        _target, _, deps = text.partition(": ")
        for token in deps.split():
            reads.add(os.path.realpath(build_dir / token))
    return reads


def unkeyed_reads(build_dir: Path, src: Path, wheel: Wheel, files: ReadSet) -> list[str]:
    """Tree, wheel or project files the compiler read that ``files`` (the key) does not hold."""
    keyed = files.real_paths(src, wheel)
    bases = [os.path.realpath(b) + os.sep for b in (src, wheel.root, ROOM)]
    return sorted(p for p in compiler_reads(build_dir)
                  if any(p.startswith(b) for b in bases) and p not in keyed)


def _check_key_covers(build_dir: Path, src: Path, wheel: Wheel, files: ReadSet) -> None:
    if not any(build_dir.rglob("*.o.d")):
        raise RunnerBuildError(f"the build left no depfiles in {build_dir}: cannot check that "
                               "the cache key covers what the compiler read")
    missed = unkeyed_reads(build_dir, src, wheel, files)
    if missed:
        raise RunnerBuildError(f"the compiler read {len(missed)} file(s) the cache key does not "
                               f"hash, e.g. {missed[0]}: a defect of "
                               "pytest_qnn_genai/runners/sources.py (read_set); please report it")


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def check_runner_binary(path: Path) -> None:
    """An x86_64 executable whose only search path is RUNPATH ``$ORIGIN`` (one line otherwise)."""
    info = read_elf(path)
    if info.machine != MACHINE or info.runpath != ("$ORIGIN",) or info.rpath:
        raise RunnerBuildError(f"{path.name} was linked for {info.machine} with RUNPATH "
                               f"{':'.join(info.runpath) or '-'} RPATH {':'.join(info.rpath) or '-'}"
                               f"; expected {MACHINE} with RUNPATH $ORIGIN only")


def loader_origins(binary: Path) -> dict[str, str]:
    """``{library: path or "not found"}`` as the dynamic loader resolves ``binary``'s libraries,
    run without ``LD_LIBRARY_PATH`` (``LD_TRACE_LOADED_OBJECTS``: nothing of it runs)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["LD_TRACE_LOADED_OBJECTS"] = "1"
    proc = subprocess.run([str(binary)], env=env, capture_output=True, text=True,
                          timeout=toolchain.PROBE_TIMEOUT_S)
    found = {}
    for line in proc.stdout.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if arrow:
            found[name] = rest.rsplit(" (", 1)[0].strip()
    return found


class RunnerRecord(TypedDict, total=False):
    """One runner in the build's description file."""

    needs: list[str]  # the wheel's libraries it loads, copied beside it
    system_needs: list[str]  # libraries it expects of the system
    machine: str
    runpath: list[str]
    sha256: str


def _assemble(build_dir: Path, out: Path, wheel: Wheel, logging: bool, configure_s: float,
              start: float, provenance: dict[str, object]) -> RunnerBuild:
    out.mkdir(parents=True, exist_ok=True)
    runners: dict[str, RunnerRecord] = {}
    for name in RUNNERS:
        built = build_dir / name
        shutil.copy2(built, out / name)
        check_runner_binary(out / name)
        needs = needed_closure(out / name, wheel.lib_dir)
        for lib in needs:
            if not (out / lib).exists():
                _link_or_copy(wheel.lib_dir / lib, out / lib)
        system = sorted({n for f in [out / name, *(out / lib for lib in needs)]
                         for n in read_elf(f).needed} - set(needs))
        runners[name] = {"needs": list(needs), "system_needs": system, "machine": MACHINE,
                         "runpath": ["$ORIGIN"]}
    for name in RUNNERS:
        origins = loader_origins(out / name)
        wrong = {lib: where for lib, where in origins.items()
                 if where == "not found"
                 or (lib in runners[name]["needs"] and Path(where).parent.resolve() != out.resolve())}
        if wrong or not origins:
            raise RunnerBuildError(f"{out / name}: the loader resolves {wrong or 'nothing'}; every "
                                   f"wheel library must load from {out}")
    build_s = time.monotonic() - start
    files = {p.name: file_sha256(p) for p in sorted(out.iterdir())
             if p.is_file() and p.name != DESCRIPTION}
    description = {"runners": runners, "logging": logging, "configure_s": round(configure_s, 1),
                   "build_s": round(build_s, 1), **provenance, "files": files}
    for name in RUNNERS:
        runners[name]["sha256"] = files[name]
    (out / DESCRIPTION).write_text(json.dumps(description, indent=1))
    return RunnerBuild(out, logging, build_s, {n: tuple(r["needs"]) for n, r in runners.items()})
