"""The device side of the loopback adb server: a sandbox directory, its shell and sync services.

A :class:`FakeDevice` is a directory: remote paths under ``/data/local/tmp`` map into
``<sandbox>/data/local/tmp``, shell commands run locally with ``bash -c`` in the sandbox
(remote roots in the command rewritten), and ``getprop`` is a script on the sandbox's PATH that
reads ``<sandbox>/props``. :class:`ShellSession` speaks the shell v2 packet protocol (and
legacy raw ``shell:``); :class:`SyncSession` the sync protocol adb 29 uses (STA2/LST2/STAT,
LIST, SEND/DATA/DONE, RECV, QUIT). Faults are injected per device through :class:`FaultPlan`.
"""
from __future__ import annotations

import os
import shlex
import signal
import socket
import struct
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

REMOTE_ROOTS = ("/data/local/tmp",)
SYNC_DATA_MAX = 64 * 1024
# Advertised so adb 29 uses shell v2 (real exit codes) and STA2/LST2 stats.
DEVICE_FEATURES = "shell_v2,cmd,stat_v2,fixed_push_mkdir,fixed_push_symlink_timestamp"
SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN, SHELL_WINDOW = range(6)

GETPROP_SCRIPT = """#!/bin/sh
props="$(dirname "$0")/../props"
if [ $# -eq 0 ]; then sed 's/^\\([^=]*\\)=\\(.*\\)$/[\\1]: [\\2]/' "$props"; exit 0; fi
line=$(grep -m1 "^$1=" "$props")
printf '%s\\n' "${line#*=}"
"""


def loopback_props(soc: str = "SM8650", platform: str = "pineapple") -> dict[str, str]:
    """The properties of a loopback phone: the SoC it reports, and the x86_64 ABI of the code it
    really runs (whatever is pushed runs on this machine, its HTP on QNN's x86 simulator)."""
    return {"ro.soc.model": soc, "ro.board.platform": platform,
            "ro.product.model": f"Loopback {soc}", "ro.product.cpu.abi": "x86_64"}


@dataclass
class FaultPlan:
    """Faults a device injects; counters are consumed one per affected request."""

    offline_requests: int = 0  # next K device-addressed requests answer "device offline"
    drop_pushes: int = 0  # next K SENDs: connection reset after the first DATA chunk
    truncate_pulls: int = 0  # next K RECVs: half the bytes, then a normal DONE
    close_pulls: int = 0  # next K RECVs: half the bytes, then the connection closes
    # In shell commands, this text (e.g. "./qnn_llama_runner") is replaced by a program that
    # sleeps until the client goes away ...
    hang_pattern: str | None = None
    # ... or by one that prints "fault injected: exit N" to stderr and exits N.
    exit_codes: dict[str, int] = field(default_factory=dict)


@dataclass
class FakeDevice:
    """One sandboxed device: its files, properties, faults and what was asked of it."""

    serial: str
    root: Path
    faults: FaultPlan = field(default_factory=FaultPlan)
    state: str = "device"
    features: str = DEVICE_FEATURES
    shell_commands: list[str] = field(default_factory=list)
    sends: list[str] = field(default_factory=list)
    recvs: list[str] = field(default_factory=list)
    running: set[subprocess.Popen[bytes]] = field(default_factory=set)

    @classmethod
    def create(cls, serial: str, root: Path, props: dict[str, str] | None = None) -> FakeDevice:
        """Lay out a sandbox (``bin/getprop``, ``data/local/tmp``, ``props``) and return it."""
        (root / "bin").mkdir(parents=True, exist_ok=True)
        (root / "data/local/tmp").mkdir(parents=True, exist_ok=True)
        getprop = root / "bin/getprop"
        getprop.write_text(GETPROP_SCRIPT)
        getprop.chmod(0o755)
        device = cls(serial=serial, root=root)
        device.set_props(props or {})
        return device

    def kill_running(self) -> None:
        """Kill every shell command still running on this device."""
        for proc in list(self.running):
            kill_group(proc)

    def set_props(self, props: dict[str, str]) -> None:
        """Replace the properties ``getprop`` reports."""
        text = "".join(f"{k}={v}\n" for k, v in props.items())
        (self.root / "props").write_text(text)

    def local_path(self, remote: str) -> Path:
        """Where a remote absolute path lives in the sandbox."""
        return self.root / remote.lstrip("/")

    def map_command(self, command: str) -> str:
        """Rewrite remote roots in a shell command to sandbox paths."""
        for prefix in REMOTE_ROOTS:
            command = command.replace(prefix, str(self.root) + prefix)
        return command

    def take_fault(self, name: str) -> bool:
        """Consume one count of a counted fault; True if it fires now."""
        count = getattr(self.faults, name)
        if count > 0:
            setattr(self.faults, name, count - 1)
            return True
        return False


