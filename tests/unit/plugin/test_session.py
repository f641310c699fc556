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
