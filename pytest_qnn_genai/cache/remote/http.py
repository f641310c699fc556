"""An HTTP(S) remote store: whole files with plain GET and PUT, as WebDAV-style build caches take.

Any server that stores a PUT body at its path and serves it back on GET will do: nginx with its
DAV module (``dav_methods PUT; create_full_put_path on;``, what the tests run against), Apache
``mod_dav``, bazel-remote, or an object store's HTTP endpoint. A bearer token, when the server
wants one, comes from ``$QNN_GENAI_REMOTE_CACHE_TOKEN`` and is sent as ``Authorization: Bearer``;
it is never printed and never sent on a redirect (redirects are not followed: a build cache has no
business moving, and following one would hand the token to another host).

Built on the standard library's ``urllib``: a handful of GETs and PUTs of whole files per session
need no connection pool, and each call's timeout, streaming body and retry are a few lines here,
so the gate takes no dependency for them.

Hazards: the timeout bounds each blocking socket operation (connect, each read), not a whole
transfer. Only connection errors (refused, reset, closed mid-response) are retried, twice, after
0.25 s then 1 s; a timeout or an HTTP error status is not, so an unreachable server costs one
timeout, not three.
"""
from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

from pytest_qnn_genai.cache.remote.base import RemoteRefused, RemoteStore, RemoteUnavailable

TIMEOUT_S = 30.0
RETRY_DELAYS_S = (0.25, 1.0)
CHUNK = 1 << 20


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Turn every redirect into an HTTPError with its 3xx status."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: http.client.HTTPMessage, newurl: str) -> None:
        return None


def _connection_error(e: BaseException) -> bool:
    """True for errors worth a retry: the connection was refused, reset or closed early."""
    reason = e.reason if isinstance(e, urllib.error.URLError) else e
    return isinstance(reason, (ConnectionError, http.client.IncompleteRead))


def _why(e: BaseException) -> str:
    reason = e.reason if isinstance(e, urllib.error.URLError) else e
    text = str(reason).strip()
    return f"{type(reason).__name__}: {text}" if text else type(reason).__name__


class HttpStore(RemoteStore):
    """GET/PUT of whole files under an ``http://`` or ``https://`` base URL."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = TIMEOUT_S,
                 retry_delays_s: tuple[float, ...] = RETRY_DELAYS_S) -> None:
        super().__init__(url)
        self.timeout_s = timeout_s
        self.retry_delays_s = retry_delays_s
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._opener = urllib.request.build_opener(_NoRedirect)

    def get(self, path: str, dest: Path) -> bool:
        def once() -> int:
            request = urllib.request.Request(f"{self.url}/{path}", headers=self._headers)
            with self._opener.open(request, timeout=self.timeout_s) as response, \
                    open(dest, "wb") as out:
                for block in iter(lambda: response.read(CHUNK), b""):
                    out.write(block)
                return int(response.status)

        status = self._call("GET", path, once)
        if status == 404:
            return False
        if status != 200:
            why = f"GET answered HTTP {status}{self._auth_hint(status)}"
            raise RemoteUnavailable(f"GET {self.describe()}/{path}: {why}", why)
        return True

    def put(self, path: str, src: Path) -> None:
        def once() -> int:
            with open(src, "rb") as body:
                headers = {**self._headers, "Content-Type": "application/octet-stream",
                           "Content-Length": str(src.stat().st_size)}
                request = urllib.request.Request(f"{self.url}/{path}", data=body,
                                                 headers=headers, method="PUT")
                with self._opener.open(request, timeout=self.timeout_s) as response:
                    response.read()
                    return int(response.status)

        status = self._call("PUT", path, once)
        if 200 <= status < 300:
            return
        why = f"PUT answered HTTP {status}{self._auth_hint(status)}"
        message = f"PUT {self.describe()}/{path}: {why}"
        if 400 <= status < 500 or status in (501, 507):
            raise RemoteRefused(message, why)
        raise RemoteUnavailable(message, why)

    def _auth_hint(self, status: int) -> str:
        if status not in (401, 403):
            return ""
        return " (a token is sent)" if self._headers else " (no token: is $QNN_GENAI_REMOTE_CACHE_TOKEN set?)"

    def _call(self, method: str, path: str, once: Callable[[], int]) -> int:
        """The HTTP status of ``once()``; connection errors retried, others RemoteUnavailable."""
        for attempt in range(len(self.retry_delays_s) + 1):
            try:
                return once()
            except urllib.error.HTTPError as e:
                e.close()
                return int(e.code)
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                if not _connection_error(e) or attempt == len(self.retry_delays_s):
                    detail = _why(e) + (f" (after {attempt + 1} tries)" if attempt else "")
                    raise RemoteUnavailable(f"{method} {self.describe()}/{path}: {detail}",
                                            f"{method}: {detail}") from None
                time.sleep(self.retry_delays_s[attempt])
        raise AssertionError("unreachable: the loop returns or raises")
