"""PNG plots of a run's tok/s: against the golden floors, and as a trend over earlier runs.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot, no ``matplotlib.use``), so
nothing global changes in the process that calls these functions.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.golden.perf import GoldenPerf
from pytest_qnn_genai.report.results import ResultsFile

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOTTED = ("prefill_tok_s", "decode_tok_s")
VS_GOLDEN_NAME = "perf-vs-golden.png"
TREND_NAME = "perf-trend.png"
_COLORS = {"prefill_tok_s": "tab:blue", "decode_tok_s": "tab:orange"}


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def plot_vs_golden(results: ResultsFile, goldens: Mapping[str, GoldenPerf],
                   path: Path | str) -> Path | None:
    """Bars of prefill/decode tok/s per model × target with the golden floors as black ticks.

    Returns the PNG path, or None when the run has no tok/s figures.
    """
    figures = results.perf_figures()
    groups = list(dict.fromkeys((m, t) for m, t, f in figures if f in PLOTTED))
    if not groups:
        return None
    soc_backend = {(r.model, r.target): (r.soc, r.backend) for r in results.of_kind("perf")}
    fig = _figure(max(7.5, 1.9 * len(groups) + 3.5), 4.8)
    ax = fig.add_subplot()
    width = 0.8 / len(PLOTTED)
    floor_labelled = False
    for i, (model, target) in enumerate(groups):
        golden = goldens.get(model)
        for j, name in enumerate(PLOTTED):
            value = figures.get((model, target, name))
            if value is None:
                continue
            x = i - 0.4 + width * (j + 0.5)
            ax.bar(x, value, width * 0.9, color=_COLORS[name], label=name if i == 0 else None)
            ax.annotate(f"{value:.4g}", (x, value), ha="center", va="bottom", fontsize=8)
            floor = golden.floor(*soc_backend[(model, target)], name) if golden else None
            if floor:
                ax.hlines(floor, x - width / 2, x + width / 2, colors="black", linewidths=2.5,
                          label="_nolegend_" if floor_labelled else "golden floor (phone)")
                floor_labelled = True
    ax.set_xticks(range(len(groups)), [f"{m}\n{t}" for m, t in groups], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("tokens / second (log)")
    ax.set_title(f"tok/s vs golden floors — {results.header.date[:10]}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", which="both", alpha=0.3)
    path = Path(path)
    fig.savefig(path)
    return path


def plot_trend(runs: Sequence[ResultsFile], path: Path | str) -> Path | None:
    """One line per model × target × figure of tok/s over ``runs`` (dated by their headers).

    Returns the PNG path, or None when no run has tok/s figures.
    """
    series: dict[tuple[str, str, str], list[tuple[object, float]]] = {}
    for run in sorted(runs, key=lambda r: r.header.when):
        for key, value in run.perf_figures().items():
            if key[2] in PLOTTED:
                series.setdefault(key, []).append((run.header.when, value))
    if not series:
        return None
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    fig = _figure(9.0, 5.0)
    ax = fig.add_subplot()
    locator = AutoDateLocator(minticks=3, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    for (model, target, name), points in sorted(series.items()):
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", linestyle="-" if name == "decode_tok_s" else "--",
                label=f"{model} {target} {name}")
    ax.set_yscale("log")
    ax.set_ylabel("tokens / second (log)")
    ax.set_title(f"tok/s over {len(runs)} runs")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(which="both", alpha=0.3)
    path = Path(path)
    fig.savefig(path)
    return path


def write_plots(results: ResultsFile, history: Sequence[ResultsFile],
                goldens: Mapping[str, GoldenPerf], out_dir: Path | str) -> list[Path]:
    """Write both plots into ``out_dir`` (the trend covers ``history`` plus this run)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [plot_vs_golden(results, goldens, out / VS_GOLDEN_NAME),
               plot_trend([*history, results], out / TREND_NAME)]
    return [p for p in written if p is not None]
