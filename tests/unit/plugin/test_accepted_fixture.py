"""``qnn_accepted`` in a pytest run: without a record the test fails in one "no record" line with
the command that records it (never a pass on the floors), and the summary counts the figures; an
update run writes the record and reports the test updated (never passed, not judged); the next
run judges against it and passes; a 1 dB drop then fails naming old and new; a damaged record is
one line; a record without this target's key (another SoC) or without one figure fails as no
record, under CI too."""
from __future__ import annotations

import json

import pytest

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
    record = pytester.path / "golden" / "accepted" / "stories260k.json"
    nothing = pytester.runpytest_subprocess(*ARGS)
    nothing.assert_outcomes(failed=1)  # no record yet: never a pass on the floors alone
    nothing.stdout.fnmatch_lines([
        "*golden/accepted/stories260k.json: no record of stories260k (no file): record it with "
        "`pytest * --qnn-update-golden` (an update run outside CI*",
        "*qnn-genai figures*", "2 figures: 0 pass, 2 fail (2 with no record), *"])
    assert not record.exists() and "Traceback" not in nothing.stdout.str()

    updated = pytester.runpytest_subprocess(*ARGS, "--qnn-update-golden")
    outcomes = updated.parseoutcomes()
    assert outcomes.get("updated") == 1 and "passed" not in outcomes  # updated, never passed
    updated.stdout.fnmatch_lines(["*golden/accepted/stories260k.json: created*",
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
        "golden/accepted/stories260k.json [[]SM8650-htp-emulator[]], measured at *"])

    record.write_text(record.read_text().replace('"value": 20.5', '"value": "x"'))
    damaged = pytester.runpytest_subprocess(*ARGS)
    damaged.assert_outcomes(failed=1)
    damaged.stdout.fnmatch_lines([
        "*golden/accepted/stories260k.json: targets.SM8650-htp-emulator.figures.qdq_sqnr_db."
        "value must be a number or a list of token ids, got \"x\""])
    assert "Traceback" not in damaged.stdout.str()


def test_another_socs_record_or_a_missing_figure_is_no_record(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(HOLDING_TEST)
    assert pytester.runpytest_subprocess(*ARGS, "--qnn-update-golden").parseoutcomes()["updated"] == 1
    record = pytester.path / "golden" / "accepted" / "stories260k.json"
    text = record.read_text()
    monkeypatch.setenv("CI", "true")

    record.write_text(text.replace("SM8650-htp-emulator", "SM8750-htp-emulator"))
    other_soc = pytester.runpytest_subprocess(*ARGS)
    other_soc.assert_outcomes(failed=1)  # not passed on the floors with every figure info
    other_soc.stdout.fnmatch_lines([
        "*golden/accepted/stories260k.json: no record of stories260k for SM8650-htp-emulator: "
        "record it with `pytest * --qnn-update-golden`*",
        "2 figures: 0 pass, 2 fail (2 with no record), *"])
    assert "Traceback" not in other_soc.stdout.str()

    data = json.loads(text)
    del data["targets"]["SM8650-htp-emulator"]["figures"]["qdq_greedy_tokens"]
    record.write_text(json.dumps(data))
    one_figure = pytester.runpytest_subprocess(*ARGS)
    one_figure.assert_outcomes(failed=1)
    one_figure.stdout.fnmatch_lines([
        "*golden/accepted/stories260k.json: no record of qdq_greedy_tokens for "
        "SM8650-htp-emulator: record it with*",
        "2 figures: 1 pass, 1 fail (1 with no record), *"])
