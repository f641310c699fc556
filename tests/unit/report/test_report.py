"""The run report: results.json round trip and history, summary.md tables, PNG plots."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pytest_qnn_genai.golden.perf import load_golden
from pytest_qnn_genai.report.diff import compare
from pytest_qnn_genai.report.plots import plot_trend, plot_vs_golden, write_plots
from pytest_qnn_genai.report.results import (
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
from pytest_qnn_genai.report.summary import render_summary, write_summary
from pytest_qnn_genai.targets import Target, soc

GOLDEN = load_golden(Path(__file__).resolve().parents[3] / "golden" / "perf" / "stories260k.json")
GOLDENS = {"stories260k": GOLDEN}
PHONE = Target(soc("SM8650"), "htp", "R5CX1234ABC")
EMU = Target(soc("SM8650"), "htp")
VERSIONS = {"torch": "2.13.0+cpu", "executorch": "1.5.1", "qairt": "2.51.0-emulator",
            "pytest-qnn-genai": "0.1.0"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _run(date: str, decode: float = 1700.0, prefill: float = 2400.0,
         ttft: float = 0.02) -> ResultsFile:
    header = Header(date, ["SM8650"], "htp", [PHONE.device], VERSIONS, "0123abcd" * 5)
    run = ResultsFile(header)
    for target, scale in ((PHONE, 1.0), (EMU, 0.02)):
        run.add(Record.for_target(
            "parity", "stories260k", target, {"tokens_match": "48/48"}, verdict="pass",
            test="suites/parity/test_parity.py::test_legacy_vs_new[stories260k-" + target.id + "]"))
        run.add(Record.for_target(
            "numerics", "stories260k", target, {"sqnr_db": 31.25, "cosine": 0.9991,
                                                "max_abs": 0.125}, verdict="pass",
            test="suites/numerics/test_logits.py::test_logits_sqnr"))
        run.add(Record.for_target(
            "perf", "stories260k", target,
            {"prompt_tokens": 4, "generated_tokens": 1024, "prefill_tok_s": prefill * scale,
             "decode_tok_s": decode * scale, "ttft_s": ttft / scale, "model_load_s": 0.3},
            verdict="pass" if target is PHONE else None,
            test="suites/perf/test_perf.py::test_tok_s",
            note="pooled over 4 runs | num_iters 4"))
    return run


def test_results_json_round_trip(tmp_path: Path) -> None:
    run = _run("2026-08-14T03:00:00+00:00")
    path = run.write(run_dir(tmp_path / "reports", run.header) / "results.json")
    assert path == tmp_path / "reports" / "2026-08-14" / "results.json"
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]  # no temp file left
    loaded = ResultsFile.load(path)
    assert loaded.to_dict() == run.to_dict()
    assert loaded.header == run.header and loaded.records == run.records
    data = json.loads(path.read_text())
    assert data["schema"] == 1 and data["header"]["versions"]["qairt"] == "2.51.0-emulator"
    assert data["records"][2]["values"]["decode_tok_s"] == 1700.0
    assert loaded.perf_figures()[("stories260k", PHONE.id, "decode_tok_s")] == 1700.0
    assert ("stories260k", PHONE.id, "generated_tokens") not in loaded.perf_figures()


def test_records_from_xdist_workers_merge_through_dicts() -> None:
    run = _run("2026-08-14T03:00:00+00:00")
    merged = ResultsFile(run.header)
    for d in json.loads(json.dumps([r.to_dict() for r in run.records])):
        merged.add(Record.from_dict(d))
    assert merged.records == run.records


@pytest.mark.parametrize("content,match", [
    ("not json", "invalid JSON at line 1"),
    ('{"schema": 7}', "not a schema-1 results file"),
    ('{"schema": 1, "header": {}, "records": []}', "malformed results file"),
    ('{"schema": 1, "header": {"date": "2026-08-14", "socs": [], "backend": "htp", "devices": [],'
     ' "versions": {}}, "records": []}', "has no time zone"),
    ('{"schema": 1, "header": {"date": "2026-08-14T00:00:00+00:00", "socs": [], "backend": "htp",'
     ' "devices": [], "versions": {}}, "records": [{"kind": "speed"}]}', "malformed results file"),
])
def test_damaged_results_file_is_one_line(tmp_path: Path, content: str, match: str) -> None:
    (tmp_path / "results.json").write_text(content)
    with pytest.raises(ResultsFileError, match=match) as info:
        ResultsFile.load(tmp_path / "results.json")
    message = str(info.value)
    assert message.startswith(str(tmp_path / "results.json")) and "\n" not in message


def test_record_kind_is_checked() -> None:
    with pytest.raises(ValueError, match="record kind must be one of parity, numerics, perf"):
        Record.for_target("speed", "stories260k", EMU, {})


def test_header_collect_stamps_time_and_git(tmp_path: Path) -> None:
    h = Header.collect(["SM8650"], "htp", [], VERSIONS, repo=tmp_path)
    assert h.when.tzinfo is not None and h.git_sha is None  # tmp_path is no git work tree
    if shutil.which("git") is None:
        pytest.skip("no git client")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert git_sha(repo) == head.strip() and len(head.strip()) == 40


def _history(root: Path) -> list[ResultsFile]:
    # folder names out of date order on purpose: the history is ordered by header dates
    runs = {"b-night": _run("2026-08-12T03:00:00+00:00", decode=1650.0),
            "a-night": _run("2026-08-13T03:00:00+00:00", decode=1800.0, ttft=0.01)}
    for name, run in runs.items():
        run.write(root / name / "results.json")
    return list(runs.values())


def test_history_is_date_ordered_skips_damage_and_the_current_run(tmp_path: Path) -> None:
    _history(tmp_path)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{")
    current = _run("2026-08-14T03:00:00+00:00")
    current_path = current.write(run_dir(tmp_path, current.header) / "results.json")
    with pytest.warns(ResultsHistoryWarning, match=r"broken/results.json: invalid JSON"):
        history = load_history(tmp_path, exclude=current_path)
    assert [h.header.date[:10] for h in history] == ["2026-08-12", "2026-08-13"]
    assert latest_before(history, current).header.date.startswith("2026-08-13")
    assert latest_before(history, history[0]) is None


def test_summary_has_the_tables(tmp_path: Path) -> None:
    previous = _run("2026-08-13T03:00:00+00:00", decode=1500.0, ttft=0.04)
    current = _run("2026-08-14T03:00:00+00:00", decode=1700.0)
    diffs = compare(current.perf_figures(), previous.perf_figures(), noise=0.10)
    path = write_summary(tmp_path / "summary.md", current, GOLDENS, previous, diffs, 0.10)
    md = path.read_text()
    assert md.startswith("# QNN GenAI gate — 2026-08-14\n")
    assert "| executorch | 1.5.1 |" in md and "| git | " + "0123abcd" * 5 + " |" in md
    assert "| records | 6 (5 pass) |" in md  # the emulator's perf record is informational
    assert f"## stories260k · {PHONE.id}" in md and f"## stories260k · {EMU.id}" in md
    assert (f"| test_legacy_vs_new[stories260k-{PHONE.id}] | pass | tokens_match=48/48 |"
            in md)
    assert "| test_logits_sqnr | 31.25 | 0.9991 | max_abs=0.125 | pass |" in md
    # tok/s vs golden (1600 floor), previous value and its bucket
    assert "| decode_tok_s | 1700 | 1600 | 106% | 1500 | ≥1.1x faster | pass |" in md
    assert "| prefill_tok_s | 2400 | — | — | 2400 | within noise | pass |" in md
    assert "| ttft_s | 0.02 | — | — | 0.04 | ≥2x faster | pass |" in md
    assert "- test_tok_s: pooled over 4 runs | num_iters 4" in md
    assert "- x86 emulator: golden floors are phone figures" in md  # only in the emulator section
    assert md.count("golden floors are phone figures") == 1
    changes = md.split("## Changes since 2026-08-13T03:00:00+00:00\n")[1]
    assert f"| stories260k | {PHONE.id} | decode_tok_s | 1500 | 1700 | 1.13x | ≥1.1x faster |" \
        in changes
    assert "prefill_tok_s" not in changes and "4 figures within noise (±10%) not listed." in changes


def test_summary_without_previous_or_goldens() -> None:
    md = render_summary(_run("2026-08-14T03:00:00+00:00"))
    assert "Changes since" not in md
    assert "| decode_tok_s | 1700 | — | — | — | — | pass |" in md


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 10_000  # a drawn chart, not an empty canvas


def test_plots_are_written_as_png(tmp_path: Path) -> None:
    history = _history(tmp_path / "reports")
    current = _run("2026-08-14T03:00:00+00:00", decode=1700.0)
    pyplot_loaded = "matplotlib.pyplot" in sys.modules
    paths = write_plots(current, history, GOLDENS, tmp_path / "reports" / "2026-08-14")
    assert [p.name for p in paths] == ["perf-vs-golden.png", "perf-trend.png"]
    for p in paths:
        _assert_png(p)
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_loaded  # no global pyplot state


def test_plots_are_skipped_without_tok_s(tmp_path: Path) -> None:
    run = ResultsFile(Header("2026-08-14T03:00:00+00:00", ["SM8650"], "htp", [], VERSIONS))
    run.add(Record.for_target("parity", "stories260k", EMU, {}, verdict="pass"))
    assert plot_vs_golden(run, GOLDENS, tmp_path / "a.png") is None
    assert plot_trend([run], tmp_path / "b.png") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert write_plots(run, [], GOLDENS, tmp_path) == []
