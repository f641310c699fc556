"""``qnn_accepted`` in a pytest run: without a record the figures are info; an update run writes
the record and reports the test updated (never passed, not judged); the next run judges
against it and passes; a 1 dB drop then fails naming old and new; a damaged record is one line;
a record measured on another CPU kind only is not this kind's, and says so in one line."""
from __future__ import annotations

import json

import pytest

from pytest_qnn_genai import cpu

pytestmark = pytest.mark.usefixtures("qnn_env")

HOLDING_TEST = """
import os

from pytest_qnn_genai.checks.parity import Check
from pytest_qnn_genai.golden.accepted import Measured


def test_figures(qnn_accepted):
    sqnr = float(os.environ.get("FAKE_SQNR", "20.5"))
    qnn_accepted.hold([Check("QDQ vs fp32 logits SQNR dB", "fp32", sqnr, name="qdq_sqnr_db",
                             better="higher")], Measured("qdq_greedy_tokens", (1, 2, 3)))
"""
ARGS = ("-p", "no:cacheprovider", "-p", "no:xdist", "--models", "stories260k", "-k",
        "htp-emulator", "--qnn-golden-dir", "golden", "-rs")


def test_update_then_judge_then_fail_on_a_drop(pytester: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(HOLDING_TEST)
    slug = cpu.kind().slug
    record = pytester.path / "golden" / "accepted" / slug / "stories260k.json"
    nothing = pytester.runpytest_subprocess(*ARGS)
    nothing.assert_outcomes(passed=1)  # no record yet: the figures are info, the test its floors'
    assert not record.exists()

    updated = pytester.runpytest_subprocess(*ARGS, "--qnn-update-golden")
    outcomes = updated.parseoutcomes()
    assert outcomes.get("updated") == 1 and "passed" not in outcomes  # updated, never passed
    updated.stdout.fnmatch_lines([f"*golden/accepted/{slug}/stories260k.json: created*",
                                  "*1 updated in*"])
    written = json.loads(record.read_text())["targets"]["SM8650-htp-emulator"]["figures"]
    assert written["qdq_sqnr_db"]["value"] == 20.5
    assert written["qdq_greedy_tokens"]["value"] == [1, 2, 3]
    assert "--qnn-update-golden" in written["qdq_sqnr_db"]["command"]

    pytester.runpytest_subprocess(*ARGS).assert_outcomes(passed=1)  # the unchanged figures pass

    monkeypatch.setenv("FAKE_SQNR", "19.5")
    dropped = pytester.runpytest_subprocess(*ARGS)
    dropped.assert_outcomes(failed=1)
    dropped.stdout.fnmatch_lines([
        "*qdq_sqnr_db (QDQ vs fp32 logits SQNR dB) = 19.5, accepted 20.5: -1 (-4.88 %), worse; "
        "judged against "
        f"golden/accepted/{slug}/stories260k.json [[]SM8650-htp-emulator[]], measured at *"])

    record.write_text(record.read_text().replace('"value": 20.5', '"value": "x"'))
    damaged = pytester.runpytest_subprocess(*ARGS)
    damaged.assert_outcomes(failed=1)
    damaged.stdout.fnmatch_lines([
        f"*golden/accepted/{slug}/stories260k.json: targets.SM8650-htp-emulator.figures.qdq_sqnr_db."
        "value must be a number or a list of token ids, got \"x\""])
    assert "Traceback" not in damaged.stdout.str()


def test_a_record_of_another_cpu_kind_only_fails_saying_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(HOLDING_TEST)
    assert pytester.runpytest_subprocess(*ARGS, "--qnn-update-golden").parseoutcomes()["updated"] == 1
    accepted = pytester.path / "golden" / "accepted"
    (accepted / cpu.kind().slug).rename(accepted / "other-cpu-avx2")

    elsewhere = pytester.runpytest_subprocess(*ARGS)
    elsewhere.assert_outcomes(failed=1)  # not passed on the floors with every figure info
    elsewhere.stdout.fnmatch_lines([
        f"*golden/accepted/{cpu.kind().slug}/stories260k.json: no accepted record of stories260k "
        f"on this CPU kind ({cpu.kind().label}); recorded on other-cpu-avx2, whose figures are "
        "not this kind's: measure this kind's with --qnn-update-golden"])
    assert "Traceback" not in elsewhere.stdout.str()
