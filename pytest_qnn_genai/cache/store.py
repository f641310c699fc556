"""A content-addressed artifact cache on disk, safe across processes (pytest-xdist workers).

An entry's key hashes the stage name, its inputs, the digests of the upstream entries it was built
from, and the tool versions. Entries are built in a temporary folder and renamed into place; a
``manifest.json`` records inputs, file digests and sizes, so a corrupted or truncated entry is
detected on load and rebuilt. One lock per key (:mod:`pytest_qnn_genai.cache.lock`) makes exactly
one process build it; the on-disk layout is described in :mod:`pytest_qnn_genai.cache.layout`.

Contract:

- Every change to ``<stage>/<key>`` (build, discard of a damaged entry, rebuild of a stale one,
  eviction) happens under the key's lock, and every check that finds damage is repeated under the
  lock before discarding: of N processes that find the same damaged entry, one rebuilds it and
  the others use the rebuild.
- The first :meth:`ArtifactCache.get_or_build` of a process sweeps leftovers of killed builds
  (:func:`pytest_qnn_genai.cache.housekeeping.sweep`).
- With ``max_bytes``, every build is followed by evicting least-recently-used entries until the
  cache fits; entries used by this process or at or after ``session_start`` are never evicted.

Hazards: a hit re-hashes the entry's files (the price of detecting damage); a reader that finds an
entry whole may use its files for the rest of the session, so ``session_start`` must be the
session's start as seen by every xdist worker, not each worker's own; ``max_bytes`` smaller than
one session's needs is exceeded (one progress line says so) rather than evicting in-use entries.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.cache import housekeeping
from pytest_qnn_genai.cache.failures import RememberedFailure, failure_of, failure_record, known, recalled
from pytest_qnn_genai.cache.housekeeping import EntryInfo, format_bytes
from pytest_qnn_genai.cache.layout import (
    MANIFEST,
    TMP_PREFIX,
    FileRecord,
    Manifest,
    lock_path,
    read_manifest,
    touch,
    trash_path,
)
from pytest_qnn_genai.cache.lock import KeyLock
from pytest_qnn_genai.cache.remote.mirror import RemoteMirror
from pytest_qnn_genai.cache.stats import CacheStats

# cache/'s only imports from the rest of the package
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.progress import Writer, heartbeat, stderr_writer

if TYPE_CHECKING:
    from pytest_qnn_genai.cache.remote.base import RemoteStore

__all__ = ["ArtifactCache", "CacheEntry", "CacheStats", "CacheWarning", "RememberedFailure"]


class CacheWarning(UserWarning):
    """A cache entry was found damaged and is being rebuilt, or the remote cache is unusable."""


def _canonical(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class CacheEntry:
    """A finished entry: its folder and manifest. ``digest`` identifies its content."""

    path: Path
    manifest: Manifest
    hit: bool

    @property
    def key(self) -> str:
        return str(self.manifest["key"])

    @property
    def digest(self) -> str:
        return hashlib.sha256(_canonical(self.manifest["files"]).encode()).hexdigest()

    def file(self, name: str) -> Path:
        """Path of one of the entry's files (must be listed in the manifest)."""
        if name not in self.manifest["files"]:
            raise KeyError(f"{self.path.name}: no file {name!r} in this cache entry")
        return self.path / name


