"""The runners' cache key: it hashes what the build reads (sources, the headers they reach, the
wheel's libraries, the project's build files) and the flags, and nothing the build does not read."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.runners import key_inputs
from pytest_qnn_genai.runners.build import unkeyed_reads
from pytest_qnn_genai.runners.sources import (
    ALL_SOURCES,
    CMAKE_LISTS,
    ROOM,
    check_tree,
    find_wheel,
    read_set,
)
from pytest_qnn_genai.runners.toolchain import DEBIAN_PACKAGES
from tests.support.source_trees import RUNNER_DIR, synthetic_tree
from tests.support.upstream import require_source_tree


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return synthetic_tree(tmp_path / "executorch")


def test_read_set_follows_includes_through_the_compilers_roots(tree: Path) -> None:
    files = read_set(check_tree(tree), find_wheel())
    assert set(ALL_SOURCES) <= set(files.tree)
    assert f"{RUNNER_DIR}/utils.h" in files.tree
    assert f"{RUNNER_DIR}/cache_utils.h" in files.tree  # quoted, and behind #if 0: over-approximated
    assert f"{RUNNER_DIR}/unrelated.h" not in files.tree
    # the wheel's include folder comes first, as on the compiler's command line
    assert "runtime/platform/log.h" not in files.tree
    assert "include/executorch/runtime/platform/log.h" in files.wheel
    assert "lib/libexecutorch_backend_qnn.so" in files.wheel
    assert "share/cmake/executorch-config.cmake" in files.wheel
    assert set(files.project) == {"CMakeLists.txt", "shim/third_party/absl/strings/str_replace.h"}


def test_a_changed_header_changes_the_key_an_unread_file_does_not(tree: Path,
                                                                  tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache", versions={"executorch": "1.5.1"})
    before = cache.key("runners-build", key_inputs(tree, logging=True))
    (tree / RUNNER_DIR / "unrelated.h").write_text("// edited\n")
    assert cache.key("runners-build", key_inputs(tree, logging=True)) == before
    (tree / RUNNER_DIR / "cache_utils.h").write_text("// edited\n")
    changed = cache.key("runners-build", key_inputs(tree, logging=True))
    assert changed != before
    assert cache.key("runners-build", key_inputs(tree, logging=False)) != changed


def test_key_inputs_name_the_toolchain(tree: Path) -> None:
    inputs: dict[str, Any] = key_inputs(tree, logging=False)
    assert set(inputs["debian"]) == set(DEBIAN_PACKAGES)
    assert all(inputs["debian"].values())
    assert "c++" in inputs["compiler"] or "g++" in inputs["compiler"] or "gcc" in inputs["compiler"]
    assert inputs["cmake"].startswith("cmake version")
    assert inputs["logging"] is False
    assert inputs["executorch"].startswith("1.")


def test_the_projects_build_files_are_in_the_key(tree: Path, tmp_path: Path) -> None:
    """An edit to CMakeLists.txt or the shim (of a copy of the room) changes the key."""
    room = tmp_path / "room"
    shutil.copytree(ROOM, room, ignore=shutil.ignore_patterns("__pycache__"))
    wheel = find_wheel()
    before = read_set(tree, wheel, room).project
    assert before == read_set(tree, wheel).project  # the copy reads the same
    (room / CMAKE_LISTS.name).write_text((room / CMAKE_LISTS.name).read_text() + "# edited\n")
    after_cmake = read_set(tree, wheel, room).project
    assert after_cmake != before
    shim = room / "shim/third_party/absl/strings/str_replace.h"
    shim.write_text(shim.read_text() + "// edited\n")
    assert read_set(tree, wheel, room).project != after_cmake


def test_unkeyed_compiler_reads_are_found(tree: Path, tmp_path: Path) -> None:
    """The post-build check: a depfile naming a tree file the key did not hash is reported."""
    wheel = find_wheel()
    src = check_tree(tree)
    files = read_set(src, wheel)
    build = tmp_path / "build"
    (build / "CMakeFiles/x.dir").mkdir(parents=True)
    depfile = build / "CMakeFiles/x.dir/a.cpp.o.d"
    keyed = [src / ALL_SOURCES[0], src / RUNNER_DIR / "utils.h",
             wheel.include_dir / "executorch/runtime/platform/log.h", Path("/usr/include/stdio.h")]
    depfile.write_text("CMakeFiles/x.dir/a.cpp.o: " + " \\\n ".join(map(str, keyed)) + "\n")
    assert unkeyed_reads(build, src, wheel, files) == []
    depfile.write_text(depfile.read_text().rstrip("\n") + f" \\\n {src / RUNNER_DIR / 'unrelated.h'}\n")
    assert unkeyed_reads(build, src, wheel, files) == [str((src / RUNNER_DIR / "unrelated.h").resolve())]


def test_read_set_of_the_real_tree() -> None:
    files = read_set(check_tree(require_source_tree()), find_wheel())
    for reached in (f"{RUNNER_DIR}/utils.h", "extension/llm/runner/stats.h",
                    "backends/qualcomm/runtime/QnnExecuTorch.h",
                    "kernels/portable/cpu/util/arange_util.h",
                    "extension/llm/tokenizers/include/pytorch/tokenizers/log.h"):
        assert reached in files.tree, reached
    assert not [p for p in files.tree if "/test/" in p]  # upstream's tests are not compiled
    assert "extension/llm/tokenizers/src/python_bindings.cpp" not in files.tree