class ClientGone(Exception):
    """The adb client closed its end."""


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ClientGone()
        data += chunk
    return bytes(data)


def close_socket(sock: socket.socket) -> None:
    """Shut down both directions (wakes a reader thread) and close."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def reset_socket(sock: socket.socket) -> None:
    """Close with RST, as a dying USB link looks to the client."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a command's whole process group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class ShellSession:
    """Runs one ``shell`` service request: v2 packets or legacy raw bytes."""

    def __init__(self, sock: socket.socket, device: FakeDevice, command: str, v2: bool) -> None:
        self.sock, self.device, self.command, self.v2 = sock, device, command, v2
        self._send_lock = threading.Lock()

    def _send(self, packet_id: int, data: bytes) -> None:
        with self._send_lock:
            if self.v2:
                self.sock.sendall(struct.pack("<BI", packet_id, len(data)) + data)
            elif packet_id in (SHELL_STDOUT, SHELL_STDERR):
                self.sock.sendall(data)

    def run(self) -> None:
        """Execute the command (or its injected fault) and report the exit code."""
        device, command = self.device, self.command
        device.shell_commands.append(command)
        for pattern, code in device.faults.exit_codes.items():
            # the shell runs; the matching program "runs" and exits with the forced code
            fail = f"echo 'fault injected: exit {code}' >&2; exit {code}"
            command = command.replace(pattern, f"sh -c {shlex.quote(fail)} --")
        if device.faults.hang_pattern:
            command = command.replace(device.faults.hang_pattern, "sh -c 'exec sleep 3600' --")
        env = dict(os.environ, PATH=f"{device.root / 'bin'}:{os.environ.get('PATH', '')}",
                   HOME=str(device.root), ANDROID_SERIAL=device.serial)
        proc = subprocess.Popen(["bash", "-c", device.map_command(command)], cwd=device.root,
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        device.running.add(proc)
        try:
            pumps = [threading.Thread(target=self._pump, args=(proc.stdout, SHELL_STDOUT)),
                     threading.Thread(target=self._pump, args=(proc.stderr, SHELL_STDERR))]
            for pump in pumps:
                pump.start()
            threading.Thread(target=self._read_client, args=(proc,), daemon=True).start()
            code = proc.wait()
            for pump in pumps:
                pump.join()
            self._send(SHELL_EXIT, bytes([(128 - code if code < 0 else code) & 0xFF]))
        except OSError:
            kill_group(proc)
        finally:
            device.running.discard(proc)

    def _pump(self, stream: IO[bytes] | None, packet_id: int) -> None:
        assert stream is not None
        fd = stream.fileno()
        try:
            while chunk := os.read(fd, 65536):
                self._send(packet_id, chunk)
        except OSError:
            pass

    def _read_client(self, proc: subprocess.Popen[bytes]) -> None:
        """Forward stdin packets; when the client goes away, kill the command."""
        assert proc.stdin is not None
        try:
            while True:
                if not self.v2:
                    if not self.sock.recv(65536):
                        raise ClientGone()
                    continue
                packet_id, length = struct.unpack("<BI", recv_exact(self.sock, 5))
                data = recv_exact(self.sock, length)
                if packet_id == SHELL_STDIN:
                    proc.stdin.write(data)
                    proc.stdin.flush()
                elif packet_id == SHELL_CLOSE_STDIN:
                    proc.stdin.close()
        except (ClientGone, OSError, ValueError):
            if proc.poll() is None:
                kill_group(proc)


class SyncSession:
    """Serves one ``sync:`` connection."""

    def __init__(self, sock: socket.socket, device: FakeDevice) -> None:
        self.sock, self.device = sock, device

    def run(self) -> None:
        """Answer sync requests until QUIT or the client leaves."""
        while True:
            ident, length = struct.unpack("<4sI", recv_exact(self.sock, 8))
            if ident == b"QUIT":
                return
            path = recv_exact(self.sock, length).decode()
            handler = {b"STA2": self._stat_v2, b"LST2": self._stat_v2, b"STAT": self._stat_v1,
                       b"LIST": self._list, b"SEND": self._send, b"RECV": self._recv}.get(ident)
            if handler is None:
                self._fail(f"unknown sync request {ident!r}")
                return
            if handler(ident, path) is False:
                return

    def _fail(self, message: str) -> None:
        data = message.encode()
        self.sock.sendall(struct.pack("<4sI", b"FAIL", len(data)) + data)

    def _stat_v2(self, ident: bytes, path: str) -> None:
        local = self.device.local_path(path)
        try:
            st = os.stat(local) if ident == b"STA2" else os.lstat(local)
        except OSError as exc:
            self.sock.sendall(struct.pack("<4sI", ident, exc.errno or 2) + bytes(64))
            return
        self.sock.sendall(struct.pack("<4sIQQIIIIQqqq", ident, 0, st.st_dev, st.st_ino, st.st_mode,
                                      st.st_nlink, 0, 0, st.st_size, int(st.st_atime),
                                      int(st.st_mtime), int(st.st_ctime)))

    def _stat_v1(self, ident: bytes, path: str) -> None:
        try:
            st = os.lstat(self.device.local_path(path))
            fields = (st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime))
        except OSError:
            fields = (0, 0, 0)
        self.sock.sendall(struct.pack("<4sIII", b"STAT", *fields))

    def _list(self, ident: bytes, path: str) -> None:
        local = self.device.local_path(path)
        names = sorted(os.listdir(local)) if local.is_dir() else []
        for name in names:
            st = os.lstat(local / name)
            raw = name.encode()
            self.sock.sendall(struct.pack("<4sIIII", b"DENT", st.st_mode, st.st_size & 0xFFFFFFFF,
                                          int(st.st_mtime), len(raw)) + raw)
        self.sock.sendall(struct.pack("<4sIIII", b"DONE", 0, 0, 0, 0))

    def _send(self, ident: bytes, path_and_mode: str) -> bool:
        remote, _, mode = path_and_mode.rpartition(",")
        self.device.sends.append(remote)
        drop = self.device.take_fault("drop_pushes")
        target = self.device.local_path(remote)
        partial = target.with_name(target.name + ".adbpart")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as out:
            while True:
                ident, length = struct.unpack("<4sI", recv_exact(self.sock, 8))
                if ident == b"DONE":
                    break
                if ident != b"DATA":
                    self._fail(f"unexpected {ident!r} during SEND")
                    return False
                out.write(recv_exact(self.sock, length))
                if drop:
                    out.close()
                    partial.unlink()
                    reset_socket(self.sock)
                    return False
        partial.chmod(int(mode) & 0o7777 if mode.isdigit() else 0o644)
        os.replace(partial, target)
        os.utime(target, (length, length))
        self.sock.sendall(struct.pack("<4sI", b"OKAY", 0))
        return True

    def _recv(self, ident: bytes, path: str) -> bool:
        self.device.recvs.append(path)
        try:
            data = self.device.local_path(path).read_bytes()
        except OSError as exc:
            self._fail(exc.strerror or "No such file or directory")
            return True
        truncate = self.device.take_fault("truncate_pulls")
        close = not truncate and self.device.take_fault("close_pulls")
        if truncate or close:
            data = data[: len(data) // 2]
        for start in range(0, len(data), SYNC_DATA_MAX):
            chunk = data[start:start + SYNC_DATA_MAX]
            self.sock.sendall(struct.pack("<4sI", b"DATA", len(chunk)) + chunk)
        if close:
            reset_socket(self.sock)
            return False
        self.sock.sendall(struct.pack("<4sI", b"DONE", 0))
        return True
