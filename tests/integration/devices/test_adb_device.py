"""AdbDevice and DeviceWorkspace through the real adb client against the loopback adb server."""
from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.devices.adb import AdbDevice, split_adb_host
from pytest_qnn_genai.devices.runner_output import LogitsQuant, parse_runner_files
from pytest_qnn_genai.devices.transport import (
    DeviceHealthError,
    TransportCommandError,
    TransportInfraError,
)
from pytest_qnn_genai.devices.workspace import DeviceWorkspace
from tests.support.adb_server import LoopbackAdbServer
from tests.support.fake_device import SYNC_DATA_MAX, FakeDevice
from tests.support.llama_runner_standin import write_launcher
from tests.support.standin_backends import TOY_ENV

pytest_plugins = ["tests.support.adb_fixtures"]


def test_get_state_goes_through_the_server(adb_device: AdbDevice, adb_server: LoopbackAdbServer) -> None:
    assert adb_device.get_state() == "device"
    assert f"host-serial:{adb_device.serial}:get-state" in adb_server.requests


def test_getprop_reads_the_device_properties(adb_device: AdbDevice) -> None:
    assert adb_device.getprop("ro.soc.model") == "SM8650"
    assert adb_device.getprop("ro.board.platform") == "pineapple"
    assert adb_device.getprop("persist.not.set") == ""


def test_shell_returns_real_exit_code_stdout_and_stderr(adb_device: AdbDevice,
                                                        adb_server: LoopbackAdbServer) -> None:
    result = adb_device.run("echo out; echo err >&2; exit 7")
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")
    assert adb_server.count("shell,v2,") == 1  # the v2 protocol, so the exit code is the remote's


def test_shell_check_raises_command_error_without_retry(adb_device: AdbDevice,
                                                        adb_server: LoopbackAdbServer) -> None:
    with pytest.raises(TransportCommandError) as info:
        adb_device.run("echo boom >&2; exit 3", check=True)
    assert info.value.returncode == 3 and "boom" in str(info.value)
    assert adb_device.serial in str(info.value)
    assert adb_server.count("shell,v2,") == 1


def test_command_that_prints_an_adb_error_is_not_mistaken_for_infra(
        adb_device: AdbDevice, adb_server: LoopbackAdbServer) -> None:
    result = adb_device.run("echo 'error: device offline' >&2; echo 'Connection reset' >&2; exit 1")
    assert result.exit_code == 1 and "device offline" in result.stderr
    assert adb_server.count("shell,v2,") == 1


def test_push_then_pull_round_trip_is_byte_identical(adb_device: AdbDevice, fake_device: FakeDevice,
                                                     tmp_path: Path) -> None:
    big = tmp_path / "model.pte"
    big.write_bytes(os.urandom(3 * SYNC_DATA_MAX + 123))  # several DATA chunks each way
    small = tmp_path / "tokenizer.bin"
    small.write_bytes(b"tok\x00\xff" * 10)
    for local in (big, small):
        remote = f"/data/local/tmp/rt/{local.name}"
        adb_device.copy(local, remote)
        assert fake_device.local_path(remote).read_bytes() == local.read_bytes()
        back = adb_device.pull(remote, tmp_path / f"back-{local.name}")
        assert back.read_bytes() == local.read_bytes()
    assert adb_device.remote_size("/data/local/tmp/rt/model.pte") == big.stat().st_size


def test_pull_of_missing_file_is_a_command_error(adb_device: AdbDevice, tmp_path: Path) -> None:
    with pytest.raises(TransportCommandError) as info:
        adb_device.pull("/data/local/tmp/absent.bin", tmp_path / "x", expected_size=0)
    assert "absent.bin" in str(info.value)


def test_unknown_serial_is_infra_error_naming_serial_and_command(
        adb_server: LoopbackAdbServer, fake_device: FakeDevice,
        adb_connect: Callable[..., AdbDevice]) -> None:
    ghost = adb_connect("GHOST42")
    with pytest.raises(TransportInfraError) as info:
        ghost.run("true")
    message = str(info.value)
    assert "GHOST42" in message and "shell" in message and "not found" in message
    assert "gave up after 4 attempts" in message
    assert adb_server.count("host-serial:GHOST42:features") == 4


