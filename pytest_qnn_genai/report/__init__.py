"""The run report: ``results.json``, ``summary.md`` and tok/s plots, plus the nightly history."""
from pytest_qnn_genai.report.plots import plot_trend, plot_vs_golden, write_plots
from pytest_qnn_genai.report.results import (Header, Record, ResultsFile, ResultsFileError,
                                             latest_before, load_history, run_dir)
from pytest_qnn_genai.report.summary import render_summary, write_summary

__all__ = ["Header", "Record", "ResultsFile", "ResultsFileError", "latest_before", "load_history",
           "plot_trend", "plot_vs_golden", "render_summary", "run_dir", "write_plots",
           "write_summary"]
