"""A run of some model cases (``--models``, ``--qnn-shard``) passes its snapshot tests: syrupy
fails a run that leaves committed snapshots unused, and the other cases' snapshots are unused
whenever the plugin's parametrisation narrows the cases (measured: ``pytest suites --models
qwen3_toy``, every test passed, exit 1, "8 snapshots unused")."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("qnn_env")

SNAPSHOT_TEST = """
def test_case_name(qnn_case, snapshot):
    assert qnn_case.name == snapshot
"""


def test_one_case_of_several_leaves_the_others_snapshots_unused_and_passes(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SNAPSHOT_TEST)
    assert pytester.runpytest("-p", "no:cacheprovider", "--snapshot-update").ret == 0
    result = pytester.runpytest("-p", "no:cacheprovider", "--models", "stories260k")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*snapshots unused*"])
    # every case: a snapshot no test uses still fails the run, as syrupy has it
    (snapshots,) = (pytester.path / "__snapshots__").iterdir()
    snapshots.write_text(snapshots.read_text() + "# name: test_gone\n  'x'\n# ---\n")
    assert pytester.runpytest("-p", "no:cacheprovider").ret == pytest.ExitCode.TESTS_FAILED
