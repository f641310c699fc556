"""Ending the prebuild process from a session: stopped at once, or building on until the other
xdist workers have ended (real child processes standing in for it: as the prebuild process
does, they exit on the ``drain`` line, their running steps done, or at end of file on stdin)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_qnn_genai.plugin import prebuild as plugin
from pytest_qnn_genai.prebuild.launch import PrebuildProcess

UNTIL_TOLD = "import sys; sys.stdin.readline()"  # runs until drained or its pipe is closed


def _process(tmp_path: Path, code: str) -> PrebuildProcess:
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    folder = tmp_path / "prebuild"
    folder.mkdir()
    return PrebuildProcess(proc, folder, [])


def test_finish_waits_for_the_whole_plan_while_others_run(tmp_path: Path) -> None:
    process = _process(tmp_path, "import time; time.sleep(1.0)")  # its plan takes 1 s
    start = time.monotonic()
    process.finish(lambda: False, poll_s=0.1)
    assert process.proc.returncode == 0  # it ended on its own: nothing was cut short
    assert time.monotonic() - start >= 0.9
    assert not process.folder.exists()


def test_finish_stops_it_once_the_others_have_ended(tmp_path: Path) -> None:
    process = _process(tmp_path, UNTIL_TOLD)
    asked: list[int] = []

    def others_done() -> bool:
        asked.append(1)
        return len(asked) >= 3

    process.finish(others_done, poll_s=0.05)
    assert len(asked) == 3 and not process.running  # stopped when asked the third time


def test_finish_gives_up_waiting_after_its_timeout(tmp_path: Path) -> None:
    process = _process(tmp_path, UNTIL_TOLD)
    start = time.monotonic()
    process.finish(lambda: False, timeout_s=0.3, poll_s=0.05)
    assert not process.running and time.monotonic() - start < 10


def _config(worker: str | None, run: str = "run1") -> SimpleNamespace:
    return SimpleNamespace(workerinput=None if worker is None else {
        "workerid": worker, "workercount": 3, "testrunuid": run})


def test_the_owner_sees_each_other_worker_end(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    owner, gw1, gw2 = _config("gw0"), _config("gw1"), _config("gw2")
    folder = plugin.ended_folder(owner)
    assert folder == tmp_path / "qnn-genai-ended-run1" == plugin.ended_folder(gw1)
    plugin.worker_ended(gw1)  # no prebuild running (no folder): nothing written
    assert not folder.exists()
    folder.mkdir()  # the owner started its prebuild
    assert not plugin.others_ended(owner, 3)
    plugin.worker_ended(gw1)
    plugin.worker_ended(owner)  # the owner's own end is not a marker
    assert not plugin.others_ended(owner, 3)
    plugin.worker_ended(gw2)
    assert plugin.others_ended(owner, 3)
    assert plugin.ended_folder(_config(None)) is None  # no xdist: nobody to wait for
    assert plugin.others_ended(_config(None), 1)
