"""Remote stores the artifact cache shares entries through: one family, one shape.

``http://`` and ``https://`` URLs are :class:`~pytest_qnn_genai.cache.remote.http.HttpStore`
(plain GET/PUT); any other scheme is an fsspec filesystem
(:class:`~pytest_qnn_genai.cache.remote.fsspec.FsspecStore`: ``s3://`` with s3fs installed).
:class:`~pytest_qnn_genai.cache.remote.mirror.RemoteMirror` is how the store uses one: download
and verify before building, upload after. The layout and the store contract are in
:mod:`pytest_qnn_genai.cache.remote.base`.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from pytest_qnn_genai.cache.remote.base import (
    TOKEN_ENV,
    RemoteConfigError,
    RemoteRefused,
    RemoteStore,
    RemoteUnavailable,
    redact,
)

HTTP_SCHEMES = ("http", "https")

__all__ = ["RemoteConfigError", "RemoteRefused", "RemoteStore", "RemoteUnavailable", "check_url",
           "open_remote", "redact"]


def check_url(url: str) -> None:
    """RemoteConfigError (one line, the URL redacted) unless ``url`` names a usable store."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if "://" not in url or not scheme:
        raise RemoteConfigError(f"{redact(url)!r}: expected http(s)://HOST/PATH or an fsspec URL "
                                "such as s3://bucket/prefix")
    if scheme in HTTP_SCHEMES:
        if not parts.hostname:
            raise RemoteConfigError(f"{redact(url)!r}: no host")
        if parts.username or parts.password:
            raise RemoteConfigError(f"{redact(url)}: credentials do not go in the URL; put a "
                                    f"bearer token in ${TOKEN_ENV}")
        if parts.query or parts.fragment:
            raise RemoteConfigError(f"{redact(url)}: no query or fragment, a base URL only")
        return
    from pytest_qnn_genai.cache.remote.fsspec import check_fsspec_url

    check_fsspec_url(url)


def open_remote(url: str, environ: Mapping[str, str] | None = None) -> RemoteStore:
    """The store for ``url`` (no network traffic yet); RemoteConfigError if it cannot be used."""
    check_url(url)
    environ = os.environ if environ is None else environ
    if urlsplit(url).scheme.lower() in HTTP_SCHEMES:
        from pytest_qnn_genai.cache.remote.http import HttpStore

        return HttpStore(url, token=environ.get(TOKEN_ENV) or None)
    from pytest_qnn_genai.cache.remote.fsspec import FsspecStore

    return FsspecStore(url)
