"""The HTTP remote store's fault handling against a misbehaving loopback server: every call has a
timeout, only connection errors are retried, redirects are not followed (the token stays home),
and no message carries the token."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.cache.remote import RemoteUnavailable
from pytest_qnn_genai.cache.remote.base import RemoteRefused
from pytest_qnn_genai.cache.remote.http import HttpStore
from tests.support.http_faults import FaultyHttpServer, http_response

FAST = {"timeout_s": 0.5, "retry_delays_s": (0.01, 0.02)}
TOKEN = "tok-3f9a-never-printed"


def test_a_dropped_connection_is_retried_twice(tmp_path: Path) -> None:
    # the server closes the socket: the client sees RemoteDisconnected, or ConnectionResetError
    # when the close races its request (measured once in a full make test run)
    with FaultyHttpServer("close") as server:
        with pytest.raises(RemoteUnavailable, match=r"GET .*: (RemoteDisconnected|"
                                                     r"ConnectionResetError).*\(after 3 tries\)"):
            HttpStore(server.url, **FAST).get("v1/cas/x", tmp_path / "x")
    assert server.connections == 3


def test_a_silent_server_costs_one_timeout_not_three(tmp_path: Path) -> None:
    with FaultyHttpServer("silent") as server:
        with pytest.raises(RemoteUnavailable, match="timed out") as raised:
            HttpStore(server.url, **FAST).get("v1/cas/x", tmp_path / "x")
    assert server.connections == 1 and "tries" not in str(raised.value)


@pytest.mark.parametrize("method", ["get", "put"])
def test_a_server_error_is_not_retried(tmp_path: Path, method: str) -> None:
    (tmp_path / "f").write_bytes(b"data")
    with FaultyHttpServer("respond", http_response(500, "Internal Server Error")) as server:
        store = HttpStore(server.url, **FAST)
        with pytest.raises(RemoteUnavailable, match="answered HTTP 500"):
            store.get("v1/cas/x", tmp_path / "x") if method == "get" \
                else store.put("v1/cas/x", tmp_path / "f")
    assert server.connections == 1


def test_a_refused_write_is_read_only_and_names_the_token_without_printing_it(
        tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    with FaultyHttpServer("respond", http_response(403, "Forbidden")) as server:
        with pytest.raises(RemoteRefused) as raised:
            HttpStore(server.url, token=TOKEN, **FAST).put("v1/cas/x", tmp_path / "f")
    assert "answered HTTP 403 (a token is sent)" in str(raised.value)
    assert raised.value.why == "PUT answered HTTP 403 (a token is sent)"
    assert TOKEN not in str(raised.value)
    assert f"Authorization: Bearer {TOKEN}".encode() in server.requests[0]


def test_a_redirect_is_not_followed_so_the_token_stays_home(tmp_path: Path) -> None:
    with FaultyHttpServer("respond", http_response(200, "OK", body=b"elsewhere")) as other, \
            FaultyHttpServer("respond", http_response(
                302, "Found", {"Location": f"{other.url}/v1/cas/x"})) as server:
        with pytest.raises(RemoteUnavailable, match="answered HTTP 302"):
            HttpStore(server.url, token=TOKEN, **FAST).get("v1/cas/x", tmp_path / "x")
    assert other.connections == 0


def test_an_unreachable_port_is_unavailable(tmp_path: Path) -> None:
    with FaultyHttpServer("close") as server:
        url = server.url
    with pytest.raises(RemoteUnavailable, match=r"ConnectionRefusedError.*\(after 3 tries\)"):
        HttpStore(url, **FAST).get("v1/cas/x", tmp_path / "x")