class ArtifactCache:
    """Stage outputs under ``root/<stage>/<key>/``, keyed by content and versions."""

    def __init__(self, root: Path, versions: Mapping[str, str], rebuild_before: float | None = None,
                 progress: Writer = stderr_writer, max_bytes: int | None = None,
                 session_start: float | None = None, remote: RemoteStore | None = None) -> None:
        self.root = root
        self.versions = dict(versions)
        self.rebuild_before = rebuild_before  # entries created before this are ignored (rebuild)
        self.progress = progress
        self.max_bytes = max_bytes  # after a build, evict LRU entries beyond this many bytes
        self.session_start = time.time() if session_start is None else session_start
        self.stats = CacheStats()
        # entries are fetched from ``remote`` before building and uploaded to it after
        self.remote = None if remote is None else RemoteMirror(remote, self.stats, self._warn)
        self._used: set[str] = set()  # "stage/key" of every entry handed out by this object
        self._swept = False
        self._said_over = False

    @staticmethod
    def _warn(message: str) -> None:
        warnings.warn(CacheWarning(message), stacklevel=4)

    def key(self, stage: str, inputs: Mapping[str, object], upstream: Sequence[str] = ()) -> str:
        """The content key of a stage run."""
        material = {"stage": stage, "inputs": inputs, "upstream": list(upstream),
                    "versions": self.versions}
        return hashlib.sha256(_canonical(material).encode()).hexdigest()[:32]

    def _check(self, path: Path) -> Manifest | None:
        """The manifest of a complete, undamaged entry; None if absent; ValueError if damaged.

        Without the key's lock the entry may be renamed away while it is read: that reads as
        damage, which the caller confirms under the lock.
        """
        if not path.exists():
            return None
        manifest = read_manifest(path)
        try:
            for name, meta in manifest["files"].items():
                f = path / name
                if not f.is_file():
                    raise ValueError(f"{name} is missing")
                size = f.stat().st_size
                if size != meta["size"]:
                    raise ValueError(f"{name} has {size} bytes, manifest says {meta['size']}")
                if file_sha256(f) != meta["sha256"]:
                    raise ValueError(f"{name} does not match its recorded sha256")
        except (OSError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"unreadable manifest or files ({e!r})") from None
        return manifest

    def _fresh(self, manifest: Manifest) -> bool:
        """Usable: not older than a rebuild request, and not the failure of an unknown class."""
        return (self.rebuild_before is None or manifest.get("created", 0) >= self.rebuild_before) \
            and known(manifest)

    def _peek(self, stage: str, key: str) -> tuple[CacheEntry | None, bool]:
        """Lock-free: (the entry, False) if whole and fresh; (None, True) if it looks damaged.

        The entry is marked used *before* it is checked (see housekeeping's eviction hazard).
        """
        path = self.root / stage / key
        touch(path)
        try:
            manifest = self._check(path)
        except ValueError:
            return None, True
        if manifest is None or not self._fresh(manifest):
            return None, False
        return CacheEntry(path, manifest, hit=True), False

    def _locked_lookup(self, stage: str, key: str) -> CacheEntry | None:
        """Holding the key's lock: the whole, fresh entry, or None (a damaged one is discarded)."""
        path = self.root / stage / key
        try:
            manifest = self._check(path)
        except ValueError as e:
            warnings.warn(CacheWarning(f"cache entry {path} is damaged ({e}); rebuilding"),
                          stacklevel=3)
            self.stats.rebuilt_damaged += 1
            self._trash(path)
            return None
        if manifest is None or not self._fresh(manifest):
            return None
        touch(path)
        return CacheEntry(path, manifest, hit=True)

    def _trash(self, path: Path) -> None:
        """Holding the key's lock: rename the entry away and delete it."""
        trash = trash_path(path.parent, path.name)
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return  # removed by a process that does not take the lock (an older version)
        shutil.rmtree(trash, ignore_errors=True)

    def lookup(self, stage: str, key: str, label: str = "") -> CacheEntry | None:
        """The valid entry for ``key`` if present here or in the remote cache, never built
        (damaged entries are removed with a warning; a remembered failure is raised)."""
        entry, damaged = self._peek(stage, key)
        if damaged or (entry is None and self.remote is not None and self.remote.readable):
            (self.root / stage).mkdir(parents=True, exist_ok=True)
            with KeyLock(lock_path(self.root / stage, key)):
                entry = self._locked_lookup(stage, key) or self._download(stage, key, label)
        return None if entry is None else self._hand_out(stage, key, entry, label)

    def get_or_build(self, stage: str, inputs: Mapping[str, object], build: Callable[[Path], object],
                     upstream: Sequence[str] = (), label: str = "") -> CacheEntry:
        """Return the entry for this stage run, building it (once, across processes) if needed.

        ``build(folder)`` writes the artifact's files into ``folder``; it runs in a temporary
        folder that is renamed into place only when it returns. Before building, the entry is
        fetched from the remote cache (if one is set) and verified; after building, uploaded.
        A builder that raises a :class:`RememberedFailure` leaves a failed entry: this call and
        every later one for the key raise that failure (see :mod:`pytest_qnn_genai.cache.failures`).
        """
        key = self.key(stage, inputs, upstream)
        if not self._swept:
            self.sweep()
        entry, _damaged = self._peek(stage, key)
        if entry is None:
            (self.root / stage).mkdir(parents=True, exist_ok=True)
            with KeyLock(lock_path(self.root / stage, key)):
                entry = self._locked_lookup(stage, key)  # built meanwhile, or damaged: discarded
                if entry is None:
                    entry = self._download(stage, key, label)
                if entry is None:
                    entry = self._build(stage, key, inputs, upstream, build, label)
        return self._hand_out(stage, key, entry, label)

    def _hand_out(self, stage: str, key: str, entry: CacheEntry, label: str) -> CacheEntry:
        """Count the use of ``entry`` and return it, or raise the failure it remembers."""
        self._note_used(stage, key, entry)
        if not entry.hit:  # built or downloaded: the cache grew
            self.enforce_bound()
        if failure_of(entry.manifest) is not None:
            if entry.hit:
                self.stats.failures_recalled += 1
            raise recalled(entry.manifest, stage, label or str(entry.manifest.get("label", "")))
        if entry.hit:
            self.stats.hits += 1
        return entry

    def _note_used(self, stage: str, key: str, entry: CacheEntry) -> None:
        m = entry.manifest
        name = f"{stage}/{key}"
        self._used.add(name)
        self.stats.used[name] = {"stage": stage, "label": m.get("label", ""),
                                 "key": key, "digest": entry.digest,
                                 "upstream": list(m.get("upstream", [])),
                                 "inputs": m.get("inputs", {})}

    def _download(self, stage: str, key: str, label: str) -> CacheEntry | None:
        """Holding the key's lock: the entry fetched from the remote cache and verified, or None."""
        if self.remote is None or not self.remote.readable:
            return None
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{key}-", dir=self.root / stage))
        try:
            manifest = self.remote.fetch(stage, key, tmp, self._fresh, label)
            if manifest is None:
                return None
            final = self.root / stage / key
            if final.exists():  # stale (rebuild requested): move it out of the way first
                self._trash(final)
            os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        touch(final)
        return CacheEntry(final, manifest, hit=False)

    def _build(self, stage: str, key: str, inputs: Mapping[str, object], upstream: Sequence[str],
               build: Callable[[Path], object], label: str) -> CacheEntry:
        """Holding the key's lock: build into a ``.tmp-`` folder and rename it into place, then
        upload it. A :class:`RememberedFailure` is stored as a failed entry (no files)."""
        final = self.root / stage / key
        if final.exists():  # stale (rebuild requested): move it out of the way first
            self._trash(final)
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{key}-", dir=self.root / stage))
        start = time.monotonic()
        failure: RememberedFailure | None = None
        try:
            try:
                with heartbeat(f"build {stage} {label}".rstrip(), self.progress):
                    build(tmp)
            except RememberedFailure as e:  # remembered under the key: the partial files go
                failure = e
                shutil.rmtree(tmp)
                tmp.mkdir()
            files: dict[str, FileRecord] = {
                p.name: {"sha256": file_sha256(p), "size": p.stat().st_size}
                     for p in sorted(tmp.iterdir()) if p.is_file() and p.name != MANIFEST}
            elapsed = time.monotonic() - start
            manifest: Manifest = {"stage": stage, "key": key, "label": label, "inputs": inputs,
                        "upstream": list(upstream), "versions": self.versions, "files": files,
                        "build_s": round(elapsed, 3), "created": time.time()}
            if failure is not None:
                manifest["failure"] = failure_record(failure)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
            os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self.stats.builds += 1
        self.stats.build_s += elapsed
        self.stats.bytes_built += sum(f["size"] for f in files.values())
        self.stats.built_keys.append(f"{stage}/{key}")
        if self.remote is not None:
            self.remote.upload(final, manifest)
        if failure is not None:
            self.stats.failures_remembered += 1
            raise failure
        return CacheEntry(final, manifest, hit=False)

    def sweep(self) -> list[Path]:
        """Remove leftovers of killed builds (done once per process by the first get_or_build)."""
        self._swept = True
        removed = housekeeping.sweep(self.root)
        self.stats.leftovers_removed += len(removed)
        return removed

    def enforce_bound(self) -> list[EntryInfo]:
        """Evict least-recently-used entries until the cache fits ``max_bytes`` (if set)."""
        if self.max_bytes is None:
            return []
        result = housekeeping.evict(self.root, max_bytes=self.max_bytes,
                                    protect_since=self.session_start, protect=self._used,
                                    on_evict=self._evicted)
        if result.total > self.max_bytes and not self._said_over:
            self._said_over = True
            self.progress(f"[qnn-genai] cache: {format_bytes(result.total)} in {self.root} is over "
                          f"its bound of {format_bytes(self.max_bytes)}: the rest is in use or "
                          "being built")
        return result.evicted

    def _evicted(self, info: EntryInfo) -> None:
        self.stats.evicted += 1
        self.stats.bytes_evicted += info.size
        self.progress(f"[qnn-genai] cache: evicted {info.stage} {info.label or info.key} "
                      f"({format_bytes(info.size)}, least recently used)")