def test_dead_server_is_infra_error_and_no_server_is_spawned(
        adb_connect: Callable[..., AdbDevice], tmp_path: Path) -> None:
    dead = LoopbackAdbServer(tmp_path / "dead")
    port = dead.port
    dead.stop()  # bound then closed: nothing listens on the port now
    with pytest.raises(TransportInfraError) as info:
        adb_connect("ANY", port=port).get_state()
    assert "cannot connect to daemon" in str(info.value)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_health_check_accepts_matching_soc(adb_device: AdbDevice) -> None:
    info = adb_device.health("sm8650")
    assert (info.serial, info.soc, info.board_platform) == (adb_device.serial, "SM8650", "pineapple")


def test_health_check_maps_board_platform_when_soc_model_is_unset(
        adb_server: LoopbackAdbServer, adb_connect: Callable[..., AdbDevice]) -> None:
    adb_server.add_device("OLDPHONE", {"ro.board.platform": "kalama"})
    assert adb_connect("OLDPHONE").health("SM8550").soc == "SM8550"


def test_health_check_rejects_a_different_soc(adb_device: AdbDevice) -> None:
    with pytest.raises(DeviceHealthError) as info:
        adb_device.health("SM8750")
    message = str(info.value)
    assert adb_device.serial in message and "SM8650" in message and "SM8750" in message


def test_device_without_shell_v2_works_but_fails_the_health_check(
        adb_server: LoopbackAdbServer, adb_connect: Callable[..., AdbDevice], tmp_path: Path) -> None:
    old = adb_server.add_device("ANDROID6", {"ro.soc.model": "SM8650"})
    old.features = "cmd"  # no shell_v2, no stat_v2: legacy "shell:" and v1 STAT
    device = adb_connect("ANDROID6")
    assert device.run("echo legacy; exit 5").exit_code == 0  # why shell_v2 is required
    assert adb_server.count("shell:echo") == 1
    note = tmp_path / "n.txt"
    note.write_text("v1 sync")
    device.copy(note, "/data/local/tmp/n.txt")
    assert device.pull("/data/local/tmp/n.txt", tmp_path / "back.txt").read_text() == "v1 sync"
    with pytest.raises(DeviceHealthError, match="shell_v2"):
        device.health("SM8650")


def test_two_devices_on_one_server_are_isolated(
        adb_server: LoopbackAdbServer, adb_connect: Callable[..., AdbDevice], tmp_path: Path) -> None:
    adb_server.add_device("PHONE_A", {"ro.soc.model": "SM8650"})
    adb_server.add_device("PHONE_B", {"ro.soc.model": "SM8750"})
    a, b = (adb_connect(s) for s in ("PHONE_A", "PHONE_B"))
    note = tmp_path / "note.txt"
    note.write_text("only on A")
    a.copy(note, "/data/local/tmp/note.txt")
    assert a.run("cat /data/local/tmp/note.txt").stdout == "only on A"
    assert b.run("test -e /data/local/tmp/note.txt").exit_code == 1
    assert (a.getprop("ro.soc.model"), b.getprop("ro.soc.model")) == ("SM8650", "SM8750")


def test_split_adb_host() -> None:
    assert split_adb_host("10.0.0.2:5038") == ("10.0.0.2", 5038)
    assert split_adb_host("buildbox") == ("buildbox", None)
    assert split_adb_host(None) == (None, None)


@pytest.fixture
def qnn_libs(tmp_path: Path) -> list[Path]:
    libs = []
    for name in ("libQnnHtp.so", "libQnnHtpV75Skel.so", "libQnnSystem.so"):
        path = tmp_path / "libs" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(name.encode() * 1000)
        libs.append(path)
    return libs


