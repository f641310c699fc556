"""The end of a run: the report folder, the perf diff against ``--qnn-compare-to`` and the
terminal summary (cache statistics, the parity table, the shard, the figures' verdicts, the
report's files).

The controller (or the only process) writes the report once, after every xdist worker's payload
is merged (:meth:`~pytest_qnn_genai.plugin.session.QnnSession.finish`); workers write nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai import figures as judged
from pytest_qnn_genai.cache.remote import redact
from pytest_qnn_genai.models import registry

if TYPE_CHECKING:
    from pytest_qnn_genai.plugin.session import QnnSession
    from pytest_qnn_genai.report.results import ResultsFile


def fingerprint(session: QnnSession) -> dict[str, object]:
    """What shaped this run's figures (versions, harness commit, settings, each case's
    run-time settings, every cache entry used), as plain data for the report."""
    from pytest_qnn_genai.models.registry import RUNTIME_FIELDS
    from pytest_qnn_genai.report.fingerprint import collect, git_state

    s = session.settings
    settings = {"socs": [x.name for x in s.socs], "backend": s.backend,
                "devices": list(s.devices), "models": list(s.models), "nightly": s.nightly,
                "rebuild": s.rebuild, "perf_noise": s.perf_noise,
                "perf_rounds": s.perf_rounds, "perf_min_tokens": s.perf_min_tokens,
                "perf_min_seconds": s.perf_min_seconds,
                "perf_ratio_floor": s.perf_ratio_floor,
                "perf_accepted_floor": s.perf_accepted_floor,
                "ab_pairs": [f"{a}:{b}" for a, b in s.ab_pairs]}
    cases = {c.name: {k: getattr(c, k) for k in RUNTIME_FIELDS}
             for c in registry.select(list(s.models), s.case_dirs, nightly=s.nightly)}
    found = collect(session.results.header.versions, git_state(session.config.rootpath), settings,
                    cases, session.cache_stats().used.values())
    if session.shard is not None:  # the merge checks the shards against each other with it
        found["shard"] = session.shard.to_dict()
    return found


def write_report(session: QnnSession) -> None:
    """Diffs against ``--qnn-compare-to`` and the ``--qnn-report`` folder (computed once)."""
    from dataclasses import replace

    from pytest_qnn_genai.report.diff import compare
    from pytest_qnn_genai.report.write import write_report as write_folder

    s = session.settings
    if s.report_dir is not None:
        session.results.header = replace(session.results.header, fingerprint=fingerprint(session))
        session.report = write_folder(s.report_dir, session.results, session.baseline,
                                      s.perf_noise,
                                      None if s.compare_to is None else str(s.compare_to))
    elif session.baseline is not None:
        session.report = (None, [], compare(session.results.perf_figures(),
                                            session.baseline.perf_figures(), s.perf_noise))


def figure_counts(results: ResultsFile) -> str:
    """``N figures: N pass, N fail (N with no record), …, N info (judged by nothing), …``."""
    every = [f for _, f in results.figures()]
    counts = judged.counts(every)
    words = {judged.FAIL: f"{counts[judged.FAIL]} fail ({judged.no_records(every)} with no "
                          "record)",
             judged.INFO: f"{counts[judged.INFO]} info (judged by nothing)"}
    return f"{len(every)} figures: " + ", ".join(words.get(v, f"{n} {v}")
                                                  for v, n in counts.items())


def terminal_summary(session: QnnSession, tr: pytest.TerminalReporter) -> None:
    """Cache statistics, the parity table, the figures' verdicts (no-record ones counted apart),
    the perf diff and the report's files."""
    if session.shard is not None and not session.is_worker:
        tr.write_sep("-", "qnn-genai shard")
        tr.write_line(session.shard.line())
    totals = session.cache_stats()
    if totals.active:
        url = session.settings.remote_cache
        tr.write_sep("-", "qnn-genai artifact cache")
        tr.write_line(totals.summary(str(session.settings.cache_dir),
                                     None if url is None else redact(url)))
    if session.parity.rows and not session.is_worker:
        tr.write_sep("-", "qnn-genai parity: legacy vs new (and A/B pairs: A vs B)")
        for line in session.parity.format():
            tr.write_line(line)
    if session.recorded and not session.is_worker:
        tr.write_sep("-", "qnn-genai figures")
        tr.write_line(figure_counts(session.results))
    if session.report is None:
        return
    from pytest_qnn_genai.report.diff import render_table

    folder, written, diffs = session.report
    if session.baseline is not None:
        tr.write_sep("-", f"qnn-genai perf vs {session.settings.compare_to}")
        tr.write(render_table(diffs))
    if folder is not None:
        tr.write_sep("-", "qnn-genai report")
        tr.write_line(f"{len(session.results.records)} records: "
                      + ", ".join(str(p) for p in written))
