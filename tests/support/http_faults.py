"""A loopback TCP server that misbehaves on purpose, for the HTTP remote store's fault handling:
it counts connections and answers each one with a scripted behaviour (close at once, never answer,
a fixed raw HTTP response). nginx (tests/support/dav_server.py) is the well-behaved counterpart.
"""
from __future__ import annotations

import socket
import threading
from types import TracebackType

BEHAVIOURS = ("close", "silent", "respond")


class FaultyHttpServer:
    """Listens on 127.0.0.1; ``behaviour`` is ``close`` (accept, then close without a byte),
    ``silent`` (read the request, never answer) or ``respond`` (send ``response`` bytes)."""

    def __init__(self, behaviour: str, response: bytes = b"") -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {BEHAVIOURS}")
        self.behaviour = behaviour
        self.response = response
        self.connections = 0
        self.requests: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/cache"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            if self.behaviour == "close":
                conn.close()
                continue
            conn.settimeout(2.0)
            try:
                self.requests.append(conn.recv(65536))
            except OSError:
                pass
            if self.behaviour == "silent":
                self._held.append(conn)  # closed on stop
                continue
            try:
                conn.sendall(self.response)
            finally:
                conn.close()

    def __enter__(self) -> FaultyHttpServer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()
        for conn in self._held:
            conn.close()


def http_response(status: int, reason: str, headers: dict[str, str] | None = None,
                  body: bytes = b"") -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
