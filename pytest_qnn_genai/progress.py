"""Progress lines for long work: what is being built, and how long it has taken so far."""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Writer = Callable[[str], None]
_terminal_fd: int | None = None


def remember_terminal() -> None:
    """Keep a duplicate of the process's stderr before pytest redirects it for output capture.

    Progress lines are written there, so they reach the terminal while a test runs (also from a
    heartbeat thread, and in pytest-xdist workers, whose stderr is the controller's).
    """
    global _terminal_fd
    if _terminal_fd is None:
        try:
            _terminal_fd = os.dup(2)
        except OSError:
            _terminal_fd = None


def terminal_fd() -> int:
    """The descriptor progress lines go to (the terminal's stderr, see :func:`remember_terminal`),
    for a child process whose own progress lines must reach the terminal too."""
    return _terminal_fd if _terminal_fd is not None else 2


def stderr_writer(line: str) -> None:
    """Write a progress line to the terminal's stderr, bypassing pytest's output capture."""
    data = (line + "\n").encode(errors="replace")
    try:
        os.write(_terminal_fd if _terminal_fd is not None else 2, data)
    except OSError:
        pass  # progress is best effort: a closed terminal must not fail a build


@contextmanager
def heartbeat(what: str, write: Writer = stderr_writer, every_s: float = 15.0,
              status: Callable[[], str] | None = None) -> Iterator[None]:
    """Announce ``what``, repeat it with the elapsed time every ``every_s`` s, then say it's done.
    ``status``: called for each repeat, its text (e.g. ``[ 45%]`` of a compile) follows the time."""
    start = time.monotonic()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            now = status() if status is not None else ""
            write(f"[qnn-genai] {what}: {time.monotonic() - start:.0f}s elapsed"
                  + (f", {now}" if now else ""))

    write(f"[qnn-genai] {what}: started")
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        thread.join()
        state = "done" if ok else "FAILED"
        write(f"[qnn-genai] {what}: {state} in {time.monotonic() - start:.1f}s")
