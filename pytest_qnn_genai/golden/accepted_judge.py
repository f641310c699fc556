"""Today's figures held to the last accepted measurement (:mod:`pytest_qnn_genai.golden.accepted`).

Contract: :func:`compare` gives one report row per measured figure: ``pass`` where the value is
the accepted one at its printed resolution, ``fail`` otherwise, worse or better, and ``fail`` with
the rule ``no-record`` where the record has no accepted value (:mod:`.no_record`: a hole is never
a pass). The hazard it guards: a better value that passed would leave the record stale, and a
later return to the old value would pass unseen, so an improvement fails too until the record
is rewritten (``--qnn-update-golden``). Every failure line names old, new, the record and the
commit and command that measured the accepted value.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pytest_qnn_genai import figures
from pytest_qnn_genai.golden import no_record
from pytest_qnn_genai.golden.accepted import AcceptedRecord, Measured, Value, value_of
from pytest_qnn_genai.sequences import first_difference

_EPS = 1e-12


@dataclass(frozen=True)
class Comparison:
    """One figure held against its accepted value: the report's row and, when it differs, the
    failure line naming old and new."""

    figure: figures.Figure
    problem: str | None = None


def _named(m: Measured) -> str:
    """``qdq_sqnr_db (QDQ vs fp32 logits SQNR dB)``: the figure's name, then its words."""
    return f"{m.name} ({m.label})" if m.label and m.label != m.name else m.name


def _number_change(m: Measured, old: float, new: float) -> tuple[str, str]:
    """(``-1 (-4.35 %)``, ``worse``/``better``/``changed``)."""
    delta = new - old
    share = f" ({100 * delta / old:+.2f} %)" if old else ""
    up = delta > 0
    word = ("changed" if m.better is None
            else "better" if up == (m.better == figures.HIGHER) else "worse")
    exact = float(delta).is_integer() and abs(delta) >= 1  # a count: every digit, not 1.2e+07
    return (f"{int(delta):+d}" if exact else f"{delta:+.6g}") + share, word


def _tokens_change(old: tuple[int, ...], new: tuple[int, ...]) -> str:
    at = first_difference(old, new)
    if at < min(len(old), len(new)):
        return (f"token {at} is {new[at]}, accepted {old[at]} (accepted "
                f"{list(old[at:at + 6])}, now {list(new[at:at + 6])})")
    return f"{len(new)} tokens, accepted {len(old)}"


def compare(record: AcceptedRecord, key: str, measured: Sequence[Measured],
            source: str, run_command: str) -> list[Comparison]:
    """Each of ``measured`` held to ``key``'s accepted value in ``record`` (``source``: the
    record's file, for the messages). A figure with no accepted value fails as no record, with
    the command that records it (``run_command`` with the update flag); a changed value fails,
    worse or better."""
    out = []
    for m in measured:
        new = value_of(m.value)
        name, label = f"{m.name}_vs_accepted", f"{m.label or m.name} vs accepted"
        accepted = record.figure(key, m.name)
        if accepted is None:
            out.append(Comparison(
                figures.no_record(name, scalar(new), f"an accepted value in {source} [{key}]",
                                  better=m.better, label=label),
                no_record.line(source, f"{_named(m)} for {key}",
                               no_record.by_update(run_command))))
            continue
        old, prov = accepted.value, accepted.provenance
        judge = (f"= accepted {scalar(old)} at its printed resolution ({source} [{key}], "
                 f"{prov.short})")
        context: dict[str, figures.Scalar] = {"commit": prov.commit, "command": prov.command}
        problem, word = None, "changed"
        if isinstance(old, tuple) or isinstance(new, tuple):
            same = old == new
            if not same:
                change = (_tokens_change(old, new) if isinstance(old, tuple)
                          and isinstance(new, tuple) else f"{scalar(new)}, accepted {scalar(old)}")
                problem = f"{_named(m)}: {change}: changed"
            bound = None
        else:
            same = abs(new - old) <= _EPS * max(1.0, abs(old))
            if not same:
                delta, word = _number_change(m, float(old), float(new))
                problem = f"{_named(m)} = {new!r}, accepted {old!r}: {delta}, {word}"
            bound = float(old)
        if problem is not None:
            fix = " (accept it with --qnn-update-golden)" if word == "better" else ""
            problem += (f"{fix}; judged against {source} [{key}], measured at {prov.short} by "
                        f"`{prov.command}`")
        out.append(Comparison(figures.Figure(
            name, scalar(new), figures.PASS if same else figures.FAIL, judge, figures.EQUAL,
            bound, m.better, scalar(old), label, context), problem))
    return out


def same_program(record: AcceptedRecord, key: str, digest: str, source: str) -> Comparison:
    """Whether today's program is the accepted one (``info``: a new program is what a change
    of the build makes; its speed is judged against the accepted one's in the nightly)."""
    accepted = record.programs.get(key)
    value = ("no accepted program" if accepted is None
             else "the accepted program" if accepted.program.digest == digest
             else f"another program than the accepted {accepted.provenance.short}'s")
    return Comparison(figures.info("program_vs_accepted", value,
                                   context={"digest": digest, "record": f"{source} [{key}]"}))


def scalar(value: Value) -> figures.Scalar:
    """A figure's value for the report: a number, or a greedy path as ``48 tokens``."""
    return f"{len(value)} tokens" if isinstance(value, tuple) else value


class Row(Protocol):
    """A judged row (:class:`~pytest_qnn_genai.checks.parity.Check`): its figure's name, value,
    better direction and words."""

    @property
    def name(self) -> str: ...
    @property
    def new(self) -> object: ...
    @property
    def better(self) -> str | None: ...
    @property
    def check(self) -> str: ...


def measured_of(rows: Iterable[Row]) -> list[Measured]:
    """:class:`Measured` of the judged rows whose value is a number (what a record can hold)."""
    return [Measured(r.name, r.new, r.better, r.check) for r in rows
            if r.name and isinstance(r.new, (int, float)) and not isinstance(r.new, bool)]
