"""A device lab without phones: two loopback adb servers (the real adb client talks to both), each
serving a phone with the *same* serial, reached as ``--device SERIAL@127.0.0.1:PORT``. Under
``-n 2`` each xdist worker owns the phone on its own server; without xdist one process drives both.
The phones run ExecuTorch's own qnn_llama_runner built for x86_64 (the session's --executorch-src)
on the emulator's stories260k build, with the emulator SDK's QNN libraries."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.adb_server import LoopbackAdbServer
from tests.support.fake_device import FakeDevice, loopback_props

pytest_plugins = ["tests.support.adb_fixtures"]

SERIAL = f"QNNLAB{os.getpid()}"  # the same serial on both servers: a phone is serial + server
PROPS = loopback_props("SM8650")
LAB_TEST = """
import json, os, pytest

@pytest.mark.device
def test_lab_phone(qnn_pipeline, qnn_devices, qnn_case, qnn_target):
    session = qnn_devices.session(qnn_target)
    result = qnn_pipeline.run(qnn_case, qnn_target, "Once", 6)
    assert result.device == session.serial and result.text
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(os.environ["LAB_OUT"], f"{worker}-{session.device.port}"), "w") as f:
        json.dump({"target": qnn_target.id, "port": session.device.port}, f)
"""


@pytest.fixture
def lab(tmp_path: Path, adb_server: LoopbackAdbServer,
        ) -> Iterator[list[tuple[LoopbackAdbServer, FakeDevice]]]:
    """Two adb servers (the fixture's and a second one), one phone each, one serial."""
    second = LoopbackAdbServer(tmp_path / "lab2").start()
    try:
        yield [(adb_server, adb_server.add_device(SERIAL, dict(PROPS))),
               (second, second.add_device(SERIAL, dict(PROPS)))]
    finally:
        second.stop()


@pytest.fixture
def lab_args(lab, adb_client: str, qnn_settings, x86_runners, emulator_sdk_root: Path,
             ) -> list[str]:
    """Upstream's x86 runners and the emulator SDK's QNN libraries on both lab phones."""
    runner, libs = x86_runners.llama_runner, emulator_sdk_root
    devices = [a for server, _ in lab for a in ("--device", f"{SERIAL}@127.0.0.1:{server.port}")]
    return [*devices, "-p", "no:cacheprovider", "--models", "stories260k", "--adb-path",
            adb_client, "--runner", str(runner), "--qnn-device-libs", str(libs),
            "--qnn-cache-dir", str(qnn_settings.cache_dir),
            "--adb-host", "127.0.0.1:9"]  # ignored by SERIAL@HOST:PORT entries (nothing on 9)


def _runner_calls(device: FakeDevice) -> int:
    return sum("./qnn_llama_runner " in c for c in device.shell_commands)


def _reached(out: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in out.iterdir()}


def test_each_xdist_worker_owns_the_phone_on_its_own_server(
        pytester: pytest.Pytester, lab, lab_args, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "reached"
    out.mkdir()
    monkeypatch.setenv("LAB_OUT", str(out))
    pytester.makepyfile(LAB_TEST)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "each", *lab_args, timeout=600)
    result.assert_outcomes(passed=2)  # the one test, on each worker
    (a, phone_a), (b, phone_b) = lab
    assert _reached(out) == {f"gw0-{a.port}": {"target": "SM8650-htp-device", "port": a.port},
                             f"gw1-{b.port}": {"target": "SM8650-htp-device", "port": b.port}}
    assert _runner_calls(phone_a) == 1 and _runner_calls(phone_b) == 1
    for server in (a, b):
        assert server.count(f"host:tport:serial:{SERIAL}") > 0


def test_one_process_drives_both_lab_phones(pytester: pytest.Pytester, lab, lab_args,
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "reached"
    out.mkdir()
    monkeypatch.setenv("LAB_OUT", str(out))
    pytester.makepyfile(LAB_TEST)
    result = pytester.runpytest_subprocess("-v", *lab_args, timeout=600)
    result.assert_outcomes(passed=2)
    (a, phone_a), (b, phone_b) = lab
    result.stdout.fnmatch_lines_random([
        f"*test_lab_phone?stories260k-SM8650-htp-{SERIAL}@127.0.0.1:{a.port}? PASSED*",
        f"*test_lab_phone?stories260k-SM8650-htp-{SERIAL}@127.0.0.1:{b.port}? PASSED*"])
    assert set(_reached(out)) == {f"main-{a.port}", f"main-{b.port}"}
    assert _runner_calls(phone_a) == 1 and _runner_calls(phone_b) == 1
