"""One phone per pytest-xdist worker, and a cross-process lock so no two processes share one.

Worker ``gwN`` gets the N-th ``--device`` entry for the whole session. The lock is a ``filelock``
file per phone: pytest-xdist runs session fixtures once per worker, and separate pytest
invocations on one host must not drive the same phone either.

Device labs: a ``--device`` entry is ``SERIAL`` (served by ``--adb-host``, else the client's
default server) or ``SERIAL@HOST:PORT`` (served by the adb server at HOST:PORT, whatever
``--adb-host`` says; an IPv6 host in brackets). :func:`parse_device` checks the form (one-line
ValueError); :func:`device_address` resolves an entry to the serial and server ``adb -H -P -s``
needs. A phone is its serial *and* its server (two lab hosts can both serve ``emulator-5554``),
so :attr:`DeviceAddress.key` names locks and finds duplicates; the default server is
``localhost:5037`` however it is spelled. Hazard: the lock is per host; two client hosts that
reach one lab server can still share a phone.
"""
from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_qnn_genai.devices.adb import split_adb_host

_WORKER_ID = re.compile(r"^gw(\d+)$")
DEFAULT_ADB_PORT = 5037
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
DEVICE_FORMS = "SERIAL or SERIAL@HOST:PORT"


@dataclass(frozen=True)
class DeviceAddress:
    """A phone: its adb serial and the adb server serving it (host None = the default)."""

    serial: str
    host: str | None = None
    port: int | None = None

    @property
    def server(self) -> str:
        """``HOST:PORT`` of the serving adb server (``localhost:5037`` for the default)."""
        host = self.host or "localhost"
        return f"{f'[{host}]' if ':' in host else host}:{self.port or DEFAULT_ADB_PORT}"

    @property
    def key(self) -> str:
        """The phone's identity: the serial on the default server, else ``SERIAL@HOST:PORT``."""
        local = (self.host or "localhost") in _LOCAL_HOSTS
        if local and (self.port or DEFAULT_ADB_PORT) == DEFAULT_ADB_PORT:
            return self.serial
        return f"{self.serial}@{self.server}"


def parse_device(entry: str) -> tuple[str, str | None, int | None]:
    """``(serial, host, port)`` of a ``--device`` entry (host/port None for a plain SERIAL).

    Raises ValueError (one line) for an empty serial or host, whitespace, or a missing or
    out-of-range port.
    """
    if not entry or entry != entry.strip() or any(c.isspace() for c in entry):
        raise ValueError(f"{entry!r} is not {DEVICE_FORMS} (no spaces)")
    serial, at, server = entry.rpartition("@")
    if not at:
        return entry, None, None
    example = f"{serial or 'R5CX1234ABC'}@10.0.0.5:{DEFAULT_ADB_PORT}"
    if not serial:
        raise ValueError(f"{entry!r} has no serial before '@' (expected {DEVICE_FORMS}, e.g. "
                         f"{example})")
    host, colon, port = server.rpartition(":")
    if not colon or not port:
        raise ValueError(f"{entry!r} names no adb server port (expected {DEVICE_FORMS}, e.g. "
                         f"{example})")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{entry!r}: put an IPv6 adb server host in brackets, e.g. "
                         f"{serial}@[::1]:{DEFAULT_ADB_PORT}")
    if not host:
        raise ValueError(f"{entry!r} names no adb server host (expected {DEVICE_FORMS}, e.g. "
                         f"{example})")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{entry!r}: adb server port {port!r} is not a number in 1-65535")
    return serial, host, int(port)


def device_address(entry: str, adb_host: str | None = None) -> DeviceAddress:
    """Where ``entry`` is: its own server, else ``--adb-host``'s (``adb_host``), else the
    client's default."""
    serial, host, port = parse_device(entry)
    if host is None:
        host, port = split_adb_host(adb_host)
    return DeviceAddress(serial, host, port)


def same_phones(entries: Sequence[str], adb_host: str | None = None) -> list[tuple[str, str]]:
    """Pairs of ``--device`` entries that name one phone (same serial on the same server)."""
    first: dict[str, str] = {}
    pairs = []
    for entry in entries:
        key = device_address(entry, adb_host).key
        if key in first:
            pairs.append((first[key], entry))
        else:
            first[key] = entry
    return pairs


class DeviceBusyError(RuntimeError):
    """Another process holds the device's lock."""


def worker_index(worker_id: str | None) -> int:
    """0-based index of an xdist worker id (``gw3`` -> 3); 0 when not under xdist."""
    if not worker_id or worker_id == "master":
        return 0
    match = _WORKER_ID.match(worker_id)
    if match is None:
        raise ValueError(f"unexpected pytest-xdist worker id {worker_id!r} (expected gw<N>)")
    return int(match.group(1))


def assign_device(serials: Sequence[str], worker_id: str | None = None,
                  worker_count: int | None = None) -> str | None:
    """The serial this worker owns for the session, or None when no ``--device`` was given.

    Raises ValueError when there are more workers than devices or a serial repeats.
    """
    serials = list(serials)
    if not serials:
        return None
    duplicates = sorted({s for s in serials if serials.count(s) > 1})
    if duplicates:
        raise ValueError(f"--device lists {', '.join(duplicates)} more than once")
    index = worker_index(worker_id)
    workers = max(worker_count or 1, index + 1)
    if workers > len(serials):
        raise ValueError(
            f"pytest-xdist runs {workers} workers but only {len(serials)} --device serial(s) "
            f"were given ({', '.join(serials)}); each worker needs its own phone: use "
            f"-n {len(serials)} or fewer, or pass more --device serials")
    return serials[index]


def assign_from_env(serials: Sequence[str], env: Mapping[str, str] | None = None) -> str | None:
    """:func:`assign_device` using ``PYTEST_XDIST_WORKER``/``PYTEST_XDIST_WORKER_COUNT``."""
    env = os.environ if env is None else env
    count = env.get("PYTEST_XDIST_WORKER_COUNT")
    return assign_device(serials, env.get("PYTEST_XDIST_WORKER"), int(count) if count else None)


def default_lock_dir() -> Path:
    """Host-wide directory for device lock files."""
    return Path(tempfile.gettempdir()) / "pytest-qnn-genai-device-locks"


def lock_path(serial: str, lock_dir: Path | None = None) -> Path:
    """Lock file of one phone (a serial or a :attr:`DeviceAddress.key`; unsafe characters such
    as ':' and '@' replaced)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", serial)
    return (lock_dir or default_lock_dir()) / f"{safe}.lock"


@contextmanager
def device_lock(serial: str, lock_dir: Path | None = None, timeout_s: float = 0.0) -> Iterator[Path]:
    """Hold the serial's lock for the duration; DeviceBusyError if not had within timeout_s."""
    path = lock_path(serial, lock_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=timeout_s)
    except Timeout:
        raise DeviceBusyError(
            f"device {serial} is in use by another process (lock {path} held); wait for it "
            f"or pick another --device") from None
    try:
        yield path
    finally:
        lock.release()


@contextmanager
def lease_device(serials: Sequence[str], lock_dir: Path | None = None, timeout_s: float = 0.0,
                 env: Mapping[str, str] | None = None) -> Iterator[str | None]:
    """This worker's serial, locked for the block (None and no lock without devices)."""
    serial = assign_from_env(serials, env)
    if serial is None:
        yield None
        return
    with device_lock(serial, lock_dir, timeout_s):
        yield serial
