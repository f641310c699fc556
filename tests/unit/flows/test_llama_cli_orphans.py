"""A llama.py build dies with the process that started it, however that process dies.

``run_logged`` kills its process group on a timeout or a Python exception; a SIGKILL (or a SIGTERM
no handler turns into an exception) runs neither, and the build used to run on, orphaned. Here a
stand-in for pytest starts a long command through ``run_logged`` and is killed by SIGKILL: the
command's process must be gone within seconds. The fault this guards is shown by the same command
started without the launcher (a plain ``Popen`` in its own session): it outlives its parent.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PARENT = """
import subprocess, sys, time
from pathlib import Path
from pytest_qnn_genai.flows.llama_cli import run_logged
tmp = Path(sys.argv[1])
argv = ["sh", "-c", f"echo $$ > {tmp / 'child.pid'}; exec sleep 120"]
if sys.argv[2] == "launcher":
    run_logged(argv, {}, tmp, tmp / "log", 300.0, "a long build")
else:
    subprocess.Popen(argv, start_new_session=True)
    time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _orphan_after_parent_killed(tmp_path: Path, how: str) -> tuple[int, bool]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), how], env=env)
    pid_file = tmp_path / "child.pid"
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline and parent.poll() is None, "the command never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    deadline = time.monotonic() + 3  # the kernel kills it at once
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    return child, alive


def test_the_build_dies_with_its_parent(tmp_path: Path) -> None:
    child, alive = _orphan_after_parent_killed(tmp_path, "launcher")
    assert not alive, f"the build (pid {child}) outlived the killed pytest"


def test_without_the_launcher_it_is_orphaned(tmp_path: Path) -> None:
    child, alive = _orphan_after_parent_killed(tmp_path, "plain")
    assert alive, f"pid {child} died with its parent: this test could not show the fault"
