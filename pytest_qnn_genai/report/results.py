"""``results.json``: every parity, numerics and perf record of one run, with the run's header.

Layout of a report folder (``make nightly`` writes one folder per night)::

    reports/2026-08-14/results.json   summary.md   perf-vs-golden.png   perf-trend.png
    reports/2026-08-15/results.json   ...

The trend of a run reads its siblings' ``results.json`` (:func:`load_history`), ordered by the
date in each file's header rather than by folder name.
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

from pytest_qnn_genai.files import write_text_atomic
from pytest_qnn_genai.report.diff import FigureKey, higher_is_better
from pytest_qnn_genai.targets import EMULATOR, Target
from pytest_qnn_genai.untyped import Json

SCHEMA = 1
RESULTS_NAME = "results.json"
KINDS = ("parity", "numerics", "perf")


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


@dataclass(frozen=True)
class Record:
    """One check's outcome. ``values`` holds its measures (``sqnr_db``, ``decode_tok_s``, ...)."""

    kind: str  # "parity" | "numerics" | "perf"
    model: str
    target: str  # Target.id, e.g. "SM8650-htp-emulator"
    soc: str
    backend: str
    device: str
    values: dict[str, Json] = field(default_factory=dict)
    verdict: str | None = None  # "pass" | "fail" | "skip"; None = informational
    test: str = ""  # pytest node id
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"record kind must be one of {', '.join(KINDS)}, got {self.kind!r}")

    @classmethod
    def for_target(cls, kind: str, model: str, target: Target, values: Mapping[str, Json],
                   verdict: str | None = None, test: str = "", note: str = "") -> Record:
        """A record for a :class:`~pytest_qnn_genai.targets.Target`."""
        return cls(kind, model, target.id, target.soc.name, target.backend, target.device,
                   dict(values), verdict, test, note)

    @property
    def is_emulator(self) -> bool:
        return self.device == EMULATOR

    def to_dict(self) -> dict[str, Json]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Json]) -> Record:
        return cls(**data)


def rate_or_time(name: str, value: Json) -> bool:
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

    def perf_figures(self) -> dict[FigureKey, float]:
        """Perf figures keyed by ``(model, target, figure)`` (a later record of a key wins)."""
        return {(r.model, r.target, name): float(v) for r in self.of_kind("perf")
                for name, v in r.values.items() if rate_or_time(name, v)}

    def to_dict(self) -> dict[str, Json]:
        return {"schema": SCHEMA, "header": asdict(self.header),
                "records": [r.to_dict() for r in self.records]}

    @classmethod
    def from_dict(cls, data: Json, source: str = "results") -> ResultsFile:
        """Rebuild from :meth:`to_dict` output; bad input raises :class:`ResultsFileError`."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            got = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise ResultsFileError(f"{source}: not a schema-{SCHEMA} results file (schema {got!r})")
        try:
            header = Header(**data["header"])
            records = [Record.from_dict(r) for r in data["records"]]
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
