"""Pytest fixtures for device tests: a loopback adb server, sandbox devices, and AdbDevice
objects that drive the real ``adb`` client against them.

Load with ``pytest_plugins = ["tests.support.adb_fixtures"]`` in the repository's root
``conftest.py`` or in a test module (pytest ignores ``pytest_plugins`` in other conftests).
"""
from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_qnn_genai.devices.adb import AdbDevice, RetryPolicy
from tests.support.adb_server import LoopbackAdbServer
from tests.support.fake_device import FakeDevice, loopback_props

TEST_SERIAL = "QNNLOOP0001"
SM8650_PROPS = loopback_props("SM8650")
FAST_RETRY = RetryPolicy(attempts=4, base_delay_s=0.05, max_delay_s=0.2)
ADB_ENV_VARS = ("ADB_SERVER_SOCKET", "ANDROID_SERIAL", "ANDROID_ADB_SERVER_PORT",
                "ANDROID_ADB_SERVER_ADDRESS", "ADB_VENDOR_KEYS", "ADB_TRACE")


@pytest.fixture(scope="session")
def adb_client() -> str:
    """Path of the real adb client binary; these tests fail (not skip) without one."""
    path = shutil.which("adb")
    if path is None:
        pytest.fail("the adb client is not installed: `make adb` (Debian: apt-get install -y adb)",
                    pytrace=False)
    return path


@pytest.fixture
def adb_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackAdbServer]:
    """A running loopback adb server with no devices; HOME and adb env vars isolated."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ADB_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    server = LoopbackAdbServer(tmp_path / "devices").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_device(adb_server: LoopbackAdbServer) -> FakeDevice:
    """One SM8650 sandbox device on the loopback server."""
    return adb_server.add_device(TEST_SERIAL, dict(SM8650_PROPS))


@pytest.fixture
def adb_connect(adb_server: LoopbackAdbServer, adb_client: str) -> Callable[..., AdbDevice]:
    """Factory ``adb_connect(serial, port=None, **AdbDevice options)``: an AdbDevice that
    reaches the loopback server (or ``port``) through the real client, with fast retries."""

    def connect(serial: str, port: int | None = None, **kwargs: Any) -> AdbDevice:
        options: dict[str, Any] = {"command_timeout_s": 10.0, "transfer_timeout_s": 20.0,
                                   "retry": FAST_RETRY}
        options.update(kwargs)
        return AdbDevice(serial, adb_path=adb_client, host="127.0.0.1",
                         port=port or adb_server.port, **options)

    return connect


@pytest.fixture
def adb_device(adb_connect: Callable[..., AdbDevice], fake_device: FakeDevice) -> AdbDevice:
    """AdbDevice for :func:`fake_device`."""
    return adb_connect(fake_device.serial)
