"""Progress lines for long work: what is being built, and how long it has taken so far."""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

Writer = Callable[[str], None]


def stderr_writer(line: str) -> None:
    """Write a progress line straight to the real stderr (visible even under output capture)."""
    sys.__stderr__.write(line + "\n")
    sys.__stderr__.flush()


@contextmanager
def heartbeat(what: str, write: Writer = stderr_writer, every_s: float = 15.0) -> Iterator[None]:
    """Announce ``what``, repeat it with the elapsed time every ``every_s`` s, then say it's done."""
    start = time.monotonic()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            write(f"[qnn-genai] {what}: {time.monotonic() - start:.0f}s elapsed")

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
