"""Exclusive per-key locks across processes: ``flock`` on ``<stage>/<key>.lock``.

Contract: while a :class:`KeyLock` is held, no other process (nor another ``KeyLock`` object in
this process) holds the lock of the same path. The holder writes ``<pid> <host>`` into the file,
so a refusal can name who holds it. On release the holder removes the file, so lock files do not
pile up; a file left behind by a killed process is only a file (the kernel dropped its lock) and is
removed by the next holder (see :func:`pytest_qnn_genai.cache.housekeeping.sweep`).

Hazards:

- Removing a lock file is only safe for its holder, and only because every acquire checks, once
  ``flock`` succeeds, that the path still names the inode it locked: a process that opened the file
  before the holder removed it would otherwise lock an orphaned inode while a third process locks a
  new file at the same path. On a mismatch the acquire starts over.
- ``flock`` locks belong to an open file: two ``KeyLock`` objects on one path exclude each other
  even within one process, so a blocking acquire of a lock this process already holds never
  returns. The store never nests a key's lock inside itself; non-blocking tries are always safe.
- POSIX only (``fcntl.flock``); on NFS, Linux emulates ``flock`` with byte-range locks.
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path
from types import TracebackType

_BUSY = {errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES}


class KeyLock:
    """One exclusive ``flock`` on ``path``; a context manager that blocks until it holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock, waiting for it if ``blocking``; else False if another holder has it."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path}: lock already held by this object")
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except OSError as e:
                os.close(fd)
                if not blocking and e.errno in _BUSY:
                    return False
                raise
            except BaseException:  # KeyboardInterrupt while waiting
                os.close(fd)
                raise
            if _same_file(fd, self.path):
                break
            os.close(fd)  # the holder removed the file after we opened it: lock the new one
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        except OSError:
            pass  # the note is informative only
        return True

    def release(self) -> None:
        """Remove the lock file (we hold it, so nobody else can be using it) and drop the lock."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if _same_file(fd, self.path):
                os.unlink(self.path)
        except OSError:
            pass  # a leftover file is harmless: the next holder removes it
        finally:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> KeyLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def holder(path: Path) -> str:
    """Who wrote the lock file last (``"<pid> <host>"``), or ``"?"``."""
    try:
        return path.read_text().strip() or "?"
    except OSError:
        return "?"


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)