def test_libs_are_pushed_once_then_skipped_by_digest(adb_device: AdbDevice, fake_device: FakeDevice,
                                                     qnn_libs: list[Path]) -> None:
    workspace = DeviceWorkspace(adb_device, "session-1")
    assert workspace.push_libs(qnn_libs) is True
    assert len(fake_device.sends) == 3
    assert DeviceWorkspace(adb_device, "session-1").push_libs(qnn_libs) is False
    assert len(fake_device.sends) == 3
    for lib in qnn_libs:
        remote = fake_device.local_path(workspace.remote(lib.name))
        assert remote.read_bytes() == lib.read_bytes()
    qnn_libs[0].write_bytes(b"a newer SDK")
    assert workspace.push_libs(qnn_libs) is True
    assert len(fake_device.sends) == 4  # only the changed library
    assert fake_device.local_path(workspace.remote(qnn_libs[0].name)).read_bytes() == b"a newer SDK"


def test_artifact_is_pushed_only_if_absent(adb_device: AdbDevice, fake_device: FakeDevice,
                                           tmp_path: Path) -> None:
    pte = tmp_path / "stories.pte"
    pte.write_bytes(os.urandom(70_000))
    workspace = DeviceWorkspace(adb_device, "session-2")
    remote = workspace.push_artifact(pte, "abc123")
    assert remote == "/data/local/tmp/pytest-qnn-genai/session-2/artifacts/abc123/stories.pte"
    assert workspace.push_artifact(pte, "abc123") == remote
    assert fake_device.sends == [remote + ".partial"]
    assert fake_device.local_path(remote).read_bytes() == pte.read_bytes()


def test_runner_round_trip_pulls_outputs_and_parses_them(
        adb_device: AdbDevice, fake_device: FakeDevice, qnn_libs: list[Path], tmp_path: Path) -> None:
    """Transport and parsing only: the runner stand-in on its model-free toy backend (the word w
    is token 3 + len(w) % 61, position p predicts 3 + p % 61, piece " t<id>"; 0.1 s per
    prefill call, 0.05 s per kv call, as reported time)."""
    workspace = DeviceWorkspace(adb_device, "session-3")
    workspace.push_libs(qnn_libs)
    (tmp_path / "m.pte").write_bytes(b"pte")
    (tmp_path / "t.bin").write_bytes(b"tok")
    pte = workspace.push_artifact(tmp_path / "m.pte", "d1")
    tok = workspace.push_artifact(tmp_path / "t.bin", "d2")
    runner = write_launcher(tmp_path / "runner.sh", env={
        TOY_ENV: json.dumps({"prefill_call_s": 0.1, "kv_call_s": 0.05})})
    prompt = "Once upon a 'time'"  # BOS + 4 words: P = 5
    files = workspace.run_llama_runner(runner, pte, tok, prompt, seq_len=12, timeout=30,
                                       local_dir=tmp_path / "out", eval_mode=0, dump_logits=True)
    assert files.exit_code == 0 and files.logits_bin is not None and files.run_log is not None
    runs = [c for c in fake_device.shell_commands if "./qnn_llama_runner --model_path" in c]
    assert len(runs) == 1 and "LD_LIBRARY_PATH=." in runs[0] and "--shared_buffer" not in runs[0]
    result = parse_runner_files(files, prompt, device=adb_device.serial, vocab_size=64,
                                quant=LogitsQuant(scale=0.001, zero_point=32768))
    assert result.text == " t7 t8 t9 t10 t11 t12 t13"  # S - P = 7: the prefill token + 6 steps
    assert (result.perf.prompt_tokens, result.perf.generated_tokens) == (5, 7)
    assert result.perf.decode_tok_s == pytest.approx(6 / 0.3, rel=0.1)  # 6 kv calls, 0.3 s
    assert result.logits is not None and result.logits.shape == (7, 64)
    assert list(result.logits.argmax(axis=1)) == list(range(7, 14))  # row P-1, then decode rows
    assert np.isclose(result.logits.max(), (60000 - 32768) * 0.001)
    workspace.push_runner(runner)
    assert sum(1 for s in fake_device.sends if s.endswith("qnn_llama_runner.partial")) == 1
