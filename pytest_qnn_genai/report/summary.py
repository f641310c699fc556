"""``summary.md``: a run's verdicts, numerics and tok/s per model × target, as markdown tables."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_qnn_genai import text
from pytest_qnn_genai.files import write_text_atomic
from pytest_qnn_genai.golden.perf import GoldenPerf
from pytest_qnn_genai.report.diff import (
    NOISE,
    FigureDiff,
    FigureKey,
    render_table,
)
from pytest_qnn_genai.report.results import Record, ResultsFile, rate_or_time
from pytest_qnn_genai.untyped import Json

SUMMARY_NAME = "summary.md"
_NUMERIC_MAIN = ("sqnr_db", "cosine")


def _details(values: Mapping[str, Json], skip: tuple[str, ...] = ()) -> str:
    return ", ".join(f"{k}={text.cell(v)}" for k, v in values.items() if k not in skip)


def _test_name(r: Record) -> str:
    return text.cell(r.test.rsplit("::", 1)[-1] or "—")


def _header(results: ResultsFile) -> str:
    h = results.header
    verdicts = [r.verdict for r in results.records if r.verdict]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("pass", "fail", "skip")
                       if verdicts.count(v))
    rows = [("date", h.date), ("SoCs", ", ".join(h.socs)), ("backend", h.backend),
            ("devices", ", ".join(h.devices) or "x86-emulator"),
            *((k, v) for k, v in sorted(h.versions.items())), ("git", h.git_sha or "unknown"),
            ("records", f"{len(results.records)} ({counts or 'no verdicts'})")]
    table = ["| | |", "|---|---|"] + [f"| {k} | {text.cell(v)} |" for k, v in rows]
    return f"# QNN GenAI gate — {h.date[:10]}\n\n" + "\n".join(table) + "\n"


def _parity(records: list[Record]) -> list[str]:
    out = ["| test | verdict | details |", "|---|---|---|"]
    out += [f"| {_test_name(r)} | {r.verdict or '—'} | "
            f"{text.cell('; '.join(x for x in (_details(r.values), r.note) if x)) or '—'} |"
            for r in records]
    return out


def _numerics(records: list[Record]) -> list[str]:
    out = ["| test | SQNR (dB) | cosine | other | verdict |", "|---|---:|---:|---|---|"]
    out += [f"| {_test_name(r)} | {text.cell(r.values.get('sqnr_db'))} | "
            f"{text.cell(r.values.get('cosine'))} | {_details(r.values, _NUMERIC_MAIN) or '—'} | "
            f"{r.verdict or '—'} |" for r in records]
    return out


def _perf(records: list[Record], golden: GoldenPerf | None,
          diffs: Mapping[FigureKey, FigureDiff]) -> list[str]:
    out = ["| figure | value | golden floor | vs floor | previous | change | verdict |",
           "|---|---:|---:|---:|---:|---|---|"]
    for r in records:
        for name, value in r.values.items():
            if not rate_or_time(name, value):
                continue
            floor = golden.floor(r.soc, r.backend, name) if golden else None
            vs = f"{value / floor:.0%}" if floor else "—"
            d = diffs.get((r.model, r.target, name))
            prev, change = (text.cell(d.previous), d.bucket) if d else ("—", "—")
            out.append(f"| {name} | {text.cell(float(value))} | {text.cell(floor)} | {vs} | {prev} | "
                       f"{change} | {r.verdict or '—'} |")
    notes = [f"- {_test_name(r)}: {r.note}" for r in records if r.note]
    if records and records[0].is_emulator:
        notes.append("- x86 emulator: golden floors are phone figures, shown for reference only.")
    return out + ([""] + notes if notes else [])


def render_summary(results: ResultsFile, goldens: Mapping[str, GoldenPerf] | None = None,
                   previous: ResultsFile | None = None, diffs: Sequence[FigureDiff] = (),
                   noise: float | None = None) -> str:
    """The markdown summary: header, then per model × target parity, numerics and perf tables,
    then ``diffs``, the changes against ``previous`` (computed once by the caller with ``noise``:
    :func:`pytest_qnn_genai.report.diff.compare`)."""
    goldens = goldens or {}
    by_key = {d.key: d for d in diffs}
    parts = [_header(results)]
    pairs = dict.fromkeys((r.model, r.target) for r in results.records)
    for model, target in pairs:
        mine = [r for r in results.records if (r.model, r.target) == (model, target)]
        parts.append(f"## {model} · {target}\n")
        for kind, title, render in (("parity", "Parity", _parity),
                                    ("numerics", "Numerics", _numerics)):
            recs = [r for r in mine if r.kind == kind]
            if recs:
                parts.append(f"### {title}\n\n" + "\n".join(render(recs)) + "\n")
        perf = [r for r in mine if r.kind == "perf"]
        if perf:
            rows = _perf(perf, goldens.get(model), by_key)
            parts.append("### Performance\n\n" + "\n".join(rows) + "\n")
    if previous is not None:
        changed = [d for d in diffs if d.bucket != NOISE]
        quiet = len(diffs) - len(changed)
        band = f" (±{noise:.0%})" if noise is not None else ""
        parts.append(f"## Changes since {previous.header.date}\n\n" + render_table(changed)
                     + f"\n{quiet} figures within noise{band} not listed.\n")
    return "\n".join(parts)


def write_summary(path: Path | str, results: ResultsFile,
                  goldens: Mapping[str, GoldenPerf] | None = None,
                  previous: ResultsFile | None = None, diffs: Sequence[FigureDiff] = (),
                  noise: float | None = None) -> Path:
    """Write :func:`render_summary` to ``path`` atomically; returns the path."""
    path = Path(path)
    write_text_atomic(path, render_summary(results, goldens, previous, diffs, noise))
    return path
