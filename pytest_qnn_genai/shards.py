"""Shards of one run (``--qnn-shard K/N``): which share of the work shard K of N takes.

The unit of the split is a **build group**: one model case on one SoC and backend, with every
target of it (the x86 emulator in this process, upstream's x86 runners, phones of that SoC). Its
expensive builds (quantize, compile, llama.py's legacy build, the QNN context binaries, the smoke
block of a SoC) are keyed by case, SoC and backend, never by the device, so keeping a group on
one shard means a shard never builds what another shard builds. What several groups share is
built by every shard that needs it (or fetched from ``--qnn-remote-cache``): the emulator SDK,
upstream's x86 runners, and a case's fp32/transformers references and runner config (seconds
each; the minutes go to the per-group builds).

:func:`assign` is deterministic and independent of collection order: groups are dealt from the
heaviest (most tests that will run) to the lightest, ties broken by a stable hash of the group
(sha256 of its name, never Python's salted ``hash``), each to the shard with the least work so
far (the lowest index on a tie). Every shard of one run computes the same assignment as long as
each is run with the same options on the same code, which the merge checks (their fingerprints'
settings and the collection totals each shard records in :class:`Selection`).

Plain data in, plain data out: nothing here knows pytest (``plugin/shard.py`` maps items to
groups).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from pytest_qnn_genai.untyped import Json

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


class ShardError(ValueError):
    """A malformed ``K/N`` or shard record (one line)."""


@dataclass(frozen=True, order=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ShardError(f"shard {self.index}/{self.count}: K must be 1..N")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"K/N"`` with ``1 <= K <= N``; anything else is a :class:`ShardError`."""
        match = _SHARD.fullmatch(text)
        if match is None:
            raise ShardError(f"expected K/N (shard K of N, e.g. 1/4), got {text!r}")
        index, count = int(match.group(1)), int(match.group(2))
        if not 1 <= index <= count:
            raise ShardError(f"expected K/N with 1 <= K <= N, got {text!r}")
        return cls(index, count)


@dataclass(frozen=True, order=True)
class BuildGroup:
    """A model case on one SoC and backend (``case`` empty: the case-less smoke block of a
    SoC; ``soc``/``backend`` empty: a case's target-free tests)."""

    case: str
    soc: str
    backend: str

    def __str__(self) -> str:
        where = f"{self.soc}-{self.backend}" if self.soc else "(no target)"
        return f"{self.case or '(no model case)'} {where}"

    @property
    def stable_hash(self) -> int:
        """The same on every machine and in every process (not Python's salted ``hash``)."""
        data = "\0".join((self.case, self.soc, self.backend)).encode()
        return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def assign(weights: Mapping[BuildGroup, int], count: int) -> dict[BuildGroup, int]:
    """The shard (1-based) of every group: heaviest first, to the least loaded shard (module
    docstring). ``weights``: the tests of each group that will run (0 counts as 1: a group of
    skipped tests still lands on one shard)."""
    if count < 1:
        raise ShardError(f"a run has at least one shard, got {count}")
    order = sorted(weights, key=lambda g: (-max(weights[g], 1), g.stable_hash, g))
    load = [0] * count
    out: dict[BuildGroup, int] = {}
    for group in order:
        k = min(range(count), key=lambda i: (load[i], i))
        load[k] += max(weights[group], 1)
        out[group] = k + 1
    return out


class SelectionDict(TypedDict):
    """A :class:`Selection` in a shard's results fingerprint."""

    shard: str
    combinations: list[str]
    total_combinations: int
    tests: int
    total_tests: int
    groups: list[str]
    unsplit: int
    collected: str


@dataclass(frozen=True)
class Selection:
    """What one shard took: its combinations (model case × target) of the run's, its tests of
    the run's, and its build groups. Kept in the shard's results fingerprint for the merge."""

    shard: Shard
    combinations: tuple[str, ...]  # "stories260k × SM8650-htp-emulator", sorted
    total_combinations: int
    tests: int
    total_tests: int
    groups: tuple[str, ...]  # str(BuildGroup), sorted
    unsplit: int = 0  # tests without a combination (run by shard 1 only), of the run's
    collected: str = ""  # digest of every collected test id: shards of one run agree on it

    def line(self) -> str:
        """What the terminal says."""
        here = f"; builds here: {', '.join(self.groups)}" if self.groups else ""
        return (f"shard {self.shard}: {len(self.combinations)} of {self.total_combinations} "
                f"combinations (model case × target), {self.tests} of {self.total_tests} tests"
                f"{here}")

    def to_dict(self) -> SelectionDict:
        return {"shard": str(self.shard), "combinations": list(self.combinations),
                "total_combinations": self.total_combinations, "tests": self.tests,
                "total_tests": self.total_tests, "groups": list(self.groups),
                "unsplit": self.unsplit, "collected": self.collected}

    @classmethod
    def from_dict(cls, data: Json) -> Selection:
        """From :meth:`to_dict` output; anything else is a :class:`ShardError`."""
        try:
            return cls(Shard.parse(data["shard"]), tuple(str(c) for c in data["combinations"]),
                       int(data["total_combinations"]), int(data["tests"]),
                       int(data["total_tests"]), tuple(str(g) for g in data["groups"]),
                       int(data.get("unsplit", 0)), str(data.get("collected", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ShardError(f"not a shard record ({type(e).__name__}: {e})") from None


def combination(case: str | None, target: str | None) -> str:
    """The name of one model case × target combination (``-`` for a missing side)."""
    return f"{case or '-'} × {target or '-'}"


def collection_digest(test_ids: Iterable[str]) -> str:
    """A digest of a run's collected test ids, whatever their order."""
    return hashlib.sha256("\n".join(sorted(test_ids)).encode()).hexdigest()[:16]


def selection(shard: Shard, combos: Iterable[tuple[str, int]], tests: int,
              test_ids: Iterable[str], groups: Iterable[BuildGroup],
              unsplit: int = 0) -> Selection:
    """A :class:`Selection` from (combination, its shard) pairs, this shard's test count, every
    collected test id and this shard's groups."""
    pairs = list(dict.fromkeys(combos))
    ids = list(test_ids)
    return Selection(shard, tuple(sorted(c for c, k in pairs if k == shard.index)),
                     len({c for c, _ in pairs}), tests, len(ids),
                     tuple(sorted(str(g) for g in set(groups))), unsplit, collection_digest(ids))
