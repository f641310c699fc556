"""Snapshot names carry the SoC and the kind of build, never a phone's serial: a phone finds the
snapshots committed for its SoC, a device running the emulator's builds the emulator's."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from pytest_qnn_genai.golden.snapshots import build_label, golden_extension, snapshot_folder
from pytest_qnn_genai.targets import EMULATOR, X86_RUNNER, Target, soc

SM8650 = soc("SM8650")
SNAPSHOTS = Path(__file__).resolve().parents[3] / "golden" / "snapshots"
# the cases whose SM8650 phone builds are snapshotted (every shipped case)
PHONE_CASES = {"stories260k", "qwen3_toy", "llama3_2_toy"}


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


def _committed(label: str) -> set[str]:
    return _committed_in(SNAPSHOTS / label / "test_parity_snapshots.ambr")


def test_each_build_label_has_its_own_snapshot_folder() -> None:
    """A run opens only the folders of the builds it makes and must assert every snapshot in
    them: a phone snapshot beside the emulator's would be unused in every run without a phone,
    which fails the session (``tests/integration/golden/test_unused_snapshots.py``)."""
    emulator, phone = Target(SM8650, "htp", EMULATOR), Target(SM8650, "htp", "R5CX1234ABC")
    assert snapshot_folder(Path("/g"), emulator, emulator) == Path("/g/snapshots/SM8650-htp-emulator")
    assert snapshot_folder(Path("/g"), phone, phone) == Path("/g/snapshots/SM8650-htp-phone")
    for folder in SNAPSHOTS.iterdir():
        names = set().union(*(_committed_in(f) for f in folder.glob("*.ambr")))
        assert names and all(n.endswith(f"-{folder.name}]") for n in names), folder


def _committed_in(path: Path) -> set[str]:
    return set(re.findall(r"^# name: (\S+)$", path.read_text(), re.MULTILINE))


def test_the_committed_phone_snapshots_mirror_the_emulators() -> None:
    """A first run on an SM8650 phone compares against committed snapshots (compile-only phone
    builds) instead of failing "does not exist" or writing unreviewed ones: every per-target
    snapshot of a case with phone snapshots has its phone twin, and no phone snapshot lacks its
    emulator twin."""
    names = _committed("SM8650-htp-emulator") | _committed("SM8650-htp-phone")
    phone = {n for n in names if n.endswith("-SM8650-htp-phone]")}
    cases = {re.sub(r"^.*\[(.+)-SM8650-htp-phone\]$", r"\1", n) for n in phone}
    assert PHONE_CASES <= cases, f"no SM8650 phone snapshots for {PHONE_CASES - cases}"
    emulator = {n for n in names if n.endswith("-SM8650-htp-emulator]")
                and re.sub(r"^.*\[(.+)-SM8650-htp-emulator\]$", r"\1", n) in cases}
    assert {n.replace("-emulator]", "-phone]") for n in emulator} == phone
