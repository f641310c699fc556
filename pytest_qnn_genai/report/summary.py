"""The run summary, one document rendered twice: ``summary.md`` and ``summary.html``.

It opens with the verdict counts and **what changed** since the previous run (or
``--qnn-compare-to``): the fingerprint's differences (versions, harness commit, settings, each artifact's key
inputs: build settings and compile options) next to the figures that moved beyond noise or changed
verdict. Then the run's facts, and per model x target one table per suite: every figure with its
value, reference, details, **the judge that gave its verdict** and the verdict (``info`` when
nothing judged it); a case whose weights are a model upstream gates first gets its figures beside
upstream's ``LlmSpecs`` (:mod:`pytest_qnn_genai.report.upstream`). An emulator section says that
no phone floor applies there.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_qnn_genai import text
from pytest_qnn_genai.figures import FAIL, RATIO, VERDICTS, Figure, no_records
from pytest_qnn_genai.files import write_text_atomic
from pytest_qnn_genai.report import upstream
from pytest_qnn_genai.report.changes import Move, moves
from pytest_qnn_genai.report.document import Cell, Image, Section, Table, to_markdown
from pytest_qnn_genai.report.fingerprint import Difference, differences
from pytest_qnn_genai.report.results import KINDS, Record, ResultsFile

SUMMARY_NAME = "summary.md"
TITLES = {"gate": "Gate", "parity": "Parity", "smoke": "Smoke", "perf": "Performance"}
EMULATOR_NOTE = ("x86 emulator: its speed figures are informational (info) and never set against "
                 "a phone's golden floor; its A/B ratios are judged against each other.")
VERDICT_RULE = ("Each figure's verdict is that of the check named in its judge column; "
                "info: reported, judged by nothing.")
_LONG = 80


def _text(value: object) -> str:
    shown = text.value(value)
    return shown if len(shown) <= _LONG else shown[:_LONG - 3] + "..."


def _numeric(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def details(f: Figure) -> str:
    """A figure's context in words (an A/B ratio: its bounds, rounds and both medians)."""
    c = dict(f.context)
    if f.rule == RATIO:
        high = "∞" if c.get("high") is None else text.value(c.get("high"))
        a, b = c.get("a"), c.get("b")
        conf = c.get("confidence")
        words = [f"{conf:.0%} bounds " if isinstance(conf, float) else "bounds ",
                 f"{text.value(c.get('low'))}..{high}, {c.get('rounds')} rounds"]
        for side in (a, b):
            median = c.get(f"median_{side}")
            if isinstance(median, (int, float)):
                words.append(f", median {side} {text.number(float(median))}")
        return "".join(words)
    return ", ".join(f"{k} {_text(v)}" for k, v in c.items())


def test_name(r: Record) -> str:
    """The test's name without the model case and target its section already names."""
    name = r.test.rsplit("::", 1)[-1] or "—"
    func, _, params = name.partition("[")
    rest = params.rstrip("]").removeprefix(f"{r.model}-").removeprefix(r.target).lstrip("-")
    return f"{func}[{rest}]" if rest else func


def _figure_table(records: Sequence[Record], moved: Mapping[tuple[str, str, str, str], Move],
                  with_previous: bool) -> Table:
    columns = ["test", "figure", "value", "reference", "details", "judge", "verdict"]
    if with_previous:
        columns += ["previous", "change"]
    rows = []
    for r in records:
        test = test_name(r)
        for i, f in enumerate(r.figures):
            row = [Cell(test if i == 0 else ""), Cell(f.title), Cell(_text(f.value),
                   numeric=_numeric(f.value)), Cell(_text(f.reference) if f.reference not in (None, "")
                                                   else "—", numeric=_numeric(f.reference)),
                   Cell(details(f) or "—"), Cell(f.judge or "—"), Cell(f.verdict, f.verdict)]
            if with_previous:
                m = moved.get((r.model, r.target, r.kind, f.name))
                row += [Cell(_text(m.previous) if m else "—", numeric=m is not None
                             and _numeric(m.previous)), Cell(m.change if m else "—")]
            rows.append(row)
    return Table(columns, rows, counted=True)


def _counts(results: ResultsFile) -> Table:
    counts = results.counts()
    holes = no_records(f for _, f in results.figures())
    # a verdict is coloured only when some figure has it: the page shows red only for a failure
    rows = [[Cell(v, v if counts[v] else None), Cell(str(counts[v]), numeric=True)]
            for v in VERDICTS]
    rows.insert(VERDICTS.index(FAIL) + 1, [Cell("fail: no record", FAIL if holes else None),
                                           Cell(str(holes), numeric=True)])
    return Table(["verdict", "figures"], rows, name="verdict-counts")


