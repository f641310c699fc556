"""What the runners' build reads: upstream's source files under an ExecuTorch tree, the executorch
wheel's headers and libraries, and the project's own build files.

The lists here are the one home of what is compiled and linked (``CMakeLists.txt`` receives them
as cache variables), so the cache key (:func:`read_set`) hashes exactly what the build is told to
use. Headers are found by following ``#include`` lines from the compiled sources through the same
include roots, in the same order, as the compiler (:func:`include_roots`); every ``#include`` is
followed whatever ``#if`` surrounds it, so the set errs on the side of hashing too much. A header
not found under any root is a system header (the Debian packages' versions stand for it).
``build.py`` checks after a build that every tree or wheel file the compiler read (its depfiles)
was hashed, so a missed include fails the build instead of leaving a stale cache entry.
"""
from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_qnn_genai.files import file_sha256

ROOM = Path(__file__).parent
CMAKE_LISTS = ROOM / "CMakeLists.txt"
SHIM = ROOM / "shim"
ENV_VAR = "QNN_GENAI_EXECUTORCH_SRC"
WHAT_TO_DO = (f"pass --executorch-src DIR (or set {ENV_VAR}) to a checkout of "
              "github.com/pytorch/executorch matching the installed wheel")

_QL = "examples/qualcomm/oss_scripts/llama"
_TOK = "extension/llm/tokenizers"
LLAMA_RUNNER_SOURCES = (
    f"{_QL}/qnn_llama_runner.cpp",
    *(f"{_QL}/runner/{n}.cpp" for n in (
        "runner", "decoder_runner", "prompt_processor", "token_generator", "lhd_token_generator",
        "attention_sink_rope_runner", "rpc_mem", "kv_manager")),
    "examples/models/llama/runner/runner.cpp",
    "examples/models/llama/tokenizer/llama_tiktoken.cpp",
    *(f"extension/llm/runner/{n}.cpp" for n in (
        "llm_runner_helper", "multimodal_prefiller", "multimodal_runner", "text_decoder_runner",
        "text_llm_runner", "text_prefiller")),
    "extension/llm/sampler/sampler.cpp",
    "extension/memory_allocator/cpu_caching_malloc_allocator.cpp",
    "extension/llm/custom_ops/op_fallback.cpp",
)
EXECUTOR_RUNNER_SOURCES = (
    "examples/qualcomm/executor_runner/qnn_executor_runner.cpp",
    "extension/runner_util/inputs.cpp",
    "extension/runner_util/inputs_portable.cpp",
    "extension/evalue_util/print_evalue.cpp",
)
TOKENIZER_SOURCES = (
    *(f"{_TOK}/src/{n}.cpp" for n in (
        "bpe_tokenizer_base", "hf_tokenizer", "llama2c_tokenizer", "normalizer", "pre_tokenizer",
        "re2_regex", "regex", "sentencepiece", "tekken", "tiktoken", "token_decoder")),
    f"{_TOK}/third-party/llama.cpp-unicode/src/unicode.cpp",
    f"{_TOK}/third-party/llama.cpp-unicode/src/unicode-data.cpp",
)
# registers itself from a static initializer (linked as objects, never dropped)
TOKENIZER_REGEX_SOURCES = tuple(f"{_TOK}/src/{n}.cpp" for n in (
    "pcre2_regex", "regex_lookahead", "std_regex"))
ALL_SOURCES = (LLAMA_RUNNER_SOURCES + EXECUTOR_RUNNER_SOURCES + TOKENIZER_SOURCES
               + TOKENIZER_REGEX_SOURCES)

# The wheel libraries each runner links (under <wheel>/lib). Backend and kernels register
# themselves at load time, as upstream's qnn_executorch_backend and kernel libraries do.
LLAMA_RUNNER_WHEEL_LIBS = ("libexecutorch_backend_qnn.so", "libexecutorch_kernels_optimized.so",
                           "libexecutorch_kernels_quantized.so", "libexecutorch_threadpool.so",
                           "libexecutorch.so")
EXECUTOR_RUNNER_WHEEL_LIBS = LLAMA_RUNNER_WHEEL_LIBS + ("libexecutorch_etdump.so",)

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)


class RunnerBuildError(RuntimeError):
    """The runners cannot be built: the first line says why and what to do."""


@dataclass(frozen=True)
class Wheel:
    """The installed executorch wheel's folders the build uses."""

    root: Path  # site-packages/executorch

    @property
    def lib_dir(self) -> Path:
        return self.root / "lib"

    @property
    def include_dir(self) -> Path:
        return self.root / "include"

    @property
    def cmake_dir(self) -> Path:
        return self.root / "share" / "cmake"

    @property
    def c10_include_dir(self) -> Path:
        return self.include_dir / "executorch/runtime/core/portable_type/c10"


