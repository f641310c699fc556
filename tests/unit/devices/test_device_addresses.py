"""``--device SERIAL@HOST:PORT``: the form, the server each entry resolves to, a phone's identity
(serial + server) for locks and duplicates, and one-line usage errors."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_qnn_genai.devices.pool import (
    DeviceAddress,
    device_address,
    lock_path,
    parse_device,
    same_phones,
)
from pytest_qnn_genai.devices.setup import DeviceSetupError, adb_device, validate


@pytest.mark.parametrize("entry,expected", [
    ("R5CX1", ("R5CX1", None, None)),
    ("192.168.1.7:5555", ("192.168.1.7:5555", None, None)),  # a network phone's serial
    ("R5CX1@10.0.0.5:5037", ("R5CX1", "10.0.0.5", 5037)),
    ("emulator-5554@lab-b.example:5038", ("emulator-5554", "lab-b.example", 5038)),
    ("192.168.1.7:5555@lab:5037", ("192.168.1.7:5555", "lab", 5037)),
    ("R5@[::1]:5037", ("R5", "::1", 5037)),
])
def test_device_forms(entry: str, expected: tuple) -> None:
    assert parse_device(entry) == expected


@pytest.mark.parametrize("entry,message", [
    ("@10.0.0.5:5037", "'@10.0.0.5:5037' has no serial before '@' (expected SERIAL or "
                       "SERIAL@HOST:PORT, e.g. R5CX1234ABC@10.0.0.5:5037)"),
    ("R5@10.0.0.5", "'R5@10.0.0.5' names no adb server port (expected SERIAL or "
                    "SERIAL@HOST:PORT, e.g. R5@10.0.0.5:5037)"),
    ("R5@10.0.0.5:", "names no adb server port"),
    ("R5@:5037", "'R5@:5037' names no adb server host"),
    ("R5@lab:99999", "'R5@lab:99999': adb server port '99999' is not a number in 1-65535"),
    ("R5@lab:0", "port '0' is not a number in 1-65535"),
    ("R5@lab:x1", "port 'x1' is not"),
    ("R5@::1:5037", "put an IPv6 adb server host in brackets, e.g. R5@[::1]:5037"),
    ("R5 X", "'R5 X' is not SERIAL or SERIAL@HOST:PORT (no spaces)"),
])
def test_bad_forms_are_one_line(entry: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_device(entry)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_an_entry_is_served_by_its_own_server_else_adb_host_else_the_default() -> None:
    assert device_address("R5", None) == DeviceAddress("R5")
    assert device_address("R5", "buildbox:5038") == DeviceAddress("R5", "buildbox", 5038)
    assert device_address("R5@lab:5039", "buildbox:5038") == DeviceAddress("R5", "lab", 5039)


def test_a_phone_is_its_serial_and_its_server() -> None:
    default = {device_address(e, h).key for e, h in [
        ("R5", None), ("R5", "localhost"), ("R5@localhost:5037", None),
        ("R5@127.0.0.1:5037", "lab:1"), ("R5", "127.0.0.1:5037")]}
    assert default == {"R5"}  # the default server, however it is spelled
    assert device_address("R5@lab-a:5037").key == "R5@lab-a:5037"
    assert device_address("R5@lab-a:5037").key != device_address("R5@lab-b:5037").key
    assert device_address("R5", "lab-a").key == "R5@lab-a:5037"
    assert device_address("R5@[::2]:5037").server == "[::2]:5037"
    assert lock_path("R5@lab-a:5037", Path("/l")) == Path("/l/R5_lab-a_5037.lock")
    assert same_phones(["R5@lab:5037", "R5@lab2:5037", "R5"], "lab") == [("R5@lab:5037", "R5")]
    assert same_phones(["R5@lab:5037", "R5@lab:5038"]) == []


def _settings(**kw) -> SimpleNamespace:
    base = dict(adb_host="127.0.0.1:5040", adb_path="adb", devices=(), socs=(), runner=None,
                qnn_device_libs=None, qnn_sdk=None)
    return SimpleNamespace(**(base | kw))


def test_adb_device_talks_to_the_entrys_server() -> None:
    lab = adb_device(_settings(), "R5@10.0.0.5:5038")
    assert lab.serial == "R5" and lab.command(["get-state"]) == [
        "adb", "-H", "10.0.0.5", "-P", "5038", "-s", "R5", "get-state"]
    plain = adb_device(_settings(), "R5")
    assert plain.command(["get-state"])[:5] == ["adb", "-H", "127.0.0.1", "-P", "5040"]


def test_the_same_phone_twice_is_a_setup_error_naming_both() -> None:
    settings = _settings(devices=("R5@127.0.0.1:5040", "R5"))
    with pytest.raises(DeviceSetupError) as info:
        validate(settings, workers=None, probe_devices=False)
    assert str(info.value) == ("--device: R5@127.0.0.1:5040 and R5 are the same phone (serial R5 "
                               "on the adb server at 127.0.0.1:5040)")


@pytest.mark.usefixtures("qnn_env")
@pytest.mark.parametrize("args,env,line", [
    (["--device", "R5@lab"], None, "ERROR: --device: 'R5@lab' names no adb server port"),
    (["--device", "R5", "--device=@lab:5037"], None,  # (a bare @arg is pytest's args file)
     "ERROR: --device: '@lab:5037' has no serial before '@'"),
    ([], "R5@lab:5037,R6@lab:70000", "ERROR: --device: 'R6@lab:70000': adb server port"),
])
def test_bad_device_entries_are_one_usage_error_line(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      args: list[str], env: str | None,
                                                      line: str) -> None:
    if env is not None:
        monkeypatch.setenv("QNN_GENAI_DEVICE", env)
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [ln for ln in result.errlines if ln.strip()]
    assert len(errors) == 1 and errors[0].startswith(line), errors