def _changes(results: ResultsFile, previous: ResultsFile | None, compared: str,
             diffs: Sequence[Difference], moved: Sequence[Move], noise: float | None) -> Section:
    if previous is None:
        return Section("What changed", 2, ["No earlier run to compare with (--qnn-compare-to, "
                                          "or an earlier run in the --qnn-report folder)."])
    blocks: list[Table | Image | str] = [f"Compared with {compared} ({previous.header.date})."]
    if not previous.header.fingerprint:
        blocks.append("The earlier run has no fingerprint (written before fingerprints).")
    elif diffs:
        blocks.append(Table(["what differs", "previous", "now"],
                            [[Cell(d.what), Cell(d.previous or "—"), Cell(d.current or "—")]
                             for d in diffs], name="fingerprint-differences"))
    else:
        blocks.append("Same versions, harness, settings and artifacts (keys and digests).")
    listed = [m for m in moved if m.moved]
    band = f"±{noise:.0%} for speed, " if noise is not None else ""
    if listed:
        blocks.append(Table(["model", "target", "suite", "figure", "previous", "now", "change",
                             "verdict"],
                            [[Cell(m.model), Cell(m.target), Cell(m.kind), Cell(m.figure),
                              Cell(_text(m.previous), numeric=_numeric(m.previous)),
                              Cell(_text(m.current), numeric=_numeric(m.current)),
                              Cell(m.change), Cell(m.verdict, m.verdict)] for m in listed],
                            name="figure-moves"))
    else:
        blocks.append("No figure moved beyond noise and no verdict changed.")
    blocks.append(f"{len(moved) - len(listed)} figures within noise ({band}any change for the "
                  "rest) not listed.")
    return Section(f"What changed since {previous.header.date[:10]}", 2, blocks)


def _facts(results: ResultsFile) -> Section:
    h = results.header
    harness = h.fingerprint.get("harness", {})
    commit = harness.get("commit") or h.git_sha or "unknown"
    dirty = " (uncommitted changes)" if harness.get("dirty") else ""
    rows = [("date", h.date), ("SoCs", ", ".join(h.socs)), ("backend", h.backend),
            ("devices", ", ".join(h.devices) or "x86-emulator"),
            *((k, v) for k, v in sorted(h.versions.items())), ("harness commit", commit + dirty),
            ("artifacts used", str(len(h.fingerprint.get("artifacts", [])))),
            ("records", f"{len(results.records)} ({len(results.figures())} figures)")]
    merged = h.fingerprint.get("merged")
    if merged:  # a sharded run (report/merge.py): what each shard took
        rows.append(("merged from", f"{merged['shards']} shards: " + "; ".join(merged["lines"])))
    return Section("Run", 2, [Table(["fact", "value"], [[Cell(k), Cell(str(v))] for k, v in rows])])


def build(results: ResultsFile, previous: ResultsFile | None = None, noise: float | None = None,
          compared: str = "the previous run", plots: Sequence[Path] = ()) -> list[Section]:
    """The summary document (``noise``: ``--qnn-perf-noise``, the speed figures' band)."""
    moved = moves(results, previous, noise or 0.0) if previous is not None else []
    diffs = (differences(previous.header.fingerprint, results.header.fingerprint)
             if previous is not None else [])
    by_key = {m.key: m for m in moved}
    sections = [Section(f"QNN GenAI gate — {results.header.date[:10]}", 1,
                        [_counts(results), VERDICT_RULE]),
                _changes(results, previous, compared, diffs, moved, noise), _facts(results),
                *upstream.sections(results)]
    for model, target in dict.fromkeys((r.model, r.target) for r in results.records):
        mine = [r for r in results.records if (r.model, r.target) == (model, target)]
        speed = mine[0].is_emulator and any(r.kind == "perf" for r in mine)
        blocks: list[Table | Image | str] = [EMULATOR_NOTE] if speed else []
        sections.append(Section(f"{model} · {target}", 2, blocks))
        for kind in KINDS:
            recs = [r for r in mine if r.kind == kind and r.figures]
            if not recs:
                continue
            notes = [f"- {test_name(r)}: {r.note}" for r in recs if r.note]
            sections.append(Section(TITLES[kind], 3, [_figure_table(recs, by_key,
                                                                     previous is not None),
                                                       *(["\n".join(notes)] if notes else [])]))
    if plots:
        sections.append(Section("Plots", 2, [Image(p, p.stem.replace("-", " ")) for p in plots]))
    return sections


def render_summary(results: ResultsFile, previous: ResultsFile | None = None,
                   noise: float | None = None, compared: str = "the previous run",
                   plots: Sequence[Path] = ()) -> str:
    """``summary.md``'s text."""
    return to_markdown(build(results, previous, noise, compared, plots))


def write_summary(path: Path | str, sections: list[Section]) -> Path:
    """Write the document as markdown atomically; returns the path."""
    path = Path(path)
    write_text_atomic(path, to_markdown(sections))
    return path
