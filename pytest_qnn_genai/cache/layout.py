"""Where the artifact cache keeps things on disk, and the names that tell them apart.

::

    <root>/<stage>/<key>/                 a finished entry: its files and manifest.json
    <root>/<stage>/<key>.lock             the key's lock (exists while held, or left by a kill)
    <root>/<stage>/.tmp-<key>-<random>/   an entry being built (renamed to <key>/ when done)
    <root>/<stage>/.trash-<key>-<pid>-<n>/  an entry being removed (renamed away, then deleted)
    <root>/.evict.lock                    serializes size-bound evictions

Contract: an entry folder appears and disappears only by ``rename`` under its key's lock, so a
reader sees a whole entry or none. The manifest's mtime is the entry's last use (touched on every
hit); its ``created`` field is when it was built. ``.tmp-``/``.trash-`` folders carry the full key,
so their key's lock tells whether a live process owns them.

Hazard: a key is 32 lowercase hex digits; folders with other names are not the cache's and are
never touched (that includes ``.tmp-`` folders of older versions, which carried 8 digits).
"""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NotRequired, TypedDict


class FileRecord(TypedDict):
    """One file of an entry, as its manifest records it."""

    sha256: str
    size: int


class FailureRecord(TypedDict):
    """The manifest's ``failure`` field of a failed entry: the exception's class and message."""

    type: str
    reason: str


class Manifest(TypedDict):
    """An entry's ``manifest.json``; readers check the fields they rely on (a damaged or foreign
    manifest is one line, not a traceback)."""

    stage: str
    key: str
    label: str
    inputs: Mapping[str, object]  # the key inputs, as the builder gave them
    upstream: list[str]  # keys of the entries it was built from
    versions: dict[str, str]
    files: dict[str, FileRecord]
    build_s: float
    created: float  # time.time() when it was built
    failure: NotRequired[FailureRecord]  # only a failed entry


MANIFEST = "manifest.json"
LOCK_SUFFIX = ".lock"
TMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
EVICT_LOCK = ".evict.lock"
_KEY = re.compile(r"[0-9a-f]{32}")
_LEFTOVER = re.compile(r"\.(?:tmp|trash)-([0-9a-f]{32})-.+")
_LOCK = re.compile(r"([0-9a-f]{32})\.lock")


def is_key(name: str) -> bool:
    return _KEY.fullmatch(name) is not None


def lock_path(stage_dir: Path, key: str) -> Path:
    return stage_dir / f"{key}{LOCK_SUFFIX}"


def trash_path(stage_dir: Path, key: str) -> Path:
    """A fresh name to rename an entry (or a leftover) to before deleting it."""
    return stage_dir / f"{TRASH_PREFIX}{key}-{os.getpid()}-{time.monotonic_ns()}"


def leftover_key(name: str) -> str | None:
    """The key a ``.tmp-``/``.trash-`` folder or a lock file belongs to; None for other names."""
    m = _LEFTOVER.fullmatch(name) or _LOCK.fullmatch(name)
    return m.group(1) if m else None


def stage_dirs(root: Path) -> list[Path]:
    """The stage folders under ``root`` (none if it does not exist)."""
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except FileNotFoundError:
        return []


def entry_dirs(stage_dir: Path) -> list[Path]:
    """The finished entries of one stage."""
    try:
        return sorted(p for p in stage_dir.iterdir() if is_key(p.name) and p.is_dir())
    except FileNotFoundError:
        return []


def read_manifest(entry: Path) -> Manifest:
    """The entry's parsed manifest; ValueError (one line) if it is missing or unreadable."""
    try:
        manifest: Manifest = json.loads((entry / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"unreadable manifest ({e})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise ValueError("unreadable manifest (no file list)")
    return manifest


def last_used_ns(entry: Path) -> int | None:
    """When the entry was last used (its manifest's mtime), None if it has no manifest."""
    try:
        return os.stat(entry / MANIFEST).st_mtime_ns
    except OSError:
        return None


def touch(entry: Path) -> None:
    """Record a use of the entry (best effort: a read-only cache still works, unordered)."""
    try:
        os.utime(entry / MANIFEST)
    except OSError:
        pass
