"""Snapshot names carry the SoC and the kind of build, never a phone's serial: a phone finds the
snapshots committed for its SoC, a device running the emulator's builds the emulator's. The
committed phone snapshots mirror the emulator's, and differ from them only where a phone build
differs: a phone snapshot made from the wrong build would fail the first phone run instead."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from pytest_qnn_genai.golden.snapshots import build_label, golden_extension, snapshot_folder
from pytest_qnn_genai.models import registry
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
    which fails the session (``tests/unit/golden/test_unused_snapshots.py``)."""
    emulator, phone = Target(SM8650, "htp", EMULATOR), Target(SM8650, "htp", "R5CX1234ABC")
    assert snapshot_folder(Path("/g"), emulator, emulator) == Path("/g/snapshots/SM8650-htp-emulator")
    assert snapshot_folder(Path("/g"), phone, phone) == Path("/g/snapshots/SM8650-htp-phone")
    assert snapshot_folder(Path("/g"), emulator, emulator, "nightly") == Path(
        "/g/snapshots/SM8650-htp-emulator-nightly")
    nightly = {c.name for c in registry.available().values() if c.tier == "nightly"}
    for folder in SNAPSHOTS.iterdir():
        names = set().union(*(_committed_in(f) for f in folder.glob("*.ambr")))
        label = folder.name.removesuffix("-nightly")
        assert names and all(n.endswith(f"-{label}]") for n in names), folder
        # a nightly case's snapshots only in the nightly folder: beside the default cases' they
        # would be unused in every default run (make test), which fails the session
        cases = {n.partition("[")[2].partition("-")[0] for n in names}
        assert (cases <= nightly) if folder.name != label else not cases & nightly, folder


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


# What a phone build's configuration differs in from the emulator's, per (setting, emulator's
# line, phone's line): llama.py is not given --enable_x86_64 and the staged program shares buffers
PHONE_CONFIGURATION = {("x86_64", "'legacy': True,", "'legacy': False,"),
                       ("x86_64", "'new': True,", "'new': False,")}


def _snapshot(text: str, name: str) -> list[str]:
    """The lines of snapshot ``name`` in an .ambr file's text (empty when it is not there)."""
    lines = text.splitlines()
    start = lines.index(f"# name: {name}") + 1 if f"# name: {name}" in lines else len(lines)
    end = next((i for i in range(start, len(lines)) if lines[i] == "# ---"), len(lines))
    return lines[start:end]


def _configuration_differences(emulator: str, phone: str, case: str) -> set[tuple[str, ...]]:
    """(setting, emulator's line, phone's line) for every line in which ``case``'s
    configuration-agreement snapshots differ; a line only one side has pairs with ``<absent>``."""
    test = f"test_configuration_agreement[{case}-SM8650-htp-"
    emu, pho = _snapshot(emulator, f"{test}emulator]"), _snapshot(phone, f"{test}phone]")
    out: set[tuple[str, ...]] = set()
    setting = ""
    for i in range(max(len(emu), len(pho))):
        e = emu[i].strip() if i < len(emu) else "<absent>"
        p = pho[i].strip() if i < len(pho) else "<absent>"
        if (m := re.match(r"^'(\w+)': dict\(\{$", e)) and e == p:
            setting = m.group(1)
        if e != p:
            out.add((setting, e, p))
    return out


def test_a_phone_builds_configuration_differs_from_the_emulators_only_in_x86_64() -> None:
    """The configuration agreement's phone snapshots are the emulator's but for the one setting
    a phone build changes (no --enable_x86_64, shared buffer on): a phone snapshot written from
    an emulator build, or one that lost a setting, fails here instead of on the first phone."""
    emulator = (SNAPSHOTS / "SM8650-htp-emulator" / "test_parity_snapshots.ambr").read_text()
    phone = (SNAPSHOTS / "SM8650-htp-phone" / "test_parity_snapshots.ambr").read_text()
    for case in sorted(PHONE_CASES):
        assert _configuration_differences(emulator, phone, case) == PHONE_CONFIGURATION, case


def test_a_phone_configuration_snapshot_that_differs_elsewhere_is_named() -> None:
    """Two faults in a copy of stories260k's phone snapshot: written from an emulator build (no
    difference at all), and one prompt fewer in the staged calibration (named as its line)."""
    emulator = (SNAPSHOTS / "SM8650-htp-emulator" / "test_parity_snapshots.ambr").read_text()
    phone = (SNAPSHOTS / "SM8650-htp-phone" / "test_parity_snapshots.ambr").read_text()
    name = "# name: test_configuration_agreement[stories260k-SM8650-htp-phone]\n"
    head, tail = phone.split(name)
    block, rest = tail.split("# ---", 1)

    def differences(changed: str) -> set[tuple[str, ...]]:
        assert changed != block
        return _configuration_differences(emulator, head + name + changed + "# ---" + rest,
                                          "stories260k")

    emulator_build = block.replace("'legacy': False,", "'legacy': True,").replace(
        "'new': False,", "'new': True,")
    assert differences(emulator_build) == set()
    prompts = re.search(r"'calibration_prompts': dict\(\{[^}]*'new': (\d+),", block)
    assert prompts is not None
    count = int(prompts.group(1))
    fewer = block[:prompts.start(1)] + str(count - 1) + block[prompts.end(1):]
    assert differences(fewer) == PHONE_CONFIGURATION | {
        ("calibration_prompts", f"'new': {count},", f"'new': {count - 1},")}
