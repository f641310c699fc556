"""A remote store on any fsspec filesystem: ``s3://bucket/prefix`` (with s3fs), ``gs://`` (gcsfs),
``file:///shared/dir`` and the rest of fsspec's registry.

fsspec is optional: without it, or without the package a scheme needs (s3fs for ``s3://``), the
URL is refused when the session starts, in one line naming the package to install
(:func:`check_fsspec_url`). Credentials come from the filesystem package's own configuration
(for s3fs: the AWS environment variables, ``~/.aws``, instance roles), never from the URL.

Hazards: timeouts and retries are the filesystem package's own (s3fs: botocore's 60 s connect and
read timeouts and its retry policy); every error but "no such file" counts as the store being
unavailable, and a ``PermissionError`` on a write as the store being read-only. A ``file://``
store writes files in place, so a reader racing a writer may see a partial file: it fails its
sha256 check and is not used.
"""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.cache.remote.base import (
    RemoteConfigError,
    RemoteRefused,
    RemoteStore,
    RemoteUnavailable,
)
from pytest_qnn_genai.untyped import Upstream


def _filesystem(url: str) -> tuple[Upstream, str]:  # an fsspec AbstractFileSystem
    """fsspec's filesystem for ``url`` and the root path in it; RemoteConfigError if unusable."""
    protocol = url.split("://", 1)[0]
    try:
        import fsspec
    except ImportError:
        raise RemoteConfigError(f"{protocol}:// remote caches need the fsspec package "
                                "(pip install fsspec)") from None
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise RemoteConfigError(f"{protocol}:// is not a scheme fsspec knows; use http(s):// "
                                "or an fsspec URL such as s3://bucket/prefix") from None
    except ImportError:
        from fsspec.registry import known_implementations

        hint = known_implementations.get(protocol, {}).get("err") \
            or f"a package for {protocol}:// is missing"
        raise RemoteConfigError(f"{protocol}:// remote caches need a package that is not "
                                f"installed: {hint}") from None
    root = cls._strip_protocol(url)
    return cls(), str(root).rstrip("/")


def check_fsspec_url(url: str) -> None:
    """RemoteConfigError (one line) unless ``url`` can be opened with what is installed."""
    _filesystem(url)


class FsspecStore(RemoteStore):
    """Whole files on an fsspec filesystem under ``url``."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.fs, self.root = _filesystem(url)

    def _full(self, path: str) -> str:
        return f"{self.root}/{path}"

    def get(self, path: str, dest: Path) -> bool:
        try:
            self.fs.get_file(self._full(path), str(dest))
        except FileNotFoundError:
            dest.unlink(missing_ok=True)
            return False
        except Exception as e:  # noqa: BLE001 - any filesystem package's error means unavailable
            raise RemoteUnavailable(f"get {self.describe()}/{path}: {type(e).__name__}: {e}",
                                    f"get: {type(e).__name__}") from None
        return True

    def put(self, path: str, src: Path) -> None:
        full = self._full(path)
        try:
            self.fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)
            self.fs.put_file(str(src), full)
        except PermissionError as e:
            raise RemoteRefused(f"put {self.describe()}/{path}: {e}", "put: PermissionError") \
                from None
        except Exception as e:  # noqa: BLE001 - any filesystem package's error means unavailable
            raise RemoteUnavailable(f"put {self.describe()}/{path}: {type(e).__name__}: {e}",
                                    f"put: {type(e).__name__}") from None
