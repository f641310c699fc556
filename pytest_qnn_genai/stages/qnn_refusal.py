"""QNN refusing a graph at prepare: told apart from other lowering errors, said in one line, and
remembered by the cache under the build's key.

Contract: :func:`lowering` wraps one QNN lowering in this process. QNN's libraries write their
errors to file descriptor 2 (C++ logging, not Python's), and executorch then raises a bare
``AssertionError: Failed to generate Qnn context binary.`` that says nothing of why. While the
lowering runs, descriptor 2 is passed through a pipe that keeps QNN's error lines and forwards
every byte to where it went before (the terminal still shows progress and QNN's own log). If the
lowering raises and those lines show QNN's graph prepare failing, :class:`QnnRefusal` is raised
instead, its first line QNN's own reason (``could not create op: q::ConvLayer_s1.opt``, ``not
sufficiently tiled to fit in TCM. Requires 33554432 bytes``). The refusal is a property of the
graph and the QNN libraries, both in every cache key (the QAIRT build is one of the key's
versions), so it is a :class:`~pytest_qnn_genai.cache.RememberedFailure`: the next test that asks
for the same build is told at once instead of repeating a compile that took 37 minutes at 135M
parameters. Any other error (Python's, executorch's, a killed process) propagates unchanged and is
never remembered. :func:`refusal_reason` reads the same lines from a log file (llama.py's).

Hazard: while the pipe is in place, a write to descriptor 2 blocks if the forwarding thread stops;
the thread only copies bytes and the pipe is restored in a ``finally``, so a lowering that raises
or is interrupted leaves descriptor 2 as it found it.
"""
from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Final

from pytest_qnn_genai.cache import RememberedFailure

QNN_LOG_TAG: Final = "[Qnn ExecuTorch]"
# lines that mean QNN's graph prepare (not Python) failed
PREPARE_FAILED: Final = re.compile(r"Failed to finalize Qnn Graph|graph prepare failed|"
                                   r"Graph prepare failed")
# QNN's own reason, most specific first
REASONS: Final = (re.compile(r"could not create op: \S+"),
                  re.compile(r"not sufficiently tiled to fit in TCM\. Requires \d+ bytes"),
                  re.compile(r"requires 0x[0-9a-f]+ bytes of TCM[^!]*"),
                  re.compile(r"Graph prepare failed during optimization with err: .+"),
                  re.compile(r"Failed to finalize Qnn Graph with error: \d+"))
MAX_KEPT_LINES: Final = 2000


class QnnRefusal(RememberedFailure, RuntimeError):
    """QNN's graph prepare refused the graph (its reason in the first line); remembered."""


def refusal_reason(lines: Iterable[str]) -> str | None:
    """QNN's reason for refusing a graph, from its log lines; None when the lines do not show
    QNN's prepare failing (then the error is someone else's and must not be remembered)."""
    errors = [line for line in lines if QNN_LOG_TAG in line and "ERROR" in line]
    if not any(PREPARE_FAILED.search(line) for line in errors):
        return None
    for pattern in REASONS:
        for line in errors:
            found = pattern.search(line)
            if found:
                return found.group(0)
    return "graph prepare failed"  # QNN said only that (e.g. "RouterX86 graph prepare failed 12")


class _Fd2Tap:
    """Descriptor 2 through a pipe: every byte forwarded, QNN's error lines kept."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        sys.stderr.flush()
        self._saved = os.dup(2)
        read_end, write_end = os.pipe()
        self._read_end = read_end
        os.dup2(write_end, 2)
        os.close(write_end)
        self._thread: threading.Thread | None = threading.Thread(
            target=self._forward, name="qnn-fd2-tap", daemon=True)
        self._thread.start()

    def _forward(self) -> None:
        pending = b""
        while chunk := os.read(self._read_end, 65536):
            os.write(self._saved, chunk)
            *complete, pending = (pending + chunk).split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace")
                if QNN_LOG_TAG in line and "ERROR" in line and len(self.lines) < MAX_KEPT_LINES:
                    self.lines.append(line)
        os.close(self._read_end)

    def close(self) -> None:
        if self._thread is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved, 2)  # the pipe's last write end closes: the thread sees EOF
        self._thread.join()
        self._thread = None
        os.close(self._saved)


@contextmanager
def lowering(what: str) -> Iterator[None]:
    """Run one QNN lowering; QNN refusing the graph at prepare raises :class:`QnnRefusal`
    naming ``what``, the active SDK and QNN's reason."""
    tap = _Fd2Tap()
    try:
        yield
    except Exception as error:
        tap.close()
        reason = refusal_reason(tap.lines)
        if reason is None:
            raise
        sdk = os.path.basename(os.environ.get("QNN_SDK_ROOT", "")) or "the active QNN SDK"
        raise QnnRefusal(f"{what}: QNN ({sdk}) refused the graph at prepare: {reason}") from error
    finally:
        tap.close()
