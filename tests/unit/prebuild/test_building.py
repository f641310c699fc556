"""The prebuild's "still building" flag (``prebuild/building.py``): held while its steps run,
waited for by measurements."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from pytest_qnn_genai.prebuild.building import held, wait_done


def _hold_for(flag: Path, seconds: float) -> threading.Thread:
    ready = threading.Event()

    def hold() -> None:
        with held(flag):
            ready.set()
            time.sleep(seconds)

    thread = threading.Thread(target=hold)
    thread.start()
    assert ready.wait(10)
    return thread


def test_no_flag_no_wait(tmp_path: Path) -> None:
    said: list[str] = []
    assert wait_done(tmp_path / "building", 60, said.append) == 0.0
    assert said == []


def test_a_measurement_waits_until_the_builds_are_done(tmp_path: Path) -> None:
    flag = tmp_path / "building"
    thread = _hold_for(flag, 2.0)
    said: list[str] = []
    waited = wait_done(flag, 60, said.append)
    thread.join()
    assert waited >= 1.0, waited
    assert said == ["[qnn-genai] waiting for the prebuild's builds to end before measuring"]
    assert not flag.exists() and not list(tmp_path.iterdir())  # nothing left behind


def test_the_wait_is_bounded_and_says_so(tmp_path: Path) -> None:
    flag = tmp_path / "building"
    thread = _hold_for(flag, 4.0)
    said: list[str] = []
    waited = wait_done(flag, 1.5, said.append)
    assert 1.5 <= waited < 3.5, waited
    assert said[-1] == ("[qnn-genai] measuring beside the prebuild's builds: they did not end "
                        "in 2s")
    thread.join()


HOLDER = """
import sys, time
from pathlib import Path
from pytest_qnn_genai.prebuild.building import held
with held(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(3600)
"""


def test_a_dead_prebuild_leaves_no_wait(tmp_path: Path) -> None:
    """Killed (SIGKILL, nothing unlinks the flag): the kernel drops the lock, nobody waits."""
    flag = tmp_path / "building"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(flag)], stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[3])
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        assert wait_done(flag, 0.5, lambda _: None) >= 0.5  # held: waits (to the bound)
        proc.kill()
        proc.wait(30)
        assert flag.exists()
        assert wait_done(flag, 60, lambda _: None) < 1.0
    finally:
        proc.kill()
        proc.wait(30)


def test_without_a_place_for_the_flag_the_builds_go_on(tmp_path: Path) -> None:
    flag = tmp_path / "missing-folder" / "building"
    ran = []
    with held(flag):
        ran.append(True)
    assert ran and wait_done(flag, 60, lambda _: None) == 0.0
