"""A loopback adb server that the real ``adb`` client talks to, serving sandbox devices.

It is what ``adb start-server`` normally runs, listening on 127.0.0.1: the smart-socket host
protocol (4-hex-length requests, ``OKAY``/``FAIL`` replies) with ``host:version``,
``host:devices[-l]``, ``host:features``, ``host-serial:<s>:<features|get-state|...>``,
``host:tport:serial:<s>``/``host:transport:<s>`` and then the device services of
:mod:`tests.support.fake_device`. Every request is recorded for tests to assert on. Point the
client at it with ``adb -H 127.0.0.1 -P <port>``: a non-"localhost" host keeps the client from
ever spawning a server of its own.
"""
from __future__ import annotations

import socket
import socketserver
import struct
import threading
from pathlib import Path

from tests.support.fake_device import (
    ClientGone,
    FakeDevice,
    ShellSession,
    SyncSession,
    close_socket,
    recv_exact,
)

ADB_SERVER_VERSION = 41  # what adb 29.x (Debian's /usr/bin/adb) expects; anything else -> restart
HOST_SERIAL_COMMANDS = ("features", "get-state", "get-serialno", "get-devpath")


def _okay(sock: socket.socket, payload: str | None = None) -> None:
    if payload is None:
        sock.sendall(b"OKAY")
    else:
        data = payload.encode()
        sock.sendall(b"OKAY" + b"%04x" % len(data) + data)


def _fail(sock: socket.socket, message: str) -> None:
    data = message.encode()
    sock.sendall(b"FAIL" + b"%04x" % len(data) + data)


class LoopbackAdbServer:
    """An adb server on 127.0.0.1 that serves :class:`FakeDevice` sandboxes."""

    def __init__(self, base_dir: Path, port: int = 0) -> None:
        self.base_dir = Path(base_dir)
        self.devices: dict[str, FakeDevice] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                owner._handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", port), Handler, bind_and_activate=True)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """TCP port the server listens on."""
        return int(self._server.server_address[1])

    def add_device(self, serial: str, props: dict[str, str] | None = None) -> FakeDevice:
        """Create a sandboxed device with the given properties."""
        device = FakeDevice.create(serial, self.base_dir / serial, props)
        self.devices[serial] = device
        return device

    def start(self) -> LoopbackAdbServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (idempotent) and kill any shell command still running."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()
        for device in self.devices.values():
            device.kill_running()

    def count(self, prefix: str) -> int:
        """How many recorded requests start with ``prefix``."""
        return sum(1 for r in self.requests if r.startswith(prefix))

    # -- host protocol -------------------------------------------------------------------

    def _handle(self, sock: socket.socket) -> None:
        device: FakeDevice | None = None
        try:
            while True:
                length = int(recv_exact(sock, 4), 16)
                request = recv_exact(sock, length).decode()
                with self._lock:
                    self.requests.append(request)
                if device is not None:
                    self._device_service(sock, device, request)
                    return
                device, keep_open = self._host_request(sock, request)
                if not keep_open:
                    return
        except (ClientGone, ConnectionError, OSError):
            return
        finally:
            close_socket(sock)

    def _host_request(self, sock: socket.socket, req: str) -> tuple[FakeDevice | None, bool]:
        """Answer one host request; returns (transport device, keep connection open)."""
        if req == "host:version":
            _okay(sock, f"{ADB_SERVER_VERSION:04x}")
        elif req in ("host:devices", "host:devices-l"):
            lines = [f"{d.serial}\t{self._state(d, consume=False)}" for d in self.devices.values()]
            if req.endswith("-l"):
                lines = [line + " product:fake model:Loopback transport_id:1" for line in lines]
            _okay(sock, "".join(line + "\n" for line in lines))
        elif req in ("host:features", "host:tport:any", "host:transport-any"):
            if len(self.devices) != 1:
                _fail(sock, "no devices/emulators found" if not self.devices
                      else "more than one device/emulator")
                return None, False
            return self._transport(sock, req, next(iter(self.devices)))
        elif req.startswith("host-serial:"):
            for command in HOST_SERIAL_COMMANDS:
                if req.endswith(":" + command):
                    serial = req[len("host-serial:"):-len(command) - 1]
                    self._serial_query(sock, serial, command)
                    return None, False
            _fail(sock, f"unknown host service {req!r}")
        elif req.startswith("host:tport:serial:"):
            return self._transport(sock, req, req[len("host:tport:serial:"):])
        elif req.startswith("host:transport:"):
            return self._transport(sock, req, req[len("host:transport:"):])
        elif req == "host:kill":
            _okay(sock)  # never die: the tests own this server's lifetime
        else:
            _fail(sock, f"unknown host service {req!r}")
        return None, False

    def _state(self, device: FakeDevice, consume: bool) -> str:
        if device.state != "device":
            return device.state
        if device.faults.offline_requests > 0:
            if consume:
                device.take_fault("offline_requests")
            return "offline"
        return "device"

    def _online(self, sock: socket.socket, serial: str) -> FakeDevice | None:
        device = self.devices.get(serial)
        if device is None:
            _fail(sock, f"device '{serial}' not found")
            return None
        state = self._state(device, consume=True)
        if state != "device":
            _fail(sock, f"device {state}")
            return None
        return device

    def _serial_query(self, sock: socket.socket, serial: str, command: str) -> None:
        device = self._online(sock, serial)
        if device is None:
            return
        if command == "features":
            _okay(sock, device.features)
        elif command == "get-state":
            _okay(sock, "device")
        elif command == "get-serialno":
            _okay(sock, serial)
        else:
            _okay(sock, "usb:fake")

    def _transport(self, sock: socket.socket, req: str, serial: str) -> tuple[FakeDevice | None, bool]:
        device = self._online(sock, serial)
        if device is None:
            return None, False
        if req.endswith("features"):
            _okay(sock, device.features)
            return None, False
        sock.sendall(b"OKAY" + (struct.pack("<Q", 1) if ":tport:" in req else b""))
        return device, True

    def _device_service(self, sock: socket.socket, device: FakeDevice, service: str) -> None:
        if service.startswith("shell"):
            options, _, command = service.partition(":")
            _okay(sock)
            ShellSession(sock, device, command, "v2" in options.split(",")).run()
        elif service == "sync:":
            _okay(sock)
            SyncSession(sock, device).run()
        else:
            _fail(sock, f"unknown service {service!r}")

