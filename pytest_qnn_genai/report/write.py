"""Writing a run's report folder: ``results.json``, ``summary.md``, ``summary.html``, the plots.

``DIR/<date>/`` for the run (``DIR/<date>-<HHMMSS>/`` for a second run that day); the summary
compares with ``--qnn-compare-to`` or else the newest earlier run in ``DIR``.
"""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.report.diff import FigureDiff, compare
from pytest_qnn_genai.report.html import HTML_NAME, write_html
from pytest_qnn_genai.report.plots import write_plots
from pytest_qnn_genai.report.results import (
    RESULTS_NAME,
    ResultsFile,
    latest_before,
    load_history,
    run_dir,
)
from pytest_qnn_genai.report.summary import SUMMARY_NAME, build, write_summary


def load_baseline(path: Path) -> ResultsFile:
    """``--qnn-compare-to``: a ``results.json`` or a folder holding one (``ResultsFileError``)."""
    path = Path(path)
    return ResultsFile.load(path / RESULTS_NAME if path.is_dir() else path)


def report_folder(root: Path, results: ResultsFile) -> Path:
    """``root/<date>/`` for this run; ``root/<date>-<HHMMSS>/`` when that day already has one."""
    folder = run_dir(root, results.header)
    if (folder / RESULTS_NAME).exists():
        folder = folder.with_name(f"{folder.name}-{results.header.when.strftime('%H%M%S')}")
    return folder


def write_report(root: Path, results: ResultsFile, baseline: ResultsFile | None, noise: float,
                 baseline_name: str | None = None) -> tuple[Path, list[Path], list[FigureDiff]]:
    """Write ``results.json``, the plots, ``summary.md`` and ``summary.html`` of a run into its
    report folder.

    The summaries compare with ``baseline`` (``--qnn-compare-to``, named ``baseline_name``), else
    with the newest earlier run in ``root``; the trend plot covers every earlier run in ``root``.
    Returns the folder, the files written and the speed diffs against the run compared with.
    """
    folder = report_folder(Path(root), results)
    folder.mkdir(parents=True, exist_ok=True)
    history = load_history(root, exclude=folder / RESULTS_NAME)
    previous = baseline if baseline is not None else latest_before(history, results)
    compared = (baseline_name or "--qnn-compare-to") if baseline is not None else (
        "the newest earlier run in the report folder")
    diffs = (compare(results.perf_figures(), previous.perf_figures(), noise)
             if previous is not None else [])
    written = [results.write(folder / RESULTS_NAME)]
    plots = write_plots(results, history, folder)
    sections = build(results, previous, noise, compared, plots)
    title = sections[0].title
    written += [write_summary(folder / SUMMARY_NAME, sections),
                write_html(folder / HTML_NAME, sections, title), *plots]
    return folder, written, diffs
