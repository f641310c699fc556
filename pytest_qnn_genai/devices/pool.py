"""One phone per pytest-xdist worker, and a cross-process lock so no two processes share one.

Worker ``gwN`` gets ``serials[N]`` for the whole session. The lock is a ``filelock`` file per
serial: pytest-xdist runs session fixtures once per worker, and separate pytest invocations
on one host must not drive the same phone either.
"""
from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

_WORKER_ID = re.compile(r"^gw(\d+)$")


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
    """Lock file of one serial (unsafe characters such as ':' in ip:port replaced)."""
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
