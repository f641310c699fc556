"""The last accepted measurement: each accuracy figure of a case × SoC × target as it was accepted.

``golden/accepted/<case>.json`` holds, per target key (:func:`key_for`: ``SM8650-htp-emulator``,
``SM8650-htp-x86-runner``, ``SM8650-htp-phone``), the figures the gate measured and someone
accepted, each with the commit and the command that measured it::

    {"case": "qwen3_toy",
     "targets": {"SM8650-htp-emulator": {"figures": {
         "qdq_sqnr_db": {"value": 23.011, "commit": "<commit>", "command": "pytest suites/gate …"},
         "qdq_greedy_tokens": {"value": [44, 363, …], "commit": …, "command": …}},
       "program": {"stage": "compile", "key": "…", "digest": "…", "sha256": "…", "commit": …,
                   "command": …}}}}

``program`` names the cache entry of the build the figures were measured on, so a later run can
pair today's build against it for speed (:mod:`pytest_qnn_genai.perf.accepted`).

One record per case serves every x86-64 machine: every build and reference computes on one
numeric path (:mod:`pytest_qnn_genai.isa`), on which the figures follow the path, not the CPU.
A case, target key or figure the record lacks is never judged on the floors alone: it fails
(:mod:`pytest_qnn_genai.golden.no_record`).

A figure is a number or a list of token ids (a greedy path). The next run is judged against it
(:mod:`pytest_qnn_genai.golden.accepted_judge`) at
the measurement's resolution, which is the figure's printed value: measured on the x86 emulator,
the same build run twice and a cold rebuild of the same cache key give bit-identical logits (so
bit-identical figures), so any change of the printed value is a change of the build. A worse value
fails naming old and new; a better one fails too, saying so: an improvement is accepted only by
rewriting the record (``--qnn-update-golden``), or the record goes stale and a later return to the
old value would pass unseen. The case's spec floors (:mod:`pytest_qnn_genai.models.spec`) stay the
outer wall; this is the inner one.

:func:`update` is the one way a record is written (a locked read-modify-write, so tests on several
xdist workers each adding their figures to one file do not lose each other's); it goes through
:func:`pytest_qnn_genai.golden.updates.write`, which refuses without the update flag. A run that
updates must not judge: the caller writes or judges, never both. Loading is strict: a damaged
file is one :class:`AcceptedRecordError` line naming the file and the field.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.golden import updates
from pytest_qnn_genai.targets import BACKENDS, SOCS

if TYPE_CHECKING:
    from pytest_qnn_genai.targets import Target

SUBDIR = "accepted"
KINDS = ("emulator", "x86-runner", "phone")  # the last part of a target key
Value = float | int | tuple[int, ...]  # a figure, or a greedy path's token ids


class AcceptedRecordError(ValueError):
    """An accepted record is unreadable or malformed (one line naming the file and the field)."""


@dataclass(frozen=True)
class Provenance:
    """Where a figure was measured: the harness commit (``+dirty`` for a changed tree) and the
    command line."""

    commit: str
    command: str

    @property
    def short(self) -> str:
        """The commit as a reader quotes it (a git sha's first 10 digits)."""
        sha, dirty = self.commit.removesuffix("+dirty"), self.commit.endswith("+dirty")
        if len(sha) >= 10 and all(c in "0123456789abcdef" for c in sha):
            sha = sha[:10]
        return sha + ("+dirty" if dirty else "")


@dataclass(frozen=True)
class Accepted:
    """One accepted figure."""

    value: Value
    provenance: Provenance


@dataclass(frozen=True)
class Measured:
    """One figure of this run to hold against the record (``better``: ``higher``/``lower``/None)."""

    name: str
    value: Value
    better: str | None = None
    label: str = ""


@dataclass(frozen=True)
class Program:
    """The accepted build's program: its cache entry (``stage``/``key``, found in the local or
    the remote cache), the digest of that entry's files, which the entry found must have, and the
    sha256 of its ``.pte`` without the build stamps
    (:func:`pytest_qnn_genai.sdk.context_binary.program_sha256`): a rebuild of the same program
    on any machine has that sha256 ("" in a record written before it was kept)."""

    stage: str
    key: str
    digest: str
    sha256: str = ""


@dataclass(frozen=True)
class AcceptedProgram:
    """The program accepted with a target's figures, and where it was built."""

    program: Program
    provenance: Provenance


@dataclass(frozen=True)
class AcceptedRecord:
    """A case's accepted figures by target key, then by figure name; and per target key the
    program they were measured on."""

    case: str
    targets: dict[str, dict[str, Accepted]] = field(default_factory=dict)
    programs: dict[str, AcceptedProgram] = field(default_factory=dict)

    def figure(self, key: str, name: str) -> Accepted | None:
        return self.targets.get(key, {}).get(name)

    def with_figures(self, key: str, measured: Iterable[Measured], provenance: Provenance,
                     program: Program | None = None) -> AcceptedRecord:
        """A copy with ``measured`` (and ``program``) accepted for ``key`` (the key's other
        figures kept)."""
        entry = dict(self.targets.get(key, {}))
        entry.update({m.name: Accepted(value_of(m.value), provenance) for m in measured})
        programs = dict(self.programs)
        if program is not None:
            programs[key] = AcceptedProgram(program, provenance)
        return AcceptedRecord(self.case, {**self.targets, key: entry}, programs)

    def to_json(self) -> str:
        """The file's text: keys sorted, one line per figure (a change is a one-line diff)."""
        blocks = []
        for key in sorted(set(self.targets) | set(self.programs)):
            lines = [f"        {json.dumps(name)}: " + json.dumps(
                {"value": list(a.value) if isinstance(a.value, tuple) else a.value,
                 "commit": a.provenance.commit, "command": a.provenance.command},
                ensure_ascii=False) for name, a in sorted(self.targets.get(key, {}).items())]
            block = (f"    {json.dumps(key)}: {{\n      \"figures\": {{\n"
                     + ",\n".join(lines) + "\n      }")
            if key in self.programs:
                p = self.programs[key]
                sha = {"sha256": p.program.sha256} if p.program.sha256 else {}
                block += ",\n      \"program\": " + json.dumps(
                    {"stage": p.program.stage, "key": p.program.key, "digest": p.program.digest,
                     **sha, "commit": p.provenance.commit, "command": p.provenance.command},
                    ensure_ascii=False)
            blocks.append(block + "\n    }")
        body = "{\n" + ",\n".join(blocks) + "\n  }" if blocks else "{}"
        return f"{{\n  \"case\": {json.dumps(self.case)},\n  \"targets\": {body}\n}}\n"


def key_for(target: Target, build_target: Target) -> str:
    """``SOC-backend-kind``: ``emulator`` (the host runner in this process), ``x86-runner``
    (upstream's runners on the x86 simulator, which is also what a phone that runs the
    simulator with the emulator's builds is, e.g. the loopback phone: its figures are the x86
    runner's) or ``phone``. A phone's serial never reaches a key: any phone of the SoC finds the
    SoC's record."""
    if target.is_emulator:
        kind = "emulator"
    elif target.is_x86_runner or build_target.is_emulator:
        kind = "x86-runner"
    else:
        kind = "phone"
    return f"{target.soc.name}-{target.backend}-{kind}"


def path_for(golden_dir: Path, case_name: str) -> Path:
    """Where ``case_name``'s accepted record lives."""
    return golden_dir / SUBDIR / f"{case_name}.json"


def value_of(value: Value | list[int]) -> Value:
    """A figure's value as a record holds it (a greedy path as a tuple of token ids)."""
    return tuple(value) if isinstance(value, list) else value


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _parse_value(raw: object, where: str) -> Value:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, list)):
        raise AcceptedRecordError(f"{where} must be a number or a list of token ids, got "
                                  f"{_show(raw)}")
    if isinstance(raw, list):
        if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in raw):
            raise AcceptedRecordError(f"{where} must hold non-negative integers, got "
                                      f"{_show(raw)}")
        return tuple(raw)
    if not math.isfinite(raw):
        raise AcceptedRecordError(f"{where} must be finite, got {_show(raw)}")
    return raw


