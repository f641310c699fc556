"""The *updated* outcome: a test that wrote a committed expectation reports ``updated``, never
``passed``, with one line per changed figure or snapshot; an update under ``CI`` is refused.

A golden written by :func:`pytest_qnn_genai.golden.updates.write` is journalled there; a syrupy
snapshot written under ``--snapshot-update`` is read back from the test's snapshot assertions
(created or changed ones only: a snapshot that matched was compared, so its test passed). After
each test phase :func:`note` moves both onto the report's ``user_properties`` (they travel with
the report from an xdist worker), :func:`teststatus` turns a passing call with updates into the
``updated`` category (the summary line's "N updated"), and :func:`terminal_summary` lists the
changes. The hazard: an update run whose tests passed against what they had just written read as
a green gate, and a CI job with an update flag accepted whatever it measured.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_qnn_genai.golden import updates
from pytest_qnn_genai.settings import Settings, in_ci

PROPERTY = "qnn_updated"  # the report's user property: the lines of what the test wrote
UPDATED = "updated"  # the outcome category (pytest_report_teststatus)
UPDATE_FLAGS = (("update_golden", "--qnn-update-golden"),
                ("update_snapshots", "--snapshot-update"),
                ("update_new_snapshots_only", "--snapshot-update-new-only"))


def refuse_in_ci(config: pytest.Config, settings: Settings, environ: Mapping[str, str]) -> None:
    """One ``UsageError`` line when an update flag is given where ``$CI`` is set, unless
    ``--qnn-force-update``: a CI run judges against what was reviewed, it accepts nothing."""
    if settings.force_update or not in_ci(environ):
        return
    given = update_flags(config, settings)
    if given:
        raise pytest.UsageError(
            f"{', '.join(given)}: refused where $CI is set (CI={environ.get('CI')!r}): a CI "
            "run judges against the reviewed golden files; update locally and commit the diff, "
            "or add --qnn-force-update")


_PENDING = pytest.StashKey[list[str]]()


def update_flags(config: pytest.Config, settings: Settings) -> list[str]:
    """The update flags this run was given."""
    return [flag for dest, flag in UPDATE_FLAGS
            if (settings.update_golden if dest == "update_golden"
                else getattr(config.option, dest, False))]


def update_run(config: pytest.Config, settings: Settings) -> bool:
    """True when an update flag was given: only then is a test that wrote an expectation one
    that updated the gate's (a test of the writer itself writes into its own folders)."""
    return bool(update_flags(config, settings))


def note(item: pytest.Item, report: pytest.TestReport, update: bool = True) -> None:
    """Move what this test phase wrote (goldens, and on the call phase syrupy's snapshots) onto
    the call phase's report (a setup phase's writes wait in the item's stash for it); outside an
    update run (``update`` False) the journal is emptied and nothing is noted."""
    written_now = updates.take()
    if not update:
        return
    pending = item.stash.setdefault(_PENDING, [])
    pending += [line for made in written_now if made.changed for line in made.lines()]
    if report.when == "call":
        pending += _snapshot_lines(item)
        if pending:
            report.user_properties.append((PROPERTY, list(pending)))
        pending.clear()
    elif report.when == "teardown" and pending:  # written where no call report can say it
        report.sections.append(("qnn-genai updates", "\n".join(pending)))
        pending.clear()


def written(report: pytest.TestReport) -> list[str]:
    """The update lines a report carries (empty when the test wrote nothing)."""
    return [str(line) for key, value in report.user_properties
            if key == PROPERTY and isinstance(value, list) for line in value]


def teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """``updated`` (``U``) for a test that passed after writing a committed expectation."""
    if report.when == "call" and report.passed and written(report):
        return UPDATED, "U", "UPDATED"
    return None


def terminal_summary(tr: pytest.TerminalReporter) -> None:
    """Each updated test and its changes, one line per figure, file or snapshot."""
    reports = [r for r in tr.stats.get(UPDATED, []) if isinstance(r, pytest.TestReport)]
    reports += [r for r in tr.stats.get("failed", [])
                if isinstance(r, pytest.TestReport) and written(r)]
    if not reports:
        return
    tr.write_sep("-", "qnn-genai updates (written, not judged: review the diff)")
    for r in reports:
        tr.write_line(f"{r.nodeid}: {'UPDATED' if r.passed else 'FAILED after writing'}")
        for line in written(r):
            tr.write_line(f"  {line}")


def _snapshot_lines(item: pytest.Item) -> list[str]:
    try:
        from syrupy.assertion import SnapshotAssertion
    except ImportError:  # syrupy is not installed: no snapshots to read
        return []
    lines = []
    for value in getattr(item, "funcargs", {}).values():
        if not isinstance(value, SnapshotAssertion):
            continue
        for result in value.executions.values():
            if not (result.created or result.updated):
                continue
            where = f"{_relative(result.snapshot_location, item)} [{result.snapshot_name}]"
            if result.created:
                lines.append(f"{where}: created")
            else:
                lines.append(f"{where}: {_first_change(result.recalled_data, result.asserted_data)}")
    return lines


def _relative(location: str, item: pytest.Item) -> str:
    path = Path(location)
    return str(path.relative_to(item.config.rootpath)
               if path.is_relative_to(item.config.rootpath) else path)


def _first_change(old: object, new: object) -> str:
    """``old line -> new line`` at the first changed line of a snapshot (and how many changed)."""
    a, b = str(old).splitlines(), str(new).splitlines()
    ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if not ops:
        return "changed"
    _, i1, i2, j1, j2 = ops[0]
    first = (f"{a[i1].strip() if i1 < i2 else '(absent)'} -> "
             f"{b[j1].strip() if j1 < j2 else '(absent)'}")
    more = sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in ops) - 1
    return first + (f" (and {more} more changed lines)" if more > 0 else "")
