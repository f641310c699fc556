"""Builds scheduled ahead, for real: the prebuild process builds what the selected tests need and
the tests find cache hits; it never outlives its session, nor the builds it started.

Cheap: the smoke suite's two attention blocks (seconds each), and a llama.py build killed seconds
after it starts.
"""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_qnn_genai.pipeline.products import Need
from pytest_qnn_genai.prebuild import launch
from pytest_qnn_genai.prebuild.building import wait_done
from pytest_qnn_genai.prebuild.process import PrebuildConfig, children
from tests.support.settings import settings_with

ROOT = Path(__file__).resolve().parents[3]
SUMMARY = re.compile(r"(\d+) hits, (\d+) builds \(")

WAIT_FOR_PREBUILD = """
import pytest
from pytest_qnn_genai.plugin.session import session_of

@pytest.fixture(scope="session", autouse=True)
def prebuilt_first(request):
    process = session_of(request.config).prebuild
    assert process is not None, "no prebuild process was started"
    assert process.wait(900), "the prebuild did not finish"
"""
AFTER = """
def test_this_process_built_nothing(qnn_cache):
    assert (qnn_cache.stats.builds, qnn_cache.stats.hits) == (0, 2), qnn_cache.stats
"""


@pytest.mark.usefixtures("qnn_env")
def test_a_prebuilt_entry_is_a_cache_hit_for_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_smoke=(ROOT / "suites" / "smoke" / "test_smoke.py").read_text(),
                        test_zz_after=AFTER)
    pytester.makeconftest(WAIT_FOR_PREBUILD)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--soc", "SM8650",
        "-k", "test_only_qnn_delegate and emulator or test_this_process_built_nothing",
        timeout=900)
    result.assert_outcomes(passed=3)
    errors = "\n".join(result.errlines)
    assert "[qnn-genai] prebuild: 2 cache entries the selected tests need" in errors, errors
    for quant in ("16a8w", "fp16"):
        assert f"[qnn-genai] prebuild smoke-lower attention-{quant} SM8650-htp-emulator: done" \
            in errors, errors
    assert "[qnn-genai] build " not in errors  # no build of the tests' own
    hits, builds = SUMMARY.search(result.stdout.str()).groups()  # the prebuild's builds count
    assert (int(hits), int(builds)) == (2, 2)


@pytest.mark.usefixtures("qnn_env")
def test_without_prebuild_the_test_builds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_smoke=(ROOT / "suites" / "smoke" / "test_smoke.py").read_text())
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--soc", "SM8650", "--no-qnn-prebuild",
        "-k", "test_only_qnn_delegate and emulator and fp16", timeout=900)
    result.assert_outcomes(passed=1)
    errors = "\n".join(result.errlines)
    assert "prebuild" not in errors
    assert "[qnn-genai] build smoke-lower attention-fp16 SM8650-htp-emulator: done" in errors


HELDOUT_FP32_USER = """
def test_scores_the_heldout_windows(heldout_fp32, qnn_target, qnn_cache):
    assert heldout_fp32 and (qnn_cache.stats.builds, qnn_cache.stats.hits) == (
        0, len(heldout_fp32)), qnn_cache.stats
"""


@pytest.mark.usefixtures("qnn_env")
def test_the_heldout_step_builds_the_entries_the_suites_fixture_reads(
        pytester: pytest.Pytester) -> None:
    """The real suites' ``heldout_fp32`` fixture (suites/conftest.py) finds every window's fp32
    logits built by the prebuild's ``heldout-fp32`` step: hits only. Windows cut otherwise than
    the fixture cuts them (other tokens, other lengths) would be other keys: the test's own
    builds."""
    pytester.makeconftest((ROOT / "suites" / "conftest.py").read_text())
    pytester.makepyfile(test_heldout=WAIT_FOR_PREBUILD + HELDOUT_FP32_USER)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--soc", "SM8650", "--models",
        "stories260k", "-k", "emulator", timeout=900)
    result.assert_outcomes(passed=1)
    errors = "\n".join(result.errlines)
    assert "[qnn-genai] prebuild: 1 cache entries the selected tests need" in errors, errors
    assert "[qnn-genai] prebuild: 1 built in" in errors, errors
    assert "[qnn-genai] prebuild fp32-logits stories260k: done" in errors, errors
    assert "[qnn-genai] build " not in errors  # no build of the test's own


GROUPS = """
import time
import pytest

@pytest.fixture(scope="session", autouse=True)
def later(worker_id):
    if worker_id != "gw0":
        time.sleep(3)  # gw0 has ended: its session end decides what becomes of the plan

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group("late" if "smoke" in item.nodeid else "early"))

def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadGroupScheduling

    class EarlyGroupToGw0(LoadGroupScheduling):
        # loadgroup hands the first group of its queue (with --no-loadscope-reorder the early
        # one: test_early.py collects first) to the first worker that came up, gw0 or gw1 by
        # chance; this puts gw0 first (xdist 3.8 keeps the workers in assigned_work's order)

        def schedule(self):
            if self.collection is None:
                self.assigned_work = dict(
                    sorted(self.assigned_work.items(), key=lambda kv: kv[0].gateway.id))
            super().schedule()

    return EarlyGroupToGw0(config, log)
"""
EARLY = """
def test_early(worker_id, request):  # the scenario needs gw0, the prebuild's owner, here
    (request.config.rootpath / "early_worker").write_text(worker_id)
"""