def _text(raw: object, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise AcceptedRecordError(f"{where} must be a non-empty string, got {_show(raw)}")
    return raw


def _object(raw: object, source: str, at: str, keys: Sequence[str] | None = None,
            optional: Sequence[str] = ()) -> dict[str, object]:
    """``raw`` as an object with exactly ``keys`` and maybe ``optional`` ones (any keys when
    ``keys`` is None); ``at``: its field path ("" for the file's top level)."""
    if not isinstance(raw, dict):
        raise AcceptedRecordError(f"{source}: {at or 'the top level'} must be an object, got "
                                  f"{_show(raw)}")
    prefix = f"{at}." if at else ""
    if keys is not None:
        for k in raw:
            if k not in keys and k not in optional:
                raise AcceptedRecordError(f"{source}: {prefix}{k} is not a field (the fields: "
                                          f"{', '.join([*keys, *optional])})")
        for k in keys:
            if k not in raw:
                raise AcceptedRecordError(f"{source}: {prefix}{k} is missing")
    return raw


def _check_key(key: str, where: str) -> None:
    soc, _, rest = key.partition("-")
    backend, _, kind = rest.partition("-")
    if soc not in SOCS or backend not in BACKENDS or kind not in KINDS:
        raise AcceptedRecordError(f"{where} is no target key: SOC-backend-kind, the kinds "
                                  f"{', '.join(KINDS)} (e.g. SM8650-htp-emulator)")


def parse(data: object, source: str, case_name: str | None = None) -> AcceptedRecord:
    """A decoded record, validated; a problem raises :class:`AcceptedRecordError`
    ``source: field ...``."""
    def where(path: str) -> str:
        return f"{source}: {path}"

    top = _object(data, source, "", ("case", "targets"))
    case = _text(top["case"], where("case"))
    if case_name is not None and case != case_name:
        raise AcceptedRecordError(f"{where('case')} is {case!r} but the file is named for "
                                  f"{case_name!r}")
    out: dict[str, dict[str, Accepted]] = {}
    programs: dict[str, AcceptedProgram] = {}
    for key, body in _object(top["targets"], source, "targets").items():
        _check_key(key, where(f"targets.{key}"))
        entry = _object(body, source, f"targets.{key}", ("figures",), ("program",))
        if "program" in entry:
            at = f"targets.{key}.program"
            raw = _object(entry["program"], source, at,
                          ("stage", "key", "digest", "commit", "command"), ("sha256",))
            text = {k: _text(raw[k], where(f"{at}.{k}")) for k in raw}
            programs[key] = AcceptedProgram(
                Program(text["stage"], text["key"], text["digest"], text.get("sha256", "")),
                Provenance(text["commit"], text["command"]))
        figs: dict[str, Accepted] = {}
        for name, raw_figure in _object(entry["figures"], source,
                                        f"targets.{key}.figures").items():
            at = f"targets.{key}.figures.{name}"
            item = _object(raw_figure, source, at, ("value", "commit", "command"))
            figs[name] = Accepted(_parse_value(item["value"], where(f"{at}.value")),
                                  Provenance(_text(item["commit"], where(f"{at}.commit")),
                                             _text(item["command"], where(f"{at}.command"))))
        out[key] = figs
    return AcceptedRecord(case, out, programs)


def load(path: Path, case_name: str) -> AcceptedRecord:
    """``path``'s record (an absent file: an empty one, nothing accepted yet)."""
    if not path.exists():
        return AcceptedRecord(case_name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise AcceptedRecordError(f"{path}: cannot read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise AcceptedRecordError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column "
                                  f"{e.colno})") from None
    return parse(data, str(path), case_name)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` itself (``flock`` of the directory: no lock file is
    left in the golden folder or anywhere else) for a record's read-modify-write."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def update(path: Path, case_name: str, key: str, measured: Sequence[Measured],
           provenance: Provenance, *, allow_write: bool, program: Program | None = None) -> str:
    """Accept ``measured`` (and ``program``) as ``key``'s in ``path`` (the key's other figures
    and the other keys kept) and return the diff ("" when unchanged). The one writer of accepted
    records, through :func:`~pytest_qnn_genai.golden.updates.write` (the run reports the test
    *updated*): :class:`~pytest_qnn_genai.golden.updates.GoldenWriteRefused` unless
    ``allow_write``."""
    if not allow_write:
        raise updates.GoldenWriteRefused(f"{path}: accepted records change only with "
                                         "--qnn-update-golden")
    with _locked(path.parent):
        record = load(path, case_name).with_figures(key, measured, provenance, program)
        text = record.to_json()
        parse(json.loads(text), str(path), case_name)  # what is written always loads
        return updates.write(path, text, allow_write=True).diff
