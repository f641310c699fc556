"""Listing, cleaning and bounding the artifact cache: leftovers, evictions, removals.

Contract:

- :func:`sweep` removes what killed processes left behind (``.tmp-``/``.trash-`` folders, lock
  files), but only for keys whose lock it can take at once: a live build holds its key's lock for
  the whole life of its ``.tmp-`` folder, so that folder survives.
- :func:`evict` removes every entry unused since ``unused_before``, then least-recently-used
  entries (the manifest's mtime, touched on every hit) until the cache fits ``max_bytes``. Each is
  removed under its key's lock, taken without waiting (a key being built or repaired is skipped);
  never one used at or after ``protect_since`` or named in ``protect``. Evictions are
  serialized by ``<root>/.evict.lock`` so concurrent evicters agree on the total.
- :func:`remove` deletes one entry on request (refuses with :class:`CacheBusy` while its key's lock
  is held).

Hazards: a reader marks an entry used *before* checking it; an evicter renames the entry away,
then looks at the mtime again and puts the entry back if it moved. So a reader that finds an entry
whole keeps it, and one that loses the race finds it missing and rebuilds it. An entry another
session used *before* ``protect_since`` but still holds open can be evicted: pass the session's
start (shared by xdist workers) as ``protect_since``, and size ``max_bytes`` for a session's needs.
File times are coarse (a few ms; set by the server on network filesystems), so uses up to
``CLOCK_SLACK_S`` before ``protect_since`` count as after it. Sizes are apparent bytes of an
entry's files and manifest; "GB" means 10⁹ bytes.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pytest_qnn_genai.cache.layout import (
    EVICT_LOCK,
    LOCK_SUFFIX,
    MANIFEST,
    entry_dirs,
    last_used_ns,
    leftover_key,
    lock_path,
    read_manifest,
    stage_dirs,
    trash_path,
)
from pytest_qnn_genai.cache.lock import KeyLock, holder

CLOCK_SLACK_S = 2.0  # uses this long before ``protect_since`` are protected too


class CacheBusy(Exception):
    """An entry's key is locked by a live process (building or repairing it)."""


@dataclass(frozen=True)
class EntryInfo:
    """What ``ls`` shows of an entry, read from its manifest without checking its files."""

    stage: str
    key: str
    path: Path
    label: str
    size: int  # bytes: files listed in the manifest, plus the manifest
    created: float | None  # seconds since the epoch
    last_used_ns: int | None  # the manifest's mtime
    damaged: str = ""  # why the manifest is unreadable ("" when it is fine)

    @property
    def name(self) -> str:
        return f"{self.stage}/{self.key}"

    @property
    def last_used(self) -> float | None:
        return None if self.last_used_ns is None else self.last_used_ns / 1e9


