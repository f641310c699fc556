"""The prebuild's "still building" flag, for what must not run beside its builds (measurements).

Contract: :func:`held` (in the prebuild process, around its steps) creates the flag file already
locked (``flock`` exclusive on a temporary file, then renamed into place) and unlinks and unlocks
it when the steps are done; the kernel unlocks it if the process dies. :func:`wait_done` (in any
process of the run) returns at once when there is no flag (no prebuild in this run, or it has
ended), else when a shared lock on it can be taken: the prebuild's steps are done. It polls, so
it never blocks longer than ``timeout_s`` (then it says so, and the caller goes on).

Not covered: a build a test starts on its own (``--no-qnn-prebuild``, or an entry the prebuild
left to the test that asked first) holds no flag; the flag appears a second or two after the
session starts the prebuild, which is at collection, long before the measurements (run last:
``plugin/order.py``).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

POLL_S = 1.0


@contextlib.contextmanager
def held(flag: Path) -> Iterator[None]:
    """Hold ``flag`` (see the module contract) while the block runs; where it cannot be made
    (an unwritable temporary folder), the block runs without it: nothing waits."""
    part = flag.with_name(f"{flag.name}.{os.getpid()}.part")
    try:
        fd = os.open(part, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.replace(part, flag)  # appears locked: a waiter never sees it free too early
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                flag.unlink()
    finally:
        os.close(fd)


def wait_done(flag: Path, timeout_s: float, say: Callable[[str], None]) -> float:
    """Wait until the prebuild's steps are done (or ``timeout_s``); the seconds waited."""
    try:
        fd = os.open(flag, os.O_RDONLY)
    except OSError:
        return 0.0  # no prebuild building
    start, said = time.monotonic(), False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return time.monotonic() - start
            except BlockingIOError:
                waited = time.monotonic() - start
                if waited >= timeout_s:
                    say(f"[qnn-genai] measuring beside the prebuild's builds: they did not end "
                        f"in {timeout_s:.0f}s")
                    return waited
                if not said:
                    say("[qnn-genai] waiting for the prebuild's builds to end before measuring")
                    said = True
                time.sleep(POLL_S)
    finally:
        os.close(fd)
