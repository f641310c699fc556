"""``results.json``: every suite's judged figures of one run, with the run's header.

A :class:`Record` is one test's outcome for one model case x target: its
:class:`~pytest_qnn_genai.figures.Figure` rows, each with the verdict and the judge of the check
that judged it (never the test's outcome copied onto every figure), plus unjudged context
(``values``: rounds, work). The header carries the run's fingerprint
(:mod:`pytest_qnn_genai.report.fingerprint`). A record refuses a phone floor on an emulator figure.

Layout of a report folder (``make nightly`` writes one folder per night)::

    reports/<YYYY-MM-DD>/results.json  summary.md  summary.html  speed.png  trend.png
    reports/<the next day>/results.json  ...

The trend of a run reads its siblings' ``results.json`` (:func:`load_history`), ordered by the
date in each file's header rather than by folder name. Schema-1 files (before judged figures)
load with every number as an ``info`` figure: their verdicts were the test's outcome.
"""
from __future__ import annotations

import json
import math
import subprocess
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict, cast

from pytest_qnn_genai import figures as judged
from pytest_qnn_genai.figures import Figure, FigureDict
from pytest_qnn_genai.files import write_text_atomic
from pytest_qnn_genai.report.diff import FigureKey, higher_is_better
from pytest_qnn_genai.targets import EMULATOR, Target
from pytest_qnn_genai.untyped import Json

SCHEMA = 2
RESULTS_NAME = "results.json"
KINDS = ("gate", "parity", "smoke", "perf")  # the suite a record comes from


class ResultsFileError(ValueError):
    """A ``results.json`` is unreadable or not in the expected form (one line naming the file)."""


class ResultsHistoryWarning(UserWarning):
    """An earlier ``results.json`` was skipped because it is damaged."""


def git_sha(cwd: Path | str | None = None) -> str | None:
    """The checked-out commit of the git work tree at ``cwd``, or None when unavailable."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else None


@dataclass(frozen=True)
class Header:
    """Facts about the run: when, where and with which tool versions."""

    date: str  # ISO 8601 with time zone
    socs: list[str]
    backend: str
    devices: list[str]
    versions: dict[str, str]  # torch, executorch, qairt, pytest-qnn-genai (see versions.stack)
    git_sha: str | None = None
    fingerprint: dict[str, Json] = field(default_factory=dict)  # report.fingerprint.collect()

    def __post_init__(self) -> None:
        if datetime.fromisoformat(self.date).tzinfo is None:
            raise ValueError(f"header date {self.date!r} has no time zone")

    @classmethod
    def collect(cls, socs: Sequence[str], backend: str, devices: Sequence[str],
                versions: Mapping[str, str], repo: Path | str | None = None) -> Header:
        """A header stamped with the current UTC time and the git commit of ``repo``."""
        now = datetime.now(UTC).replace(microsecond=0).isoformat()
        return cls(now, list(socs), backend, list(devices), dict(versions), git_sha(repo))

    @property
    def when(self) -> datetime:
        return datetime.fromisoformat(self.date)


class EmulatorFloorError(ValueError):
    """An emulator record carries a figure judged by a phone floor."""


class RecordDict(TypedDict):
    """A :class:`Record` in a results file (schema 2) and in a worker's payload."""

    kind: str
    model: str
    target: str
    soc: str
    backend: str
    device: str
    figures: list[FigureDict]
    values: dict[str, object]
    test: str
    note: str


@dataclass(frozen=True)
class Record:
    """One test's judged figures for one model case x target, and unjudged ``values``."""

    kind: str  # the suite: "gate" | "parity" | "smoke" | "perf"
    model: str
    target: str  # Target.id, e.g. "SM8650-htp-emulator"
    soc: str
    backend: str
    device: str
    figures: list[Figure] = field(default_factory=list)
    values: dict[str, object] = field(default_factory=dict)  # JSON-serializable
    test: str = ""  # pytest node id
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"record kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.is_emulator:
            floored = [f.name for f in self.figures if f.rule == judged.PHONE_FLOOR]
            if floored:
                raise EmulatorFloorError(
                    f"{self.model} {self.target}: {', '.join(floored)} judged by a phone floor, "
                    "but the x86 emulator's speed says nothing about a phone")

    @classmethod
    def for_target(cls, kind: str, model: str, target: Target, figures: Sequence[Figure],
                   values: Mapping[str, object] | None = None, test: str = "",
                   note: str = "") -> Record:
        """A record for a :class:`~pytest_qnn_genai.targets.Target`."""
        return cls(kind, model, target.id, target.soc.name, target.backend, target.device,
                   list(figures), dict(values or {}), test, note)

    @property
    def is_emulator(self) -> bool:
        return self.device == EMULATOR

    @property
    def verdict(self) -> str:
        """``fail`` if a figure failed (or could not tell), else ``updated`` if an update run
        wrote one (it judged nothing), else ``pass`` if one passed, else ``info``: the record's
        outcome comes from its figures, never the other way round."""
        verdicts = {f.verdict for f in self.figures}
        if verdicts & set(judged.FAILING):
            return judged.FAIL
        if judged.UPDATED in verdicts:
            return judged.UPDATED
        return judged.PASS if judged.PASS in verdicts else judged.INFO

    def to_dict(self) -> RecordDict:
        out = asdict(self)
        out["figures"] = [f.to_dict() for f in self.figures]
        return cast("RecordDict", out)  # its fields, by name

    @classmethod
    def from_dict(cls, data: RecordDict) -> Record:
        # read from a results file: the constructor refuses a missing or an unknown field
        fields: dict[str, Json] = {**data, "figures": [Figure.from_dict(f)
                                                       for f in data.get("figures", [])]}
        return cls(**fields)

    @classmethod
    def from_schema_1(cls, data: Mapping[str, Json]) -> Record:
        """A schema-1 record: its numbers become ``info`` figures (its verdict was the test's
        outcome copied onto every figure, so it is dropped); ``numerics`` maps to its suite."""
        kind = data["kind"]
        if kind == "numerics":
            kind = "perf" if "/perf/" in data.get("test", "") else "gate"
        numbers = {k: v for k, v in data.get("values", {}).items() if rate_or_time(k, v)}
        rest = {k: v for k, v in data.get("values", {}).items() if k not in numbers}
        return cls(kind, data["model"], data["target"], data["soc"], data["backend"],
                   data["device"], [judged.info(k, v) for k, v in numbers.items()], rest,
                   data.get("test", ""), data.get("note", ""))


