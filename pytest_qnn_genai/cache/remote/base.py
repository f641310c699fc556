"""What every remote store offers the artifact cache: whole files by path, GET and PUT.

A remote store is a flat namespace of files under one base URL; the cache's entries are laid out
in it content-addressed, as build caches such as Bazel's HTTP cache do::

    <url>/v1/ac/<stage>/<key>.json   an entry's manifest (written last: its files are there)
    <url>/v1/cas/<sha256>            one file's bytes, named by their sha256

An entry whose manifest is present is whole unless damaged in storage, which the reader detects
(every file is checked against the manifest's sha256 and size) and never uses. Two machines
uploading the same key write different names for different bytes, so a manifest never points at
another upload's files.

Contract for a store (:class:`RemoteStore`):

- :meth:`~RemoteStore.get` writes the file at ``path`` to ``dest`` and returns True, or returns
  False when the store has no such file;
- :meth:`~RemoteStore.put` stores ``src`` at ``path`` (replacing any earlier file);
- both raise :class:`RemoteUnavailable` when the store cannot be reached or answers with an error
  (after retrying connection errors only), :meth:`~RemoteStore.put` raises
  :class:`RemoteRefused` when the store is reachable but does not accept writes (read-only);
- every network call has a timeout; ``describe()`` is the URL without credentials.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

LAYOUT = "v1"
TOKEN_ENV = "QNN_GENAI_REMOTE_CACHE_TOKEN"  # a bearer token for HTTP stores, never printed


class RemoteError(Exception):
    """A remote store operation failed (the message is one line, without credentials).

    ``why`` is the failure without the request's path (what every process of a run says alike,
    so pytest's warning summary shows one line for all xdist workers)."""

    def __init__(self, message: str, why: str | None = None) -> None:
        super().__init__(message)
        self.why = why or message


class RemoteUnavailable(RemoteError):
    """The store cannot be reached or answered with an error: stop using it for this run."""


class RemoteRefused(RemoteError):
    """The store is reachable but refuses writes: it is read-only for this run."""


class RemoteConfigError(ValueError):
    """The remote cache URL cannot be used (bad scheme, a missing package): one line."""


def manifest_path(stage: str, key: str) -> str:
    return f"{LAYOUT}/ac/{stage}/{key}.json"


def blob_path(sha256: str) -> str:
    return f"{LAYOUT}/cas/{sha256}"


def redact(url: str) -> str:
    """``url`` without user name, password, query or fragment (safe to print)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class RemoteStore(ABC):
    """A remote store of files by path (see the module docstring for the contract)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def describe(self) -> str:
        return redact(self.url)

    @abstractmethod
    def get(self, path: str, dest: Path) -> bool:
        """Write the file at ``path`` to ``dest``; False if the store has none."""

    @abstractmethod
    def put(self, path: str, src: Path) -> None:
        """Store the file ``src`` at ``path``."""
