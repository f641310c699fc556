"""An update run writes, shows the change and reports the test *updated*, never *passed*; where
``$CI`` is set an update is refused unless ``--qnn-force-update`` (pytester runs of the plugin)."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.usefixtures("qnn_env")

# a test shaped as the gate's continuation test: it writes under the flag, judges otherwise
CONTINUATION = """
import json
from pathlib import Path
from pytest_qnn_genai.golden import continuation

RUN = continuation.Continuation("Once", [1, 5], [7, 8, 10], " a dog")

def test_continuation(qnn_settings):
    path = continuation.path_for(Path("golden"), "tiny")
    if qnn_settings.update_golden:
        made = continuation.update(path, RUN, allow_write=True)
        if made.changed:
            return
    assert continuation.load(path).tokens == RUN.tokens
"""
OLD = {"prompt": "Once", "prompt_tokens": [1, 5], "tokens": [7, 8, 9], "text": " a cat"}


def _golden(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(CONTINUATION)
    folder = pytester.path / "golden" / "continuations"
    folder.mkdir(parents=True)
    (folder / "tiny.json").write_text(json.dumps(OLD))


def test_the_unchanged_golden_judges_and_fails(pytester: pytest.Pytester) -> None:
    _golden(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)


def test_an_update_run_reports_updated_with_the_diff_never_passed(
        pytester: pytest.Pytester) -> None:
    _golden(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA", "--qnn-update-golden")
    assert result.ret == pytest.ExitCode.OK
    assert result.parseoutcomes() == {"updated": 1}
    result.stdout.fnmatch_lines([
        "*qnn-genai updates (written, not judged*",
        "test_an_update_run_reports_updated_with_the_diff_never_passed.py::test_continuation: "
        "UPDATED",
        "  golden/continuations/tiny.json tokens[[]2:] (of 3 -> 3): [[]9] -> [[]10]",
        '  golden/continuations/tiny.json text: " a cat" -> " a dog"',
        "*1 updated in*"])
    assert json.loads((pytester.path / "golden/continuations/tiny.json").read_text())[
        "tokens"] == [7, 8, 10]
    # the next run judges against what was written, and passes
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    # an update run that writes nothing was judged against the committed file: passed
    again = pytester.runpytest("-p", "no:cacheprovider", "--qnn-update-golden")
    again.assert_outcomes(passed=1)
    assert "updated" not in again.stdout.lines[-1]


def test_an_update_under_ci_is_refused_in_one_line(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _golden(pytester)
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest("-p", "no:cacheprovider", "--qnn-update-golden")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == ["ERROR: --qnn-update-golden: refused where $CI is set (CI='true'): a CI "
                      "run judges against the reviewed golden files; update locally and commit "
                      "the diff, or add --qnn-force-update"]
    assert json.loads((pytester.path / "golden/continuations/tiny.json").read_text()) == OLD
    snap = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-update")
    assert snap.ret == pytest.ExitCode.USAGE_ERROR
    snap.stderr.fnmatch_lines(["ERROR: --snapshot-update: refused where $CI is set*"])
    monkeypatch.setenv("CI", "false")  # a CI variable that says no is no CI
    assert pytester.runpytest("-p", "no:cacheprovider",
                              "--qnn-update-golden").parseoutcomes() == {"updated": 1}


def test_a_forced_update_under_ci_runs(pytester: pytest.Pytester,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _golden(pytester)
    monkeypatch.setenv("CI", "1")
    result = pytester.runpytest("-p", "no:cacheprovider", "--qnn-update-golden",
                                "--qnn-force-update")
    assert result.parseoutcomes() == {"updated": 1}
    assert json.loads((pytester.path / "golden/continuations/tiny.json").read_text())[
        "text"] == " a dog"


SNAPSHOT = """
def test_snap(qnn_case, snapshot):
    assert {"case": qnn_case.name, "bits": BITS} == snapshot
"""


def test_a_snapshot_update_reports_updated_with_the_changed_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SNAPSHOT.replace("BITS", "8"))
    args = ("-p", "no:cacheprovider", "--models", "stories260k")
    created = pytester.runpytest(*args, "--snapshot-update")
    assert created.parseoutcomes() == {"updated": 1}, created.stdout.str()
    created.stdout.fnmatch_lines(["  __snapshots__/*.ambr [[]test_snap[[]stories260k]]: created"])
    pytester.runpytest(*args).assert_outcomes(passed=1)  # compared against it: passed
    pytester.makepyfile(SNAPSHOT.replace("BITS", "4"))
    pytester.runpytest(*args).assert_outcomes(failed=1)  # the fault: a changed snapshot
    changed = pytester.runpytest(*args, "--snapshot-update")
    assert changed.parseoutcomes() == {"updated": 1}, changed.stdout.str()
    changed.stdout.fnmatch_lines(["  *.ambr [[]test_snap*]: 'bits': 8, -> 'bits': 4,"])
    pytester.runpytest(*args, "--snapshot-update").assert_outcomes(passed=1)  # matched


WRITER_TEST = """
from pathlib import Path
from pytest_qnn_genai.golden import updates

def test_the_writer_itself(tmp_path):
    made = updates.write(tmp_path / "g.json", '{"a": 2}', allow_write=True)
    assert made.changed
"""


def test_outside_an_update_run_a_test_that_writes_its_own_file_passes(
        pytester: pytest.Pytester) -> None:
    """Only an update flag makes a write the gate's update: a test of the writer itself (its own
    folder, no flag) passes; with the flag the same test reports updated."""
    pytester.makepyfile(WRITER_TEST)
    assert pytester.runpytest("-p", "no:cacheprovider").parseoutcomes() == {"passed": 1}
    assert pytester.runpytest("-p", "no:cacheprovider",
                              "--qnn-update-golden").parseoutcomes() == {"updated": 1}