def format_bytes(n: float) -> str:
    """``n`` bytes in decimal units: ``"512 B"``, ``"12.3 MB"``, ``"1.50 GB"``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}" if unit == "GB" else f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def entry_info(path: Path) -> EntryInfo:
    """Describe one entry folder (damaged manifests are described, not raised)."""
    stage, key = path.parent.name, path.name
    used = last_used_ns(path)
    try:
        manifest = read_manifest(path)
    except ValueError as e:
        return EntryInfo(stage, key, path, "", _du(path), None, used, str(e))
    files = manifest["files"]
    size = sum(_int(meta.get("size")) for meta in files.values() if isinstance(meta, dict)) \
        if isinstance(files, dict) else 0
    try:
        size += (path / MANIFEST).stat().st_size
    except OSError:
        pass
    created = manifest.get("created")
    return EntryInfo(stage, key, path, str(manifest.get("label", "")), size,
                     float(created) if isinstance(created, (int, float)) else None, used)


def entries(root: Path) -> list[EntryInfo]:
    """Every finished entry under ``root``, by stage then key."""
    return [entry_info(p) for s in stage_dirs(root) for p in entry_dirs(s)]


def sweep(root: Path) -> list[Path]:
    """Remove leftovers of dead processes; returns what was removed."""
    removed: list[Path] = []
    for stage_dir in stage_dirs(root):
        groups: dict[str, list[Path]] = {}
        try:
            for p in stage_dir.iterdir():
                key = leftover_key(p.name)
                if key is not None:
                    groups.setdefault(key, []).append(p)
        except OSError:
            continue  # cleaning is best effort: it must not fail a build
        for key, paths in sorted(groups.items()):
            lock = KeyLock(lock_path(stage_dir, key))
            try:
                if not lock.acquire(blocking=False):
                    continue  # a live process owns these
            except OSError:
                continue
            try:
                for p in paths:
                    if not p.name.endswith(LOCK_SUFFIX) and p.exists():
                        shutil.rmtree(p, ignore_errors=True)
                        removed.append(p)
            finally:
                lock.release()  # removes the lock file, stale or fresh
            removed += [p for p in paths if p.name.endswith(LOCK_SUFFIX)]
    return removed


@dataclass(frozen=True)
class Eviction:
    evicted: list[EntryInfo]
    total: int  # bytes of the entries left


def evict(root: Path, *, max_bytes: int | None = None, unused_before: float | None = None,
          protect_since: float | None = None, protect: Collection[str] = (),
          on_evict: Callable[[EntryInfo], None] | None = None) -> Eviction:
    """Evict least-recently-used entries (see the module docstring)."""
    if not root.is_dir():
        return Eviction([], 0)
    evicted: list[EntryInfo] = []
    with KeyLock(root / EVICT_LOCK):
        infos = entries(root)
        total = sum(i.size for i in infos)
        keep_ns = None if protect_since is None else int((protect_since - CLOCK_SLACK_S) * 1e9)
        cutoff_ns = None if unused_before is None else int(unused_before * 1e9)
        for info in sorted(infos, key=lambda i: (i.last_used_ns or 0, i.name)):
            over = max_bytes is not None and total > max_bytes
            if not over and not _older(info.last_used_ns, cutoff_ns):
                break  # oldest first: neither bound applies to the rest
            if info.name in protect:
                continue
            if not _evict_one(info, partial(_may_evict, over=over, keep_ns=keep_ns,
                                            cutoff_ns=cutoff_ns)):
                continue
            total -= info.size
            evicted.append(info)
            if on_evict is not None:
                on_evict(info)
    return Eviction(evicted, total)


def remove(info: EntryInfo) -> None:
    """Delete one entry now; CacheBusy if a live process holds its key's lock."""
    lock = KeyLock(lock_path(info.path.parent, info.key))
    if not lock.acquire(blocking=False):
        raise CacheBusy(f"{info.name} is locked by a running build "
                        f"(pid/host {holder(lock.path)}); try again later")
    try:
        if info.path.is_dir():
            trash = trash_path(info.path.parent, info.key)
            os.rename(info.path, trash)
            shutil.rmtree(trash, ignore_errors=True)
    finally:
        lock.release()


def _evict_one(info: EntryInfo, evictable: Callable[[int | None], bool]) -> bool:
    """Rename the entry away under its lock, put it back if it was used meanwhile, else delete."""
    lock = KeyLock(lock_path(info.path.parent, info.key))
    try:
        if not lock.acquire(blocking=False):
            return False  # being built or repaired
    except OSError:
        return False
    try:
        before = last_used_ns(info.path)
        if not info.path.is_dir() or not evictable(before):
            return False
        trash = trash_path(info.path.parent, info.key)
        os.rename(info.path, trash)
        if last_used_ns(trash) != before:  # a reader touched it before we moved it: keep it
            os.rename(trash, info.path)
            return False
        shutil.rmtree(trash, ignore_errors=True)
        return True
    finally:
        lock.release()


def _older(used_ns: int | None, cutoff_ns: int | None) -> bool:
    return cutoff_ns is not None and (used_ns is None or used_ns < cutoff_ns)


def _may_evict(used_ns: int | None, over: bool, keep_ns: int | None,
               cutoff_ns: int | None) -> bool:
    """Decided again under the key's lock, with the entry's current last use."""
    if used_ns is None:
        return True  # no manifest: nothing can be using it
    if keep_ns is not None and used_ns >= keep_ns:
        return False
    return over or _older(used_ns, cutoff_ns)


def _du(path: Path) -> int:
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0
