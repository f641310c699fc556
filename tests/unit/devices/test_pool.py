"""One device per xdist worker, and the cross-process lock per serial."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_qnn_genai.devices.pool import (
    DeviceBusyError,
    assign_device,
    assign_from_env,
    device_lock,
    lease_device,
    lock_path,
    worker_index,
)

SERIALS = ["R5CX1", "R5CX2", "R5CX3"]
HOLD_LOCK = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire(timeout=float(sys.argv[2]))
print("locked", flush=True)
sys.stdin.read()
"""


def test_each_worker_gets_its_own_device() -> None:
    assert [assign_device(SERIALS, f"gw{i}", 3) for i in range(3)] == SERIALS
    assert assign_device(SERIALS, "gw1", 2) == "R5CX2"


def test_without_xdist_the_first_device_is_used() -> None:
    assert assign_device(SERIALS, None, None) == "R5CX1"
    assert worker_index("master") == 0


def test_no_devices_means_no_assignment() -> None:
    assert assign_device([], "gw5", 8) is None


def test_more_workers_than_devices_is_a_clear_error() -> None:
    with pytest.raises(ValueError) as info:
        assign_device(SERIALS[:2], "gw0", 3)
    message = str(info.value)
    assert "3 workers" in message and "2 --device" in message and "R5CX1, R5CX2" in message
    assert "-n 2" in message
    with pytest.raises(ValueError, match="3 workers"):
        assign_device(SERIALS[:2], "gw2", None)


def test_repeated_serial_and_odd_worker_id_are_errors() -> None:
    with pytest.raises(ValueError, match="R5CX1 more than once"):
        assign_device(["R5CX1", "R5CX1"], "gw0", 1)
    with pytest.raises(ValueError, match="worker id"):
        worker_index("worker-1")


def test_assignment_reads_the_xdist_environment() -> None:
    env = {"PYTEST_XDIST_WORKER": "gw2", "PYTEST_XDIST_WORKER_COUNT": "3"}
    assert assign_from_env(SERIALS, env) == "R5CX3"
    assert assign_from_env(SERIALS, {}) == "R5CX1"


def test_lock_file_name_is_safe_for_network_serials(tmp_path: Path) -> None:
    assert lock_path("192.168.1.7:5555", tmp_path) == tmp_path / "192.168.1.7_5555.lock"


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path), "10"], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_a_device_locked_by_another_process_is_refused(tmp_path: Path) -> None:
    holder = _holder(lock_path("R5CX1", tmp_path))
    try:
        with pytest.raises(DeviceBusyError, match="R5CX1 is in use by another process"):
            with device_lock("R5CX1", tmp_path, timeout_s=0.2):
                pass
        with device_lock("R5CX2", tmp_path, timeout_s=0.2):  # other phones stay free
            pass
    finally:
        holder.communicate("", timeout=10)
    with device_lock("R5CX1", tmp_path, timeout_s=2):  # released when the holder exits
        pass


def test_lease_holds_the_lock_against_other_processes(tmp_path: Path) -> None:
    env = {"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"}
    with lease_device(SERIALS[:2], tmp_path, env=env) as serial:
        assert serial == "R5CX2"
        probe = subprocess.run([sys.executable, "-c", HOLD_LOCK, str(lock_path(serial, tmp_path)),
                                "0.2"], input="", capture_output=True, text=True, timeout=20)
        assert probe.returncode != 0 and "Timeout" in probe.stderr
    with lease_device([], tmp_path, env=env) as nothing:
        assert nothing is None
