"""A content-addressed artifact cache on disk, safe across processes (pytest-xdist workers).

An entry's key hashes the stage name, its inputs, the digests of the upstream entries it was built
from, and the tool versions. Entries are built in a temporary folder and renamed into place; a
``manifest.json`` records inputs, file digests and sizes, so a corrupted or truncated entry is
detected on load and rebuilt. One file lock per key makes exactly one process build it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from filelock import FileLock

from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.progress import Writer, heartbeat, stderr_writer

MANIFEST = "manifest.json"


class CacheWarning(UserWarning):
    """A cache entry was found damaged and is being rebuilt."""


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class CacheEntry:
    """A finished entry: its folder and manifest. ``digest`` identifies its content."""

    path: Path
    manifest: dict[str, Any]
    hit: bool

    @property
    def key(self) -> str:
        return self.manifest["key"]

    @property
    def digest(self) -> str:
        return hashlib.sha256(_canonical(self.manifest["files"]).encode()).hexdigest()

    def file(self, name: str) -> Path:
        """Path of one of the entry's files (must be listed in the manifest)."""
        if name not in self.manifest["files"]:
            raise KeyError(f"{self.path.name}: no file {name!r} in this cache entry")
        return self.path / name


@dataclass
class CacheStats:
    """What the cache did in this process."""

    hits: int = 0
    builds: int = 0
    rebuilt_damaged: int = 0
    build_s: float = 0.0
    bytes_built: int = 0
    built_keys: list[str] = field(default_factory=list)

    def merge(self, other: Mapping[str, Any]) -> None:
        """Add another process's stats (as produced by :meth:`to_dict`)."""
        self.hits += other["hits"]
        self.builds += other["builds"]
        self.rebuilt_damaged += other["rebuilt_damaged"]
        self.build_s += other["build_s"]
        self.bytes_built += other["bytes_built"]
        self.built_keys += other["built_keys"]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ArtifactCache:
    """Stage outputs under ``root/<stage>/<key>/``, keyed by content and versions."""

    def __init__(self, root: Path, versions: Mapping[str, str], rebuild_before: float | None = None,
                 progress: Writer = stderr_writer) -> None:
        self.root = root
        self.versions = dict(versions)
        self.rebuild_before = rebuild_before  # entries created before this are ignored (rebuild)
        self.progress = progress
        self.stats = CacheStats()

    def key(self, stage: str, inputs: Mapping[str, Any], upstream: Sequence[str] = ()) -> str:
        """The content key of a stage run."""
        material = {"stage": stage, "inputs": inputs, "upstream": list(upstream),
                    "versions": self.versions}
        return hashlib.sha256(_canonical(material).encode()).hexdigest()[:32]

    def _check(self, path: Path) -> dict[str, Any] | None:
        """The manifest of a complete, undamaged entry; None if absent; raises ValueError if damaged."""
        mf = path / MANIFEST
        if not path.exists():
            return None
        try:
            manifest = json.loads(mf.read_text())
            files = manifest["files"]
        except (OSError, ValueError, KeyError) as e:
            raise ValueError(f"unreadable manifest ({e})") from None
        for name, meta in files.items():
            f = path / name
            if not f.is_file():
                raise ValueError(f"{name} is missing")
            if f.stat().st_size != meta["size"]:
                raise ValueError(f"{name} has {f.stat().st_size} bytes, manifest says {meta['size']}")
            if file_sha256(f) != meta["sha256"]:
                raise ValueError(f"{name} does not match its recorded sha256")
        return manifest

    def _discard(self, path: Path, why: str) -> None:
        warnings.warn(CacheWarning(f"cache entry {path} is damaged ({why}); rebuilding"),
                      stacklevel=3)
        self.stats.rebuilt_damaged += 1
        trash = path.with_name(f".trash-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def lookup(self, stage: str, key: str) -> CacheEntry | None:
        """The valid entry for ``key`` if present (damaged entries are removed with a warning)."""
        path = self.root / stage / key
        try:
            manifest = self._check(path)
        except ValueError as e:
            self._discard(path, str(e))
            return None
        if manifest is None:
            return None
        if self.rebuild_before is not None and manifest["created"] < self.rebuild_before:
            return None
        return CacheEntry(path, manifest, hit=True)

    def get_or_build(self, stage: str, inputs: Mapping[str, Any], build: Callable[[Path], None],
                     upstream: Sequence[str] = (), label: str = "") -> CacheEntry:
        """Return the entry for this stage run, building it (once, across processes) if needed.

        ``build(folder)`` writes the artifact's files into ``folder``; it runs in a temporary
        folder that is renamed into place only when it returns.
        """
        key = self.key(stage, inputs, upstream)
        entry = self.lookup(stage, key)
        if entry is None:
            (self.root / stage).mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.root / stage / f"{key}.lock")):
                entry = self.lookup(stage, key)  # another process may have built it meanwhile
                if entry is None:
                    entry = self._build(stage, key, inputs, upstream, build, label)
                    return entry
        self.stats.hits += 1
        return entry

    def _build(self, stage: str, key: str, inputs: Mapping[str, Any], upstream: Sequence[str],
               build: Callable[[Path], None], label: str) -> CacheEntry:
        final = self.root / stage / key
        if final.exists():  # stale (rebuild requested): move it out of the way first
            trash = final.with_name(f".trash-{key}-{os.getpid()}")
            os.rename(final, trash)
            shutil.rmtree(trash, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:8]}-", dir=self.root / stage))
        start = time.monotonic()
        try:
            with heartbeat(f"build {stage} {label}".rstrip(), self.progress):
                build(tmp)
            files = {p.name: {"sha256": file_sha256(p), "size": p.stat().st_size}
                     for p in sorted(tmp.iterdir()) if p.is_file() and p.name != MANIFEST}
            elapsed = time.monotonic() - start
            manifest = {"stage": stage, "key": key, "label": label, "inputs": inputs,
                        "upstream": list(upstream), "versions": self.versions, "files": files,
                        "build_s": round(elapsed, 3), "created": time.time()}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
            os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self.stats.builds += 1
        self.stats.build_s += elapsed
        self.stats.bytes_built += sum(f["size"] for f in files.values())
        self.stats.built_keys.append(f"{stage}/{key}")
        return CacheEntry(final, manifest, hit=False)
