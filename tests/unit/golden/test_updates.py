"""The one golden writer: refused without the flag, one line per changed figure, journalled."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.golden import updates
from pytest_qnn_genai.report.results import Record
from pytest_qnn_genai.targets import Target, soc


def test_refused_without_the_flag_and_nothing_journalled(tmp_path: Path) -> None:
    with pytest.raises(updates.GoldenWriteRefused, match="--qnn-update-golden"):
        updates.write(tmp_path / "g.json", "{}", allow_write=False)
    assert not (tmp_path / "g.json").exists() and updates.take() == []


def test_json_changes_are_one_line_per_leaf(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text('{"a": {"x": 1, "gone": true}, "keep": null, "list": [1, 2, 3]}')
    made = updates.write(path, '{"a": {"x": 2, "new": "n"}, "keep": null, "list": [1, 2]}',
                         allow_write=True)
    assert made.lines() == [f"{path} a.x: 1 -> 2", f"{path} a.gone: true -> (absent)",
                            f'{path} a.new: (absent) -> "n"',
                            f"{path} list[2:] (of 3 -> 2): [3] -> []"]
    assert updates.take() == [made] and updates.take() == []


def test_other_text_is_one_line_per_changed_line(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("one\ntwo\nthree\n")
    made = updates.write(path, "one\n2\nthree\nfour\n", allow_write=True)
    assert made.lines() == [f"{path} line 2: two -> 2", f"{path} line 4: (absent) -> four"]
    assert path.read_text() == "one\n2\nthree\nfour\n"
    updates.take()


def test_an_updated_figure_makes_the_record_updated_and_a_failure_still_fails() -> None:
    written = figures.updated(figures.info("decode_tok_s", 31.0), "golden/perf/m.json")
    assert written.verdict == "updated" and not written.passed
    assert written.judge == "written to golden/perf/m.json by an update run, not judged"
    target = Target(soc("SM8650"))
    passed = figures.Figure("x", 1.0, "pass", ">= 0", "at-least", 0.0)
    assert Record.for_target("perf", "m", target, [passed, written]).verdict == "updated"
    failed = figures.problem("y", "broken", "a judge")
    assert Record.for_target("perf", "m", target, [written, failed]).verdict == "fail"
    assert Record.for_target("perf", "m", target, [passed]).verdict == "pass"