@pytest.mark.usefixtures("qnn_env")
def test_the_owner_ends_first_and_the_prebuild_builds_on_for_the_other_worker(
        pytester: pytest.Pytester) -> None:
    """Under ``-n 2`` worker ``gw0`` starts the prebuild and may run out of tests while ``gw1``
    has tests to come that need planned entries: the prebuild builds on until ``gw1`` has ended
    (stopped at gw0's end, nothing of the plan was started: ``2 not started``, and gw1 built the
    blocks itself, one after the other)."""
    pytester.makeconftest(GROUPS)
    pytester.makepyfile(test_early=EARLY,
                        test_smoke=(ROOT / "suites" / "smoke" / "test_smoke.py").read_text())
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--soc", "SM8650", "-n", "2",
        "--dist", "loadgroup", "--no-loadscope-reorder",
        "-k", "test_early or test_only_qnn_delegate and emulator",
        timeout=900)
    result.assert_outcomes(passed=3)
    assert (pytester.path / "early_worker").read_text() == "gw0"  # the scenario was exercised
    errors = "\n".join(result.errlines)
    assert "[qnn-genai] prebuild: 2 cache entries the selected tests need" in errors, errors
    assert "not started" not in errors, errors
    assert re.search(r"\[qnn-genai\] prebuild: (\d built(, )?)?(\d cached)? in", errors), errors


def _legacy_prebuild_config(cache: Path, sdk_root: Path) -> PrebuildConfig:
    return PrebuildConfig(settings_with(cache_dir=cache, qnn_sdk=str(sdk_root)), time.time(),
                          slots=1)


LEGACY = Need("legacy", "stories260k", "SM8650", "htp")


def _wait_for_a_build_subprocess(pid: int, timeout_s: float = 300.0) -> int:
    """The process group of ``pid``'s llama.py build (its own group; not the short probe of
    llama.py's options that runs first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in children(pid):
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                if b"--compile_only" in argv:
                    return os.getpgid(child)
            except (OSError, ProcessLookupError):
                continue
        time.sleep(0.2)
    raise AssertionError(f"prebuild process {pid} started no llama.py build in {timeout_s}s")


def _gone(pgid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_stopping_kills_the_prebuilds_own_subprocess_builds(tmp_path: Path,
                                                             emulator_sdk_root: Path) -> None:
    """Also: while it builds it holds its "still building" flag, which a measurement waits for,
    and its end (killed here) frees it."""
    flag = tmp_path / "building"
    process = launch.start([LEGACY], dataclasses.replace(
        _legacy_prebuild_config(tmp_path / "cache", emulator_sdk_root), building_flag=str(flag)))
    try:
        group = _wait_for_a_build_subprocess(process.pid)
        assert wait_done(flag, 0.5, lambda _: None) >= 0.5  # held: a measurement would wait
        start = time.monotonic()
        process.stop()
        assert time.monotonic() - start < launch.STOP_TIMEOUT_S
        assert not process.running and process.proc.returncode != 0
        assert _gone(group), f"llama.py's process group {group} outlived the prebuild"
        assert not process.folder.exists()
        assert wait_done(flag, 60, lambda _: None) < 1.0
    finally:
        process.stop()


PARENT = """
import sys, time
from pathlib import Path
from pytest_qnn_genai.pipeline.products import Need
from pytest_qnn_genai.prebuild import launch
from pytest_qnn_genai.prebuild.process import PrebuildConfig
from tests.support.settings import settings_with

config = PrebuildConfig(settings_with(cache_dir=Path(sys.argv[1]), qnn_sdk=sys.argv[2]),
                        time.time())
process = launch.start([Need("legacy", "stories260k", "SM8650", "htp")], config)
print(process.pid, flush=True)
time.sleep(3600)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_the_prebuild_stops_when_its_session_process_dies(tmp_path: Path,
                                                         emulator_sdk_root: Path) -> None:
    """The session killed (SIGKILL: no handler runs): the kernel closes the pipe, the prebuild
    process kills llama.py's group and exits."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "cache"),
                               str(emulator_sdk_root)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert parent.stdout is not None
        prebuild = int(parent.stdout.readline())
        group = _wait_for_a_build_subprocess(prebuild)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert _gone(group, 30.0), f"llama.py's process group {group} outlived its session"
        deadline = time.monotonic() + 30
        while _alive(prebuild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(prebuild), "the prebuild process outlived its session"
    finally:
        parent.kill()
        parent.wait(timeout=30)
