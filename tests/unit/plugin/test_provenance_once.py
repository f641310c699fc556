"""An update run's provenance is the tree as it was before the run wrote anything: its own first
write to ``golden/accepted`` makes the tree dirty, and the figures written after it said ``+dirty``
(the accepted-record test refuses those)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_qnn_genai.plugin import accepted


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          timeout=30).stdout.strip()


def test_provenance_is_read_once_before_the_run_writes(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "record.json").write_text("{}")
    _git(tmp_path, "add", "record.json")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clean")
    sha = _git(tmp_path, "rev-parse", "HEAD")
    config = SimpleNamespace(stash=pytest.Stash(), rootpath=tmp_path,
                             invocation_params=SimpleNamespace(args=("suites", "--qnn-update-golden")))
    first = accepted.provenance(config)
    assert first.commit == sha and first.command == "pytest suites --qnn-update-golden"
    (tmp_path / "record.json").write_text('{"figure": 1}')  # the run's own first write
    assert accepted.provenance(config) == first
    # what a fresh read says now: the fault a second read would carry into every later figure
    assert accepted._read_provenance(config).commit == sha + "+dirty"
