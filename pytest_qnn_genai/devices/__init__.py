"""Real-device layer: the ``adb`` client wrapper, the device workspace, runner output parsing
and the per-worker device pool."""
from __future__ import annotations

from pytest_qnn_genai.devices.adb import (
    AdbCommandError,
    AdbDevice,
    AdbError,
    AdbInfraError,
    AdbTimeout,
    DeviceHealthError,
    DeviceInfo,
    RetryPolicy,
    ShellResult,
)
from pytest_qnn_genai.devices.pool import DeviceBusyError, assign_device, device_lock, lease_device
from pytest_qnn_genai.devices.runner_output import LogitsQuant, RunnerFiles, parse_runner_files
from pytest_qnn_genai.devices.workspace import DeviceWorkspace, RunnerFailedError

__all__ = [
    "AdbCommandError",
    "AdbDevice",
    "AdbError",
    "AdbInfraError",
    "AdbTimeout",
    "DeviceBusyError",
    "DeviceHealthError",
    "DeviceInfo",
    "DeviceWorkspace",
    "LogitsQuant",
    "RetryPolicy",
    "RunnerFailedError",
    "RunnerFiles",
    "ShellResult",
    "assign_device",
    "device_lock",
    "lease_device",
    "parse_runner_files",
]
