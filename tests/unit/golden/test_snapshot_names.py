"""Snapshot names carry the SoC and the kind of build, never a phone's serial: a phone finds the
snapshots committed for its SoC, a device running the emulator's builds the emulator's."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pytest_qnn_genai.golden.snapshots import build_label, golden_extension
from pytest_qnn_genai.targets import EMULATOR, X86_RUNNER, Target, soc

SM8650 = soc("SM8650")


def _name(target: Target, build: Target, test: str) -> str:
    ext = golden_extension(Path("/golden/snapshots"), target.id, build_label(target, build))
    return ext.get_snapshot_name(test_location=SimpleNamespace(snapshot_name=test))


def test_a_phone_builds_its_snapshot_name_from_its_soc_not_its_serial() -> None:
    phone = Target(SM8650, "htp", "R5CX1234ABC")
    name = _name(phone, phone, "test_new_artifact_layout[stories260k-SM8650-htp-R5CX1234ABC]")
    assert name == "test_new_artifact_layout[stories260k-SM8650-htp-phone]"


def test_devices_running_the_emulators_builds_share_its_snapshots() -> None:
    emulator = Target(SM8650, "htp", EMULATOR)
    committed = "test_compile_options_carried_by_both_programs[stories260k-SM8650-htp-emulator]"
    assert _name(emulator, emulator, committed) == committed
    for device in ("LOOP1", X86_RUNNER):  # the loopback phone, upstream's runners here
        target = Target(SM8650, "htp", device)
        test = committed.replace("emulator]", f"{device}]")
        assert _name(target, emulator, test) == committed
