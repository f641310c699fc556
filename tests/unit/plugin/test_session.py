"""The session's end of run: records with or without a report folder or a baseline."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("qnn_env")

RECORDING = """
from pytest_qnn_genai.figures import info
from pytest_qnn_genai.report.results import Record
from pytest_qnn_genai.targets import Target, soc

def test_record(qnn_results):
    qnn_results.add(Record.for_target("perf", "m", Target(soc("SM8650")),
                                      [info("decode_tok_s", 12.0)]))
"""


def test_records_without_report_or_baseline_end_cleanly(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(RECORDING)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK


def test_records_go_into_the_report_folder(pytester: pytest.Pytester, tmp_path) -> None:
    pytester.makepyfile(RECORDING)
    result = pytester.runpytest("-p", "no:cacheprovider", "--qnn-report", str(tmp_path / "r"))
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*qnn-genai report*", "1 records: *results.json*"])


def test_the_report_names_a_case_from_outside_the_package(pytester: pytest.Pytester,
                                                          tmp_path) -> None:
    """The report's fingerprint lists each selected case's run-time settings, a ``--qnn-cases``
    case's too (the fingerprint once looked cases up in the package only and raised)."""
    import json
    import shutil

    from pytest_qnn_genai.models import registry

    mine = pytester.path / "cases" / "mine"
    shutil.copytree(registry.MODELS_DIR / "stories260k", mine)
    spec = json.loads((mine / "case.json").read_text())
    (mine / "case.json").write_text(json.dumps({**spec, "name": "mine", "max_new_tokens": 7}))
    pytester.makepyfile(RECORDING)
    result = pytester.runpytest("-p", "no:cacheprovider", "--qnn-cases", "cases",
                                "--models", "mine", "--qnn-report", str(tmp_path / "r"))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [results] = (tmp_path / "r").glob("*/results.json")
    header = json.loads(results.read_text())["header"]
    assert header["fingerprint"]["cases"]["mine"]["max_new_tokens"] == 7


FAILING = """
import pytest
from pytest_qnn_genai import figures

def test_fails_before_recording(qnn_case, qnn_target):
    assert 1 + 1 == 3, "the build's logits are empty"

def test_fails_on_its_recorded_figure(qnn_case, qnn_target, qnn_record):
    qnn_record("gate", [figures.problem("x", "broken", "a judge")])
    assert False

def test_passes(qnn_case, qnn_target, qnn_record):
    qnn_record("gate", [figures.info("decode_tok_s", 12.0)])

@pytest.mark.xfail(strict=True)
def test_expected_to_fail(qnn_case, qnn_target):
    assert False
"""


def test_a_failed_test_without_a_failed_figure_is_a_failed_figure(pytester: pytest.Pytester,
                                                                  tmp_path) -> None:
    """The report's counts never read all pass while a test failed: a failure that left no failed
    figure becomes one (its first error line); a recorded failure is not counted twice."""
    import json

    pytester.makepyfile(FAILING)
    result = pytester.runpytest("-p", "no:cacheprovider", "--qnn-report", str(tmp_path / "r"),
                                "--models", "stories260k")
    result.assert_outcomes(passed=1, failed=2, xfailed=1, skipped=4)  # x86-runner: no runners
    (folder,) = (tmp_path / "r").iterdir()
    records = json.loads((folder / "results.json").read_text())["records"]
    rows = {r["test"].split("::")[-1].split("[")[0]: r["figures"] for r in records}
    assert set(rows) == {"test_fails_before_recording", "test_fails_on_its_recorded_figure",
                         "test_passes"}
    [failed] = rows["test_fails_before_recording"]
    assert (failed["name"], failed["verdict"], failed["judge"]) == (
        "test_failed", "fail", "the test's own assertions (call)")
    assert failed["value"].startswith("AssertionError: the build's logits are empty")
    assert [f["name"] for f in rows["test_fails_on_its_recorded_figure"]] == ["x"]
    assert "| fail | 2 |" in (folder / "summary.md").read_text()
