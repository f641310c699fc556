"""The run report: results.json (judged figures, schema 1 read as info), the summary's verdicts and
judges, what changed, and the plots (phones and the emulator apart, floors only with phones).

The runs are real ones (tests/support/report_runs.py), plus a phone record made by the perf
suite's own calls on the committed golden floors.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.report.changes import moves
from pytest_qnn_genai.report.plots import speed_canvas, trend_canvas, write_plots
from pytest_qnn_genai.report.results import (
    EmulatorFloorError,
    Header,
    Record,
    ResultsFile,
    ResultsFileError,
    ResultsHistoryWarning,
    git_sha,
    latest_before,
    load_history,
    run_dir,
)
from pytest_qnn_genai.report.summary import render_summary
from tests.support.report_runs import (
    DATA,
    EMU,
    GOLDEN,
    PHONE,
    changed_run,
    real_run,
    with_phone,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _row(md: str, section: str, figure: str) -> str:
    """The markdown row of ``figure`` in a model x target section."""
    part = md.split(f"## {section}\n")[1].split("\n## ")[0]
    [line] = [x for x in part.splitlines() if x.startswith("| ") and f"| {figure} |" in x]
    return line


def test_results_json_round_trip_keeps_each_figures_judge(tmp_path: Path) -> None:
    run = with_phone(800.0)
    path = run.write(run_dir(tmp_path / "reports", run.header) / "results.json")
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]  # no temp file left
    loaded = ResultsFile.load(path)
    assert loaded.to_dict() == run.to_dict() and loaded.records == run.records
    data = json.loads(path.read_text())
    assert data["schema"] == 2 and data["header"]["fingerprint"]["artifacts"]
    phone = data["records"][-1]
    decode = next(f for f in phone["figures"] if f["name"] == "decode_tok_s")
    assert (decode["verdict"], decode["judge"], decode["bound"]) == (
        "fail", "floor 1600 (SM8650 phone, -10% noise)", 1600.0)
    emulator = [f for r in data["records"] if r["device"] == "x86-emulator"
                and r["test"].split("::")[-1].startswith("test_emulator_benchmark")
                for f in r["figures"]]
    verdicts = {f["name"]: f["verdict"] for f in emulator}
    assert verdicts["decode_tok_s"] == verdicts["prefill_tok_s"] == "info"
    assert all(f["bound"] is None and f["rule"] != "phone-floor" for f in emulator)


def test_every_verdict_but_info_names_its_judge() -> None:
    run = real_run()
    kinds = {r.kind for r in run.records}
    assert kinds == {"gate", "parity", "smoke", "perf"}  # every suite's numerics are records
    for _, f in run.figures():
        assert f.verdict == "info" or f.judge, f
    by_name = {f.name: f for r, f in run.figures() if r.kind in ("gate", "parity")}
    assert by_name["qdq_sqnr_db"].judge == "≥ 15 dB" and by_name["qdq_sqnr_db"].bound == 15.0
    assert by_name["pte_bytes"].verdict == "pass" and by_name["encoding_worst_steps"].bound == 1.0


def test_an_emulator_figure_judged_by_a_phone_floor_is_refused() -> None:
    """The rule behind 'emulator figures are never set against phone floors': breaking it (a suite
    judging the emulator's decode against the 1600 floor) raises instead of reporting."""
    floored = GOLDEN.judge("SM8650", "htp", {"decode_tok_s": 14.9}, 0.1)
    with pytest.raises(EmulatorFloorError,
                       match="decode_tok_s, inference_speed_tok_s judged by a phone floor"):
        Record.for_target("perf", "stories260k", EMU, floored)
    data = Record.for_target("perf", "stories260k", PHONE, floored).to_dict()
    data["device"] = "x86-emulator"
    bad = {"schema": 2, "header": real_run().to_dict()["header"], "records": [data]}
    with pytest.raises(ResultsFileError, match="malformed results file.*phone floor"):
        ResultsFile.from_dict(bad, "r.json")


def test_the_old_false_pass_reads_as_info() -> None:
    """A schema-1 run whose emulator figures carried the test's 'pass'. Read now,
    every number is info and nothing is set against the phone floor."""
    old = ResultsFile.load(DATA / "schema1-emulator-run.json")
    assert json.loads((DATA / "schema1-emulator-run.json").read_text())["records"][0][
        "verdict"] == "pass"
    assert old.counts()["pass"] == 0 and old.counts()["info"] > 10
    md = render_summary(old)
    row = _row(md, "stories260k · SM8650-htp-emulator", "decode_tok_s")
    assert row.endswith("| — | info |") and "1600" not in row


def test_phone_below_floor_fails_and_emulator_is_info_in_the_summary() -> None:
    md = render_summary(with_phone(800.0))
    phone = _row(md, f"stories260k · {PHONE.id}", "decode_tok_s")
    assert phone == ("| test_phone_meets_golden_floors | decode_tok_s | 800 | — | tolerance 0.1, "
                     "vs_floor 0.5 | floor 1600 (SM8650 phone, -10% noise) | fail |")
    assert _row(md, f"stories260k · {PHONE.id}", "ttft_s").endswith("| — | info |")
    emu = _row(md, f"stories260k · {EMU.id}", "decode_tok_s")
    assert emu.endswith("| — | — | — | info |") and "floor" not in emu
    phone_section = md.split(f"## stories260k · {PHONE.id}\n")[1]
    emulator_section = md.split(f"## stories260k · {EMU.id}\n")[1].split("\n## ")[0]
    assert "never set against a phone's golden floor" in emulator_section
    assert "never set against" not in phone_section
    counts = md.split("| verdict | figures |")[1].split("\n\n")[0]
    assert "| fail | 2 |" in counts  # decode and inference speed below 1600
    passing = render_summary(with_phone(1700.0))
    assert _row(passing, f"stories260k · {PHONE.id}", "decode_tok_s").endswith("| pass |")


def test_the_ab_gate_is_a_row_with_bounds_floor_rounds_and_verdict() -> None:
    md = render_summary(real_run())
    row = _row(md, f"stories260k · {EMU.id}", "decode_tok_s B/A (new vs legacy)")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5] == "B/A ≥ 0.9 at 95%" and cells[6] == "pass"
    assert cells[4].startswith("95% bounds ") and ", 5 rounds, median legacy " in cells[4]
    assert "legacy_prefill_tok_s" not in md  # the medians are the row's details, not figures


