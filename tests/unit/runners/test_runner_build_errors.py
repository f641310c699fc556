"""What goes wrong before or during the runners' build is one line saying what to do (the
compiler's last lines follow a failed compile); every subprocess ends within its time."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from pytest_qnn_genai.runners import ENV_VAR, RunnerBuild, RunnerBuildError, build_runners, key_inputs
from pytest_qnn_genai.runners.build import check_runner_binary, loader_origins
from pytest_qnn_genai.runners.sources import ALL_SOURCES
from pytest_qnn_genai.runners.toolchain import (
    DEBIAN_PACKAGES,
    TAIL_LINES,
    debian_versions,
    run_logged,
    tool_version,
)
from tests.support.source_trees import synthetic_tree

ROOT = Path(__file__).resolve().parents[3]


def _one_line(exc: pytest.ExceptionInfo[RunnerBuildError]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


def test_missing_tree(tmp_path: Path) -> None:
    for call in (lambda: key_inputs(tmp_path / "nowhere", logging=True),
                 lambda: build_runners(tmp_path / "nowhere", tmp_path / "out", timeout_s=60)):
        with pytest.raises(RunnerBuildError) as exc:
            call()
        line = _one_line(exc)
        assert "no such directory" in line and "--executorch-src" in line and ENV_VAR in line
    assert not (tmp_path / "out").exists()


def test_tree_missing_a_source(tmp_path: Path) -> None:
    tree = synthetic_tree(tmp_path / "executorch")
    (tree / ALL_SOURCES[3]).unlink()
    with pytest.raises(RunnerBuildError) as exc:
        key_inputs(tree, logging=True)
    line = _one_line(exc)
    assert ALL_SOURCES[3] in line and "--executorch-src" in line


def test_missing_debian_package() -> None:
    with pytest.raises(RunnerBuildError) as exc:
        debian_versions(("cmake", "qnn-genai-no-such-package"))
    line = _one_line(exc)
    assert "qnn-genai-no-such-package" in line and "make build-deps" in line
    assert "cmake" not in line.split("not installed")[0]  # only the missing one is named


def test_installed_packages_have_versions() -> None:
    versions = debian_versions(("cmake", "g++"))
    assert set(versions) == {"cmake", "g++"} and all(versions.values())


def test_missing_tool() -> None:
    with pytest.raises(RunnerBuildError) as exc:
        tool_version("qnn-genai-no-such-tool")
    assert "make build-deps" in _one_line(exc)


def test_makefile_installs_the_packages_the_build_checks() -> None:
    text = (ROOT / "Makefile").read_text()
    listed = re.search(r"^BUILD_DEPS\s*:=\s*(.+)$", text, re.MULTILINE)
    assert listed is not None
    assert tuple(listed.group(1).split()) == DEBIAN_PACKAGES
    assert re.search(r"^test:.*\bbuild-deps\b", text, re.MULTILINE)
    assert re.search(r"^gate:.*\bbuild-deps\b", text, re.MULTILINE)


def test_failed_step_reports_the_compilers_last_lines(tmp_path: Path) -> None:
    lines: list[str] = []
    warnings = "; ".join(f"echo 'b.cpp:{i}:1: warning: meh'" for i in range(20))
    script = ("echo '[ 10%] Building CXX object a.o'; echo 'a.cpp:3:1: error: boom' >&2; "
              f"{warnings}; echo 'make[2]: *** [a.o] Error 1'; exit 3")
    with pytest.raises(RunnerBuildError) as exc:
        run_logged(["sh", "-c", script], "build things", tmp_path / "log", time.monotonic() + 30,
                   lines.append)
    headline, *tail = str(exc.value).splitlines()
    assert headline == "build things failed (exit 3); its first errors and last lines:"
    # the error first, though 20 warnings of a parallel job followed it; make's lines left out
    assert [t.strip() for t in tail[:2]] == ["a.cpp:3:1: error: boom", "..."]
    assert tail[-1].strip() == "b.cpp:19:1: warning: meh" and len(tail) == 2 + TAIL_LINES
    assert not [t for t in tail if "make[" in t or "%]" in t]
    assert "a.cpp:3:1: error: boom" in (tmp_path / "log").read_text()
    assert lines[0] == "[qnn-genai] build things: started"
    assert lines[-1].startswith("[qnn-genai] build things: FAILED in")


def test_step_past_its_deadline_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    start = time.monotonic()
    with pytest.raises(RunnerBuildError, match="timed out"):
        run_logged(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], "slow step",
                   tmp_path / "log", time.monotonic() + 1.0, lambda _line: None)
    assert time.monotonic() - start < 15
    assert _dies_within(int(pid_file.read_text()), seconds=10.0)


def _dies_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` is gone or a zombie within ``seconds``: a SIGKILLed process on a loaded
    machine can still show state R for a moment while the kernel tears it down."""
    stat = Path(f"/proc/{pid}/stat")
    until = time.monotonic() + seconds
    while True:
        try:
            if stat.read_text().split(")")[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        if time.monotonic() > until:
            return False
        time.sleep(0.05)


def test_a_binary_without_origin_runpath_is_refused() -> None:
    with pytest.raises(RunnerBuildError) as exc:
        check_runner_binary(Path("/bin/ls"))
    assert "expected x86_64 with RUNPATH $ORIGIN only" in _one_line(exc)


def test_loader_origins_names_where_each_library_loads_from() -> None:
    origins = loader_origins(Path("/bin/ls"))
    assert Path(origins["libc.so.6"]).name.startswith("libc")


def test_a_folder_without_description_is_not_a_build(tmp_path: Path) -> None:
    with pytest.raises(RunnerBuildError) as exc:
        RunnerBuild.load(tmp_path)
    assert "runners.json" in _one_line(exc)
