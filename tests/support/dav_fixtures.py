"""Pytest fixtures for the remote-cache tests: real nginx DAV servers on loopback.

Load with ``pytest_plugins = ["tests.support.dav_fixtures"]`` in a test module. Without nginx
(or without its DAV module) the tests fail with one line naming ``make dav``; they never skip.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.dav_server import DavServerError, NginxDav, nginx_binary


@pytest.fixture(scope="session")
def nginx() -> str:
    """The nginx binary with ngx_http_dav_module."""
    try:
        return nginx_binary()
    except DavServerError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def dav_factory(nginx: str, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., NginxDav]]:
    """``dav_factory(root=None, writes="put", token=None)``: a started server (stopped at the
    end of the test); servers made with the same ``root`` serve the same files. Proxies are
    bypassed for loopback, as a CI machine behind a proxy would need."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    servers: list[NginxDav] = []

    def make(root: Path | None = None, writes: str = "put", token: str | None = None) -> NginxDav:
        home = tmp_path / f"nginx-{len(servers)}"
        server = NginxDav(home, root or tmp_path / "www", writes=writes, token=token,
                          binary=nginx)
        servers.append(server)
        return server.start()

    try:
        yield make
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def dav(dav_factory: Callable[..., NginxDav]) -> NginxDav:
    """One writable nginx DAV server."""
    return dav_factory()
