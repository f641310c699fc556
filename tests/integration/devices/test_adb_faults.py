"""Injected device faults give the documented outcome: infrastructure errors are retried with
bounded backoff and recover; runner failures and hangs are reported at once, never retried."""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_qnn_genai.devices.adb import AdbDevice
from pytest_qnn_genai.devices.transport import (
    TransportInfraError,
    TransportTimeout,
)
from pytest_qnn_genai.devices.workspace import DeviceWorkspace, RunnerFailedError
from tests.support.adb_server import LoopbackAdbServer
from tests.support.fake_device import SYNC_DATA_MAX, FakeDevice
from tests.support.llama_runner_standin import write_launcher

pytest_plugins = ["tests.support.adb_fixtures"]


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff delays the device waited (recorded instead of slept)."""
    return []


@pytest.fixture
def adb_device(adb_connect: Callable[..., AdbDevice], fake_device: FakeDevice,
               sleeps: list[float]) -> AdbDevice:
    """The fake device through the real client, recording its backoff into ``sleeps``."""
    return adb_connect(fake_device.serial, sleep=sleeps.append)


@pytest.fixture
def payload(tmp_path: Path) -> Path:
    path = tmp_path / "model.pte"
    path.write_bytes(os.urandom(2 * SYNC_DATA_MAX + 999))
    return path


def test_offline_for_two_commands_is_retried_and_recovers(
        adb_device: AdbDevice, fake_device: FakeDevice, adb_server: LoopbackAdbServer,
        sleeps: list[float]) -> None:
    fake_device.faults.offline_requests = 2
    assert adb_device.get_state() == "device"
    assert adb_server.count(f"host-serial:{fake_device.serial}:get-state") == 3
    assert sleeps == [0.05, 0.1]


def test_offline_shell_is_retried_then_runs_once(adb_device: AdbDevice, fake_device: FakeDevice,
                                                 sleeps: list[float]) -> None:
    fake_device.faults.offline_requests = 2
    assert adb_device.run("echo ran").stdout == "ran\n"
    assert len(fake_device.shell_commands) == 1
    assert len(sleeps) == 2


def test_offline_beyond_the_retry_budget_names_device_command_and_stderr(
        adb_device: AdbDevice, fake_device: FakeDevice, sleeps: list[float]) -> None:
    fake_device.faults.offline_requests = 100
    with pytest.raises(TransportInfraError) as info:
        adb_device.getprop("ro.soc.model")
    message = str(info.value)
    assert "gave up after 4 attempts" in message
    assert fake_device.serial in message and "getprop" in message and "device offline" in message
    assert sleeps == [0.05, 0.1, 0.2]  # bounded: capped at max_delay_s
    assert fake_device.shell_commands == []


def test_connection_dropped_mid_push_is_retried_and_recovers(
        adb_device: AdbDevice, fake_device: FakeDevice, payload: Path, sleeps: list[float]) -> None:
    fake_device.faults.drop_pushes = 1
    adb_device.copy(payload, "/data/local/tmp/model.pte")
    assert fake_device.sends == ["/data/local/tmp/model.pte"] * 2
    assert fake_device.local_path("/data/local/tmp/model.pte").read_bytes() == payload.read_bytes()
    assert len(sleeps) == 1


def test_truncated_pull_is_caught_by_size_check_and_retried(
        adb_device: AdbDevice, fake_device: FakeDevice, payload: Path, tmp_path: Path,
        sleeps: list[float]) -> None:
    adb_device.copy(payload, "/data/local/tmp/model.pte")
    fake_device.faults.truncate_pulls = 1  # server sends half the bytes and a clean DONE
    back = adb_device.pull("/data/local/tmp/model.pte", tmp_path / "back.pte")
    assert back.read_bytes() == payload.read_bytes()
    assert fake_device.recvs == ["/data/local/tmp/model.pte"] * 2
    assert len(sleeps) == 1


def test_pull_whose_connection_dies_mid_transfer_is_retried(
        adb_device: AdbDevice, fake_device: FakeDevice, payload: Path, tmp_path: Path,
        sleeps: list[float]) -> None:
    adb_device.copy(payload, "/data/local/tmp/model.pte")
    fake_device.faults.close_pulls = 1  # adb 29 exits 1 and prints nothing
    back = adb_device.pull("/data/local/tmp/model.pte", tmp_path / "back.pte")
    assert back.read_bytes() == payload.read_bytes()
    assert len(fake_device.recvs) == 2


def test_truncation_that_never_heals_is_reported(adb_device: AdbDevice, fake_device: FakeDevice,
                                                 payload: Path, tmp_path: Path,
                                                 sleeps: list[float]) -> None:
    adb_device.copy(payload, "/data/local/tmp/model.pte")
    fake_device.faults.truncate_pulls = 100
    with pytest.raises(TransportInfraError) as info:
        adb_device.pull("/data/local/tmp/model.pte", tmp_path / "back.pte")
    assert "truncated pull" in str(info.value) and fake_device.serial in str(info.value)
    assert len(fake_device.recvs) == 4


def _workspace_with_runner(adb_device: AdbDevice, tmp_path: Path) -> tuple[DeviceWorkspace, Path, str, str]:
    workspace = DeviceWorkspace(adb_device, "faults")
    (tmp_path / "m.pte").write_bytes(b"pte")
    (tmp_path / "t.bin").write_bytes(b"tok")
    pte = workspace.push_artifact(tmp_path / "m.pte", "d1")
    tok = workspace.push_artifact(tmp_path / "t.bin", "d2")
    return workspace, write_launcher(tmp_path / "runner.sh"), pte, tok


def test_runner_exiting_nonzero_fails_at_once_without_retry(
        adb_device: AdbDevice, fake_device: FakeDevice, tmp_path: Path, sleeps: list[float]) -> None:
    workspace, runner, pte, tok = _workspace_with_runner(adb_device, tmp_path)
    fake_device.faults.exit_codes["./qnn_llama_runner"] = 3
    with pytest.raises(RunnerFailedError) as info:
        workspace.run_llama_runner(runner, pte, tok, "Once", 32, timeout=30, local_dir=tmp_path / "o")
    assert info.value.exit_code == 3
    assert fake_device.serial in str(info.value) and "qnn_llama_runner" in str(info.value)
    assert "fault injected: exit 3" in str(info.value)  # from the pulled run.log
    runs = [c for c in fake_device.shell_commands if "./qnn_llama_runner" in c]
    assert len(runs) == 1 and sleeps == []


def test_runner_failure_carries_the_run_log(adb_device: AdbDevice, fake_device: FakeDevice,
                                            tmp_path: Path, sleeps: list[float]) -> None:
    """A missing model: upstream's Runner::load fails, start_runner's Result::get() aborts."""
    workspace, runner, _, tok = _workspace_with_runner(adb_device, tmp_path)
    missing = workspace.remote("artifacts", "nope", "m.pte")
    with pytest.raises(RunnerFailedError) as info:
        workspace.run_llama_runner(runner, missing, tok, "Once", 32, timeout=30, local_dir=tmp_path / "o")
    assert info.value.exit_code == 134 and "loading the model failed" in info.value.log
    assert info.value.summary.startswith("qnn_llama_runner exited 134 (abort): F ")
    assert info.value.summary.endswith("In function CheckOk(), assert failed: hasValue_")
    assert (tmp_path / "o" / "run.log").is_file() and sleeps == []


def test_runner_abort_is_reported_with_its_assert_line(
        adb_device: AdbDevice, fake_device: FakeDevice, tmp_path: Path, sleeps: list[float]) -> None:
    """--seq_len not above the prompt: runner.cpp's ET_CHECK_MSG aborts (shell status 134); the
    error is one line naming the exit code and the F line, and the runner ran once."""
    workspace, runner, pte, tok = _workspace_with_runner(adb_device, tmp_path)
    with pytest.raises(RunnerFailedError) as info:  # "Once" is BOS + 1 word: 2 tokens
        workspace.run_llama_runner(runner, pte, tok, "Once", 2, timeout=30, local_dir=tmp_path / "o")
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"device {fake_device.serial}: qnn_llama_runner exited 134 (abort): F ")
    assert first.endswith("sequence length exceeded - please increase the seq_len value")
    assert "In function generate_from_prompt_or_file(), assert failed" in first
    assert sum("./qnn_llama_runner" in c for c in fake_device.shell_commands) == 1 and sleeps == []


def test_hanging_command_times_out_naming_device_and_command(
        adb_device: AdbDevice, fake_device: FakeDevice, sleeps: list[float]) -> None:
    fake_device.faults.hang_pattern = "./qnn_llama_runner"
    started = time.monotonic()
    with pytest.raises(TransportTimeout) as info:
        adb_device.run("./qnn_llama_runner --seq_len 128", 1.0)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 3.0
    message = str(info.value)
    assert fake_device.serial in message and "qnn_llama_runner --seq_len 128" in message
    assert "timed out after 1 s" in message
    assert len(fake_device.shell_commands) == 1 and sleeps == []
    deadline = time.monotonic() + 3
    while fake_device.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not fake_device.running  # the remote command died with the client


def test_dump_logits_requires_kv_eval_mode(adb_device: AdbDevice) -> None:
    workspace = DeviceWorkspace(adb_device, "modes")
    with pytest.raises(ValueError, match="eval_mode 0"):
        workspace.runner_command("m.pte", "t.bin", "Once", 32, eval_mode=1, dump_logits=True)
