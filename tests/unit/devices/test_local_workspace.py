"""Upstream's x86 runners on this machine: each session's workspace is its own folder.

The local transport's "device" is this machine, so the phone's ``/data/local/tmp`` would be one
folder for every process here; every runner call empties the workspace's ``run/`` first, so two
pytest sessions at once (xdist workers, or two checkouts) read each other's half-written runs
(measured: "qnn_llama_runner exited 0 but generated nothing")."""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.devices.local import LocalTransport
from pytest_qnn_genai.devices.session import DeviceSession
from pytest_qnn_genai.targets import soc


def _started(folder: Path) -> tuple[DeviceSession, LocalTransport]:
    runner = folder / "qnn_llama_runner"
    runner.parent.mkdir(parents=True)
    runner.write_text("#!/bin/sh\n")
    transport = LocalTransport(folder / "device")
    session = DeviceSession(transport, soc("SM8650"), runner, [], folder / "runs",
                            machine="x86_64")
    session.start()
    return session, transport


def test_two_local_sessions_never_share_a_workspace(tmp_path: Path) -> None:
    started = [_started(tmp_path / "one"), _started(tmp_path / "two")]
    paths = [Path(session.session_workspace.path) for session, _ in started]
    assert paths[0] != paths[1]
    for (_, transport), path in zip(started, paths):
        assert path.is_relative_to(transport.root.resolve()), path
        assert (path / "qnn_llama_runner").is_file()
