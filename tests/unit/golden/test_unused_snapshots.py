"""A run without a phone passes beside the committed phone snapshots, and a stale snapshot of the
builds it makes still fails it: syrupy fails a session that leaves a discovered snapshot unused
(measured in CI: every test passed, exit 1, "9 snapshots unused", the SM8650 phone snapshots
committed in the emulator's file). Each build label's snapshots live in a sibling folder
(``golden.snapshots.snapshot_folder``), which a run without that build never opens."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("qnn_env")

CONFTEST = """
import pytest
from pytest_qnn_genai.golden.snapshots import build_label, golden_extension, snapshot_folder

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    # the emulator's items only (upstream's runners are not built here): a skipped
    # parametrisation of a test keeps syrupy from calling any snapshot of that test unused
    items[:] = [item for item in items if "x86-runner" not in item.name]

@pytest.fixture
def snapshot(snapshot, qnn_target):
    golden = __import__("pathlib").Path(__file__).parent / "golden"
    return snapshot.use_extension(golden_extension(
        snapshot_folder(golden, qnn_target, qnn_target), qnn_target.id,
        build_label(qnn_target, qnn_target)))
"""

SNAPSHOT_TEST = """
def test_case_name(qnn_case, snapshot):
    assert qnn_case.name == snapshot
"""

PHONE_SNAPSHOT = "# name: test_case_name[stories260k-SM8650-htp-phone]\n  'stories260k'\n# ---\n"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # a subprocess: syrupy keeps the snapshot files it read for the life of the process; the
    # tests named by path as `make test` names them (without paths syrupy cannot tell which module
    # owns a snapshot file outside __snapshots__ and never calls one unused)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--soc", "SM8650", *args,
                                         "test_names.py")


def test_phone_snapshots_in_their_own_folder_are_not_unused_in_an_emulator_run(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_names=SNAPSHOT_TEST)
    assert _run(pytester, "--snapshot-update").ret == pytest.ExitCode.OK
    emulator = pytester.path / "golden" / "snapshots" / "SM8650-htp-emulator" / "test_names.ambr"
    committed = emulator.read_text()
    assert "test_case_name[stories260k-SM8650-htp-emulator]" in committed

    phone = pytester.path / "golden" / "snapshots" / "SM8650-htp-phone" / "test_names.ambr"
    phone.parent.mkdir()
    phone.write_text("# serializer version: 1\n" + PHONE_SNAPSHOT)
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.no_fnmatch_line("*snapshot* unused*")

    # the fault the folders guard: the phone's snapshot in the emulator's file
    emulator.write_text(committed + PHONE_SNAPSHOT)
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 snapshot unused*"])

    # and the strictness kept: a stale snapshot of the builds the run makes fails it
    stale = PHONE_SNAPSHOT.replace("-phone]", "-emulator]").replace("stories260k-", "gone-")
    emulator.write_text(committed + stale)
    assert _run(pytester).ret == pytest.ExitCode.TESTS_FAILED
    assert Path(phone).exists()
