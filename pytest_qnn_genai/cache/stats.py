"""What the artifact cache did in one process, mergeable across xdist workers, and its summary.

:class:`CacheStats` travels as a plain dict (:meth:`CacheStats.to_dict`) from each xdist worker to
the controller, which merges them (:meth:`CacheStats.merge`; fields a worker of an older version
did not send count as zero) and prints :meth:`CacheStats.summary` in the terminal summary.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TypedDict


class UsedEntry(TypedDict):
    """One cache entry handed out, as a run report's fingerprint lists it."""

    stage: str
    label: str
    key: str
    digest: str
    upstream: list[str]
    inputs: Mapping[str, object]  # the key inputs


@dataclass
class CacheStats:
    """What the cache did in this process."""

    hits: int = 0
    builds: int = 0
    rebuilt_damaged: int = 0
    build_s: float = 0.0
    bytes_built: int = 0
    built_keys: list[str] = field(default_factory=list)
    evicted: int = 0
    bytes_evicted: int = 0
    leftovers_removed: int = 0
    failures_remembered: int = 0  # builds that raised a RememberedFailure (stored as such)
    failures_recalled: int = 0  # lookups answered by a remembered failure, no build run
    downloaded: int = 0  # entries fetched from the remote cache, verified
    bytes_downloaded: int = 0
    uploaded: int = 0  # entries built here and stored in the remote cache
    bytes_uploaded: int = 0
    rejected: int = 0  # remote entries found damaged: not used, built here
    # every entry handed out, "stage/key" -> its stage, label, key, digest, upstream and key
    # inputs (what a run report's fingerprint lists)
    used: dict[str, UsedEntry] = field(default_factory=dict)

    def merge(self, other: Mapping[str, object]) -> None:
        """Add another process's stats (as produced by :meth:`to_dict`)."""
        for f in fields(self):
            value = other.get(f.name)
            if isinstance(value, dict):
                getattr(self, f.name).update(value)
            elif value is not None:
                setattr(self, f.name, getattr(self, f.name) + value)

    def to_dict(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**out, "used": dict(self.used)}

    @property
    def active(self) -> bool:
        """True when the cache was used at all (the summary is worth printing)."""
        return bool(self.hits or self.builds or self.downloaded or self.failures_recalled)

    def summary(self, where: str, remote: str | None = None) -> str:
        """One line: hits, builds and what they cost in the cache at ``where``; build failures
        remembered or recalled, if any; the traffic with the ``remote`` cache, if one is set."""
        line = (f"{self.hits} hits, {self.builds} builds ({self.build_s:.1f}s building, "
                f"{self.bytes_built / 1e6:.2f} MB written, {self.rebuilt_damaged} damaged "
                f"entries rebuilt, {self.evicted} evicted) in {where}")
        if self.failures_remembered or self.failures_recalled:
            line += (f"; build failures: {self.failures_remembered} remembered, "
                     f"{self.failures_recalled} recalled without building")
        if remote:
            line += (f"; remote {remote}: {self.downloaded} downloaded "
                     f"({self.bytes_downloaded / 1e6:.2f} MB), {self.uploaded} uploaded "
                     f"({self.bytes_uploaded / 1e6:.2f} MB), {self.rejected} rejected as damaged")
        return line
