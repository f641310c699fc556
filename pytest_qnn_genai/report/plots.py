"""PNG plots of a run: its speed now, and the trend of speed and accuracy over earlier runs.

``speed.png`` draws prefill/decode tok/s per model x target, **phones and the x86 emulator in
separate panels**; a golden floor is drawn only where a phone figure was judged by it (the
figure's own bound), never beside an emulator bar. ``trend.png`` has one row per model x target
and three panels: tok/s, SQNR (dB), and shares (greedy agreement, cosine), each series a figure
of one suite over the runs, with the threshold it is judged against dotted where it has one.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot, no ``matplotlib.use``), so
nothing global changes in the process that calls these functions.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.figures import AT_LEAST, AT_MOST, PHONE_FLOOR, Figure
from pytest_qnn_genai.report.results import Record, ResultsFile

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as Canvas

PLOTTED = ("prefill_tok_s", "decode_tok_s")
SPEED_NAME = "speed.png"
TREND_NAME = "trend.png"
_COLORS = {"prefill_tok_s": "tab:blue", "decode_tok_s": "tab:orange"}
Panel = tuple[str, str]  # (title, y label)
PANELS: tuple[Panel, ...] = (("speed", "tokens / second (log)"), ("SQNR", "dB"),
                             ("agreement / cosine", "share"))
SeriesKey = tuple[str, str, str, str]  # (model, target, suite, figure)


def _canvas(width: float, height: float) -> Canvas:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def panel_of(f: Figure) -> int | None:
    """Which trend panel a figure belongs in (None: not plotted)."""
    if f.number is None or f.name.endswith("_ratio"):
        return None
    if f.name.endswith("tok_s"):
        return 0
    if f.name.endswith("_db"):
        return 1
    if "agreement" in f.name or "cosine" in f.name:
        return 2
    return None


def _speed_panel(ax: Axes, groups: list[tuple[str, str]],
                 figs: dict[tuple[str, str, str], Figure], title: str) -> None:
    width = 0.8 / len(PLOTTED)
    floor_labelled = False
    tops: list[float] = []
    for i, (model, target) in enumerate(groups):
        for j, name in enumerate(PLOTTED):
            f = figs.get((model, target, name))
            if f is None or f.number is None:
                continue
            x, value = i - 0.4 + width * (j + 0.5), f.number
            tops.append(max(value, f.bound or 0.0))
            ax.bar(x, value, width * 0.9, color=_COLORS[name], label=name if i == 0 else None)
            ax.annotate(f"{value:.4g}\n{f.verdict}", (x, value), ha="center", va="bottom",
                        fontsize=7)
            if f.rule == PHONE_FLOOR and f.bound:
                ax.hlines(f.bound, x - width / 2, x + width / 2, colors="black", linewidths=2.5,
                          label="_nolegend_" if floor_labelled else "golden floor (phone)")
                floor_labelled = True
    ax.set_xticks(range(len(groups)), [f"{m}\n{t}" for m, t in groups], fontsize=8)
    ax.set_yscale("log")
    if tops:  # room above the tallest bar or floor for its label
        ax.set_ylim(top=max(tops) * 3)
    ax.set_ylabel("tokens / second (log)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(axis="y", which="both", alpha=0.3)


def speed_canvas(results: ResultsFile) -> Canvas | None:
    """Bars of prefill/decode tok/s: phones and the emulator in separate panels, a golden floor
    only beside a phone figure it judged (None when the run has no tok/s figures)."""
    figs: dict[tuple[str, str, str], Figure] = {}
    where: dict[tuple[str, str], Record] = {}
    for r, f in results.figures():
        if r.kind == "perf" and f.name in PLOTTED and f.number is not None:
            figs[(r.model, r.target, f.name)] = f
            where[(r.model, r.target)] = r
    if not figs:
        return None
    phones = [g for g, r in where.items() if not r.is_emulator]
    emulator = [g for g, r in where.items() if r.is_emulator]
    panels = [(g, t) for g, t in ((phones, "phones: against their golden floors"),
                                  (emulator, "x86 emulator: informational, no floor applies"))
              if g]
    fig = _canvas(max(7.5, 2.6 * len(figs) / 2 + 3.0), 4.8)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (groups, title) in zip(axes, panels):
        _speed_panel(ax, groups, figs, title)
    fig.suptitle(f"tok/s — {results.header.date[:10]}")
    return fig


def plot_speed(results: ResultsFile, path: Path | str) -> Path | None:
    """:func:`speed_canvas` as a PNG; None when the run has no tok/s figures."""
    return _save(speed_canvas(results), path)


def _save(fig: Canvas | None, path: Path | str) -> Path | None:
    if fig is None:
        return None
    path = Path(path)
    fig.savefig(path)
    return path


def _series(runs: Sequence[ResultsFile]) -> dict[SeriesKey, list[tuple[datetime, Figure]]]:
    series: dict[SeriesKey, list[tuple[datetime, Figure]]] = {}
    for run in sorted(runs, key=lambda r: r.header.when):
        for r, f in run.figures():
            if panel_of(f) is not None:
                series.setdefault((r.model, r.target, r.kind, f.name), []).append(
                    (run.header.when, f))
    return series


def trend_canvas(runs: Sequence[ResultsFile]) -> Canvas | None:
    """Per model x target: tok/s, SQNR and shares over ``runs`` (dated by their headers); None
    when no run has a plotted figure."""
    series = _series(runs)
    if not series:
        return None
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    rows = list(dict.fromkeys((m, t) for m, t, _, _ in sorted(series)))
    fig = _canvas(15.0, 3.0 * len(rows) + 0.6)
    grid = fig.subplots(len(rows), len(PANELS), squeeze=False)
    for i, (model, target) in enumerate(rows):
        for j, (title, ylabel) in enumerate(PANELS):
            ax = grid[i][j]
            mine = {k: pts for k, pts in series.items()
                    if k[:2] == (model, target) and panel_of(pts[-1][1]) == j}
            ax.set_title(f"{model} · {target} — {title}", fontsize=9)
            if not mine:
                ax.text(0.5, 0.5, "no figures", ha="center", va="center", transform=ax.transAxes,
                        color="grey")
                ax.set_xticks([])
                ax.set_yticks([])
                continue
            locator = AutoDateLocator(minticks=2, maxticks=6)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
            for (_, _, kind, name), pts in sorted(mine.items()):
                xs = [when for when, _ in pts]
                ys = [f.number for _, f in pts]
                (line,) = ax.plot(xs, ys, marker="o", label=f"{kind} {name}")
                last = pts[-1][1]
                if last.bound is not None and last.rule in (AT_LEAST, AT_MOST, PHONE_FLOOR):
                    ax.axhline(last.bound, color=line.get_color(), linestyle=":", linewidth=1)
            days = {when.date() for pts in mine.values() for when, _ in pts}
            if len(days) == 1:  # one night: a day either side, not years of empty axis
                when = min(w for pts in mine.values() for w, _ in pts)
                ax.set_xlim(when - timedelta(days=1), when + timedelta(days=1))
            if j == 0:
                ax.set_yscale("log")
            ax.set_ylabel(ylabel, fontsize=8)
            ax.legend(fontsize=6, loc="best")
            ax.grid(which="both", alpha=0.3)
    fig.suptitle(f"trend over {len(runs)} runs (dotted: the threshold a figure is judged by)")
    return fig


def plot_trend(runs: Sequence[ResultsFile], path: Path | str) -> Path | None:
    """:func:`trend_canvas` as a PNG; None when no run has a plotted figure."""
    return _save(trend_canvas(runs), path)


def write_plots(results: ResultsFile, history: Sequence[ResultsFile],
                out_dir: Path | str) -> list[Path]:
    """Write both plots into ``out_dir`` (the trend covers ``history`` plus this run)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [plot_speed(results, out / SPEED_NAME),
               plot_trend([*history, results], out / TREND_NAME)]
    return [p for p in written if p is not None]