def test_summary_opens_with_the_changed_compile_option_beside_the_moved_figure() -> None:
    md = render_summary(changed_run(), real_run(), noise=0.1, compared="reports/2026-12-03")
    top = md.split("\n## Run\n")[0]  # everything before the run's facts and the tables
    assert "## What changed since 2026-12-03" in top
    assert ("| compile stories260k SM8650-htp · spec.backend_options.performance_mode | "
            "kHtpBurst | kHtpHighPerformance |") in top
    assert "| stories260k | SM8650-htp-emulator | perf | decode_tok_s |" in top
    assert "≥1.2x slower" in top
    assert top.count("| stories260k | SM8650-htp-emulator |") == 1  # nothing else moved
    same = render_summary(real_run(), real_run(), noise=0.1)
    assert "Same versions, harness, settings and artifacts" in same
    assert "No figure moved beyond noise" in same


def test_a_verdict_flip_is_listed_even_within_noise() -> None:
    before, after = with_phone(1460.0), with_phone(1430.0)  # 2 % apart, across the 1440 line
    listed = [m for m in moves(after, before, 0.1) if m.moved]
    assert [(m.figure, m.change) for m in listed if m.target == PHONE.id] == [
        ("decode_tok_s", "within noise; pass → fail"),
        ("inference_speed_tok_s", "within noise; pass → fail")]


@pytest.mark.parametrize("content,match", [
    ("not json", "invalid JSON at line 1"),
    ('{"schema": 7}', "not a schema-2 results file"),
    ('{"schema": 2, "header": {}, "records": []}', "malformed results file"),
    ('{"schema": 2, "header": {"date": "2026-08-14", "socs": [], "backend": "htp", "devices": [],'
     ' "versions": {}}, "records": []}', "has no time zone"),
    ('{"schema": 2, "header": {"date": "2026-08-14T00:00:00+00:00", "socs": [], "backend": "htp",'
     ' "devices": [], "versions": {}}, "records": [{"kind": "speed"}]}', "malformed results file"),
])
def test_damaged_results_file_is_one_line(tmp_path: Path, content: str, match: str) -> None:
    (tmp_path / "results.json").write_text(content)
    with pytest.raises(ResultsFileError, match=match) as info:
        ResultsFile.load(tmp_path / "results.json")
    message = str(info.value)
    assert message.startswith(str(tmp_path / "results.json")) and "\n" not in message