def find_wheel() -> Wheel:
    """The installed executorch package (located without importing it), with the libraries,
    headers and CMake package config the build needs."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise RunnerBuildError("executorch is not installed: `pip install executorch` provides "
                               "the libraries the runners link")
    wheel = Wheel(Path(list(spec.submodule_search_locations)[0]))
    needed = [wheel.include_dir, wheel.cmake_dir / "executorch-config.cmake",
              *(wheel.lib_dir / n for n in EXECUTOR_RUNNER_WHEEL_LIBS)]
    missing = [p for p in needed if not p.exists()]
    if missing:
        raise RunnerBuildError(f"the executorch wheel at {wheel.root} lacks {missing[0]}, which "
                               "the runners' build needs (a wheel with its C++ runtime, >= 1.5)")
    return wheel


def check_tree(src: Path) -> Path:
    """``src`` resolved, if it holds every source the build compiles; else one line saying what
    is missing and what to do."""
    src = Path(src)
    if not src.is_dir():
        raise RunnerBuildError(f"ExecuTorch source tree {src}: no such directory; {WHAT_TO_DO}")
    missing = [rel for rel in ALL_SOURCES if not (src / rel).is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise RunnerBuildError(f"{src} is not an ExecuTorch source tree with the QNN runners: no "
                               f"{missing[0]}{more}; {WHAT_TO_DO}")
    return src.resolve()


@dataclass(frozen=True)
class IncludeRoot:
    """One ``-I`` folder: ``<prefix>rest`` resolves to ``folder/rest``."""

    folder: Path
    prefix: str = ""

    def find(self, name: str) -> Path | None:
        if not name.startswith(self.prefix):
            return None
        path = self.folder / name[len(self.prefix):]
        return path if path.is_file() else None


def include_roots(src: Path, wheel: Wheel, room: Path = ROOM) -> tuple[IncludeRoot, ...]:
    """The include folders of ``CMakeLists.txt`` (in ``room``), in the compiler's order."""
    tok = src / _TOK
    return (IncludeRoot(wheel.include_dir), IncludeRoot(wheel.c10_include_dir),
            IncludeRoot(src, "executorch/"), IncludeRoot(tok / "include"),
            IncludeRoot(tok / "third-party/llama.cpp-unicode/include"),
            IncludeRoot(room / SHIM.name))


def _resolve(name: str, quoted: bool, here: Path, roots: tuple[IncludeRoot, ...]) -> Path | None:
    if quoted and (here / name).is_file():
        return Path(os.path.normpath(here / name))
    for root in roots:
        found = root.find(name)
        if found is not None:
            return Path(os.path.normpath(found))
    return None


@dataclass(frozen=True)
class ReadSet:
    """Every file of the tree, the wheel and the project the build reads, with its sha256, keyed
    by its path relative to the tree, the wheel's package folder or this room."""

    tree: dict[str, str]
    wheel: dict[str, str]
    project: dict[str, str]

    def real_paths(self, src: Path, wheel: Wheel, room: Path = ROOM) -> set[str]:
        """The resolved absolute paths of every file in the set."""
        return ({str((src / p).resolve()) for p in self.tree}
                | {str((wheel.root / p).resolve()) for p in self.wheel}
                | {str((room / p).resolve()) for p in self.project})


def _relative(path: Path, src: Path, wheel: Wheel, room: Path) -> tuple[str, str] | None:
    for kind, base in (("tree", src), ("wheel", wheel.root), ("project", room)):
        if path.is_relative_to(base):
            return kind, path.relative_to(base).as_posix()
    return None


def read_set(src: Path, wheel: Wheel, room: Path = ROOM) -> ReadSet:
    """The files the build reads (module docstring): the compiled sources and every header they
    reach under the tree, the wheel or the shim; the wheel's libraries and CMake config; the
    project's build files (``CMakeLists.txt`` and ``shim/`` in ``room``). ``src`` must be
    :func:`check_tree`'s result."""
    roots = include_roots(src, wheel, room)
    found: dict[str, dict[str, Path]] = {"tree": {}, "wheel": {}, "project": {}}
    todo = [src / rel for rel in ALL_SOURCES]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        place = _relative(path, src, wheel, room)
        if place is not None:
            found[place[0]][place[1]] = path
        for bracket, name in _INCLUDE.findall(path.read_bytes()):
            header = _resolve(name.decode(errors="replace").strip(), bracket == b'"', path.parent,
                              roots)
            if header is not None:
                todo.append(header)
    for lib in EXECUTOR_RUNNER_WHEEL_LIBS:
        found["wheel"][f"lib/{lib}"] = wheel.lib_dir / lib
    for config in sorted(wheel.cmake_dir.glob("*.cmake")):
        found["wheel"][f"share/cmake/{config.name}"] = config
    shim = room / SHIM.name
    for own in [room / CMAKE_LISTS.name, *sorted(p for p in shim.rglob("*") if p.is_file())]:
        found["project"][own.relative_to(room).as_posix()] = own
    return ReadSet(*({rel: file_sha256(p) for rel, p in sorted(found[k].items())}
                     for k in ("tree", "wheel", "project")))