def rate_or_time(name: str, value: object) -> bool:
    """Whether a record value is a perf figure that runs can be compared on."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    try:
        higher_is_better(name)
    except ValueError:
        return False
    return True


class ResultsFile:
    """The records of one run and its header; ``write`` / ``load`` round-trip ``results.json``."""

    def __init__(self, header: Header, records: Sequence[Record] = ()) -> None:
        self.header = header
        self.records: list[Record] = list(records)

    def add(self, record: Record) -> None:
        """Append one record."""
        self.records.append(record)

    def of_kind(self, kind: str) -> list[Record]:
        """The records of one kind, in the order added."""
        return [r for r in self.records if r.kind == kind]

    def figures(self) -> list[tuple[Record, Figure]]:
        """Every figure with its record, in the order added."""
        return [(r, f) for r in self.records for f in r.figures]

    def counts(self) -> dict[str, int]:
        """How many figures have each verdict."""
        return judged.counts(f for _, f in self.figures())

    def perf_figures(self, kinds: Sequence[str] = ("perf",)) -> dict[FigureKey, float]:
        """Speed figures (rates, durations) of ``kinds`` records keyed by ``(model, target,
        figure)`` (a later record of a key wins)."""
        return {(r.model, r.target, f.name): n for r, f in self.figures()
                if r.kind in kinds and (n := f.number) is not None and rate_or_time(f.name, n)}

    def to_dict(self) -> dict[str, object]:
        return {"schema": SCHEMA, "header": asdict(self.header),
                "records": [r.to_dict() for r in self.records]}

    @classmethod
    def from_dict(cls, data: Json, source: str = "results") -> ResultsFile:
        """Rebuild from :meth:`to_dict` output (or a schema-1 file); bad input raises
        :class:`ResultsFileError`."""
        schema = data.get("schema") if isinstance(data, dict) else None
        if schema not in (1, SCHEMA):
            got = schema if isinstance(data, dict) else type(data).__name__
            raise ResultsFileError(f"{source}: not a schema-{SCHEMA} results file (schema {got!r})")
        try:
            header = Header(**data["header"])
            load = Record.from_dict if schema == SCHEMA else Record.from_schema_1
            records = [load(r) for r in data["records"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ResultsFileError(f"{source}: malformed results file ({e})") from None
        return cls(header, records)

    def write(self, path: Path | str) -> Path:
        """Write ``results.json`` atomically; returns its path."""
        path = Path(path)
        write_text_atomic(path, json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n")
        return path

    @classmethod
    def load(cls, path: Path | str) -> ResultsFile:
        """Read a ``results.json``; a bad file raises :class:`ResultsFileError`."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise ResultsFileError(f"{path}: cannot read ({e.strerror or e})") from None
        except json.JSONDecodeError as e:
            raise ResultsFileError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None
        return cls.from_dict(data, str(path))


def run_dir(root: Path | str, header: Header) -> Path:
    """The report folder of a run: ``root/<YYYY-MM-DD>`` from the header's date."""
    return Path(root) / header.when.date().isoformat()


def load_history(root: Path | str, exclude: Path | str | None = None) -> list[ResultsFile]:
    """Every ``root/*/results.json`` except ``exclude``, oldest first; damaged ones are skipped
    with a :class:`ResultsHistoryWarning`."""
    skip = Path(exclude).resolve() if exclude is not None else None
    found = []
    for p in sorted(Path(root).glob(f"*/{RESULTS_NAME}")):
        if skip is not None and p.resolve() == skip:
            continue
        try:
            found.append(ResultsFile.load(p))
        except ResultsFileError as e:
            warnings.warn(ResultsHistoryWarning(f"skipping earlier results: {e}"), stacklevel=2)
    return sorted(found, key=lambda r: r.header.when)


def latest_before(history: Sequence[ResultsFile], run: ResultsFile) -> ResultsFile | None:
    """The newest file in ``history`` dated before ``run`` (the baseline for deltas)."""
    earlier = [h for h in history if h.header.when < run.header.when]
    return max(earlier, key=lambda h: h.header.when) if earlier else None
