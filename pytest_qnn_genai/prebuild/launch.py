"""Start and stop the prebuild process from a session (pytest-free).

:func:`start` writes the plan into a fresh temporary folder and starts
``python -m pytest_qnn_genai.prebuild`` there, in its own session (a Ctrl-C on the terminal
reaches pytest, which stops it), with this package's folder first on its ``PYTHONPATH`` (it must
run the very code the tests run: the code is in the cache keys), its stdin a pipe from this
process, its progress lines on ``terminal_fd`` and its build output in the folder's log.
:meth:`PrebuildProcess.stop` ends it (the pipe closed: it kills its builds' process groups and
exits), :meth:`PrebuildProcess.drain` lets its running steps finish first,
:meth:`PrebuildProcess.finish` lets it build the rest of its plan while other processes may
still need it. All are bounded, then SIGKILL; all read its statistics and remove the folder.
If this process dies, the kernel closes the pipe and the prebuild process stops the same way: it
never outlives the session.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest_qnn_genai
from pytest_qnn_genai.pipeline.products import Need
from pytest_qnn_genai.prebuild.process import DRAIN, PrebuildConfig, write_plan

STOP_TIMEOUT_S = 30.0  # to kill its builds and exit after the pipe is closed
DRAIN_TIMEOUT_S = 1500.0  # for the running steps to finish (llama.py's own bound is 1200 s)
FINISH_TIMEOUT_S = 3600.0  # for the plan to be built while other workers may still need it


class PrebuildProcess:
    """One running prebuild process and its folder (plan, log, statistics)."""

    def __init__(self, proc: subprocess.Popen[bytes], folder: Path, steps: Sequence[Need]) -> None:
        self.proc = proc
        self.folder = folder
        self.steps = list(steps)
        self._stats: dict[str, object] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout_s: float) -> bool:
        """True once the process has exited (all steps done), False after ``timeout_s``."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def finish(self, others_done: Callable[[], bool], timeout_s: float = FINISH_TIMEOUT_S,
               poll_s: float = 1.0) -> dict[str, object]:
        """Let it build its whole plan until ``others_done()`` (the processes that may need its
        entries have all ended: what is left nobody asks for) or ``timeout_s``, then stop it
        (after the timeout its running steps may finish first: :meth:`drain`)."""
        deadline = time.monotonic() + timeout_s
        while self.running and not others_done():
            if time.monotonic() >= deadline:
                return self.drain()
            self.wait(poll_s)
        return self.stop()

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> dict[str, object]:
        """Start no more steps, let the running ones finish (up to ``timeout_s``), then stop."""
        if self.running and self.proc.stdin is not None:
            try:
                self.proc.stdin.write((DRAIN + "\n").encode())
                self.proc.stdin.flush()
            except OSError:
                pass  # it is exiting already
            self.wait(timeout_s)
        return self.stop()

    def stop(self) -> dict[str, object]:
        """Kill it and its builds now (idempotent); the cache statistics of what it built."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()  # end of file: it kills its builds' groups and exits
            except OSError:
                pass
        if not self.wait(STOP_TIMEOUT_S):
            self.proc.kill()
            self.proc.wait()
        if self._stats is None:
            self._stats = _read_stats(self.folder / "stats.json")
            shutil.rmtree(self.folder, ignore_errors=True)
        return self._stats


def _read_stats(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def start(steps: Sequence[Need], config: PrebuildConfig, terminal_fd: int = 2) -> PrebuildProcess:
    """Start the prebuild process for ``steps`` (``config``'s ``stats_file`` and ``log`` are set
    here, in its folder)."""
    folder = Path(tempfile.mkdtemp(prefix="qnn-genai-prebuild-"))
    config = dataclasses.replace(config, stats_file=str(folder / "stats.json"),
                                 log=str(folder / "build.log"))
    plan_file = folder / "plan.pickle"
    write_plan(plan_file, config, steps)
    env = dict(os.environ)
    here = str(Path(pytest_qnn_genai.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([here, *(x for x in env.get("PYTHONPATH", "").split(
        os.pathsep) if x and x != here)])
    proc = subprocess.Popen([sys.executable, "-m", "pytest_qnn_genai.prebuild", str(plan_file)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=terminal_fd,
                            env=env, start_new_session=True)
    return PrebuildProcess(proc, folder, steps)
