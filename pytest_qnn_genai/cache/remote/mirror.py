"""How the artifact cache uses a remote store: fetch and verify before building, upload after.

:class:`RemoteMirror` is called by :class:`~pytest_qnn_genai.cache.store.ArtifactCache` while it
holds the key's lock, with a fresh ``.tmp-`` folder of the local cache (renamed into place only
when the download is whole and verified; swept if the process is killed).

Contract:

- :meth:`RemoteMirror.fetch` downloads the manifest, then every file it lists, and checks each
  file's size and sha256 against it. A manifest that does not parse, names another key, or lists
  a file that is missing or does not match makes the entry *damaged*: it is not used (the caller
  builds the entry and uploads it, which replaces it), ``stats.rejected`` counts it and one
  warning line names it.
- :meth:`RemoteMirror.upload` puts every file (by sha256), then the manifest: a reader that finds
  the manifest finds the files.
- The first time the store is unreachable this process stops using it (one warning line; every
  entry after it is built locally); the first refused write stops uploads (one warning line;
  downloads go on). Neither ever fails a build. The warning names no request, so every xdist
  worker says the same line and pytest's warning summary shows it once.
- Keys the store did not have are remembered for the process, so asking again costs nothing.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import cast

from pytest_qnn_genai.cache.layout import MANIFEST, FileRecord, Manifest
from pytest_qnn_genai.cache.remote.base import (
    RemoteRefused,
    RemoteStore,
    RemoteUnavailable,
    blob_path,
    manifest_path,
)
from pytest_qnn_genai.cache.stats import CacheStats
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.untyped import Json

_SHA256 = re.compile(r"[0-9a-f]{64}")


class RemoteDamage(ValueError):
    """A remote entry is not whole (one line)."""


def check_manifest(manifest: Json, stage: str, key: str) -> Manifest:
    """``manifest`` if it describes ``stage/key`` with safe file names; RemoteDamage otherwise."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise RemoteDamage("the manifest has no file list")
    if manifest.get("stage") != stage or manifest.get("key") != key:
        raise RemoteDamage(f"the manifest is for {manifest.get('stage')}/{manifest.get('key')}")
    for name, meta in manifest["files"].items():
        if not isinstance(name, str) or name in ("", ".", "..", MANIFEST) or "/" in name \
                or "\\" in name or name.startswith(".tmp-"):
            raise RemoteDamage(f"the manifest lists a file named {name!r}")
        if not (isinstance(meta, dict) and isinstance(meta.get("sha256"), str)
                and _SHA256.fullmatch(meta["sha256"]) and isinstance(meta.get("size"), int)
                and meta["size"] >= 0):
            raise RemoteDamage(f"the manifest's record of {name} is malformed")
    checked: Manifest = cast("Manifest", manifest)  # its files and identity, checked above
    return checked


def _check_file(path: Path, meta: FileRecord) -> None:
    size = path.stat().st_size
    if size != meta["size"]:
        raise RemoteDamage(f"{path.name} has {size} bytes, the manifest says {meta['size']}")
    if file_sha256(path) != meta["sha256"]:
        raise RemoteDamage(f"{path.name} does not match its sha256 in the manifest")


class RemoteMirror:
    """One process's use of a remote store (see the module docstring)."""

    def __init__(self, store: RemoteStore, stats: CacheStats, warn: Callable[[str], None]) -> None:
        self.store = store
        self.stats = stats
        self.warn = warn
        self.readable = True
        self.writable = True
        self._absent: set[str] = set()  # "stage/key" the store did not have

    def describe(self) -> str:
        return self.store.describe()

    def fetch(self, stage: str, key: str, folder: Path, accept: Callable[[Manifest], bool],
              label: str = "") -> Manifest | None:
        """Download ``stage/key`` into the empty ``folder`` and verify it; its manifest, or None
        when the store lacks it, it is not wanted (``accept``), damaged or unreachable."""
        if not self.readable or f"{stage}/{key}" in self._absent:
            return None
        try:
            if not self.store.get(manifest_path(stage, key), folder / MANIFEST):
                self._absent.add(f"{stage}/{key}")
                return None
            try:
                manifest = check_manifest(json.loads((folder / MANIFEST).read_bytes()), stage, key)
            except ValueError as e:  # JSON errors too
                raise RemoteDamage(str(e) if isinstance(e, RemoteDamage)
                                   else f"unreadable manifest ({e})") from None
            if not accept(manifest):
                return None
            for name, meta in manifest["files"].items():
                if not self.store.get(blob_path(meta["sha256"]), folder / name):
                    raise RemoteDamage(f"{name} is missing")
                _check_file(folder / name, meta)
        except RemoteUnavailable as e:
            self._lost(e)
            return None
        except RemoteDamage as e:
            self.stats.rejected += 1
            self.warn(f"remote cache entry {stage}/{key} ({label or '-'}) in {self.describe()} "
                      f"is damaged ({e}): not used, building it here")
            return None
        self.stats.downloaded += 1
        self.stats.bytes_downloaded += sum(m["size"] for m in manifest["files"].values())
        return manifest

    def upload(self, folder: Path, manifest: Manifest) -> None:
        """Put the entry in ``folder`` (files first, then its manifest) into the store."""
        if not self.writable:
            return
        files = manifest["files"]
        try:
            for name, meta in files.items():
                self.store.put(blob_path(meta["sha256"]), folder / name)
            self.store.put(manifest_path(manifest["stage"], manifest["key"]), folder / MANIFEST)
        except RemoteRefused as e:
            self.writable = False
            self.warn(f"remote cache {self.describe()} refuses uploads ({e.why}): entries built "
                      "here are not shared in this run")
            return
        except RemoteUnavailable as e:
            self._lost(e)
            return
        self._absent.discard(f"{manifest['stage']}/{manifest['key']}")
        self.stats.uploaded += 1
        self.stats.bytes_uploaded += sum(m["size"] for m in files.values())

    def _lost(self, e: RemoteUnavailable) -> None:
        self.readable = self.writable = False
        self.warn(f"remote cache {self.describe()} is unavailable ({e.why}): building locally "
                  "for the rest of this run")