def test_header_collect_stamps_time_and_git(tmp_path: Path) -> None:
    h = Header.collect(["SM8650"], "htp", [], {"torch": "t"}, repo=tmp_path)
    assert h.when.tzinfo is not None and h.git_sha is None  # tmp_path is no git work tree
    if shutil.which("git") is None:
        pytest.fail("no git client")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True, timeout=30)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "x"], check=True, timeout=30)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                          timeout=30).stdout
    assert git_sha(repo) == head.strip() and len(head.strip()) == 40


def test_history_is_date_ordered_skips_damage_and_the_current_run(tmp_path: Path) -> None:
    earlier, current = real_run(), changed_run()
    earlier.write(tmp_path / "b-night" / "results.json")
    shutil.copy(DATA / "schema1-emulator-run.json", tmp_path / "a-night.json")
    (tmp_path / "a-night").mkdir()
    shutil.move(tmp_path / "a-night.json", tmp_path / "a-night" / "results.json")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{")
    current_path = current.write(run_dir(tmp_path, current.header) / "results.json")
    with pytest.warns(ResultsHistoryWarning, match=r"broken/results.json: invalid JSON"):
        history = load_history(tmp_path, exclude=current_path)
    assert [h.header.date[:10] for h in history] == ["2026-12-03", "2026-12-03"]
    assert latest_before(history, current) is history[-1]


def _lines(ax) -> list[float]:
    """The y of every horizontal floor tick drawn on a speed panel."""
    return [float(seg[0][1]) for c in ax.collections for seg in c.get_segments()]


def test_speed_plot_keeps_phones_and_the_emulator_apart() -> None:
    fig = speed_canvas(with_phone(800.0))
    phone, emulator = fig.axes
    assert "phones" in phone.get_title() and "x86 emulator" in emulator.get_title()
    assert _lines(phone) == [1600.0]  # decode's floor (prefill has none)
    assert _lines(emulator) == []  # never a floor beside an emulator bar
    (only,) = speed_canvas(real_run()).axes
    assert "x86 emulator" in only.get_title() and _lines(only) == []


def test_trend_covers_accuracy_per_case_and_target(tmp_path: Path) -> None:
    runs = [real_run(), changed_run()]
    fig = trend_canvas(runs)
    titles = [ax.get_title() for ax in fig.axes]
    assert f"stories260k · {EMU.id} — SQNR" in titles
    assert f"stories260k · {EMU.id} — agreement / cosine" in titles
    sqnr = fig.axes[titles.index(f"stories260k · {EMU.id} — SQNR")]
    labels = [line.get_label() for line in sqnr.get_lines() if not line.get_label().startswith("_")]
    assert "gate qdq_sqnr_db" in labels and "gate target_sqnr_db" in labels
    shares = fig.axes[titles.index(f"stories260k · {EMU.id} — agreement / cosine")]
    assert "parity min_row_cosine" in [line.get_label() for line in shares.get_lines()]
    assert 15.0 in [list(line.get_ydata())[0] for line in sqnr.get_lines()
                    if line.get_linestyle() == ":"]  # the QDQ floor it is judged by
    pyplot_loaded = "matplotlib.pyplot" in sys.modules
    paths = write_plots(runs[1], runs[:1], tmp_path)
    assert [p.name for p in paths] == ["speed.png", "trend.png"]
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 10_000
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_loaded  # no global pyplot state


def test_plots_are_skipped_without_figures(tmp_path: Path) -> None:
    run = ResultsFile(Header("2026-08-14T03:00:00+00:00", ["SM8650"], "htp", [], {}))
    run.add(Record.for_target("parity", "stories260k", EMU, [figures.info("method_names", "5")]))
    assert speed_canvas(run) is None and trend_canvas([run]) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert write_plots(run, [], tmp_path) == []
