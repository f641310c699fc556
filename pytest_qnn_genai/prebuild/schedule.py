"""Run planned steps in dependency order on a bounded number of threads.

Contract of :func:`run_steps`:

- a step starts only after every dependency in the plan finished without error; a step whose
  dependency failed is not started (``skipped``): the test that needs it builds it and reports;
- at most ``slots`` steps run at once, and at most one that builds in this process (the
  interpreter is shared: two in-process builds on threads only take turns), so a subprocess build
  (llama.py, cmake) overlaps the in-process one;
- the first ready step in plan order starts first (the plan: long builds first, then first need);
- a step's exception is its outcome (``failed``), reported in one line; it never stops the others;
- once ``draining`` is set no step starts; the running ones finish and the call returns;
- a step whose ``execute`` raises :class:`StepBusy` (another process is building its entry, e.g.
  a test that asked first) goes back to the queue and is tried again ``retry_s`` later: its lane
  builds the next ready step meanwhile instead of waiting on that build.

Nothing here knows what a step builds: ``execute(step)`` does, and returns a short outcome word
(``built``, ``cached``, ...).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_qnn_genai.pipeline.products import Need
from pytest_qnn_genai.progress import Writer

FAILED = "failed"
SKIPPED = "skipped"
RETRY_S = 2.0


class StepBusy(Exception):
    """The step cannot start now: another process is building its entry (try it later)."""


@dataclass
class Outcome:
    """What became of each step (a step never started is absent) and the seconds it took."""

    results: dict[Need, str] = field(default_factory=dict)
    seconds: dict[Need, float] = field(default_factory=dict)

    def count(self, word: str) -> int:
        return sum(1 for r in self.results.values() if r == word)

    def summary(self) -> str:
        """``3 built, 1 cached, 1 failed`` (outcomes in first-seen order)."""
        words = dict.fromkeys(self.results.values())
        return ", ".join(f"{self.count(w)} {w}" for w in words) or "nothing done"


def first_line(error: BaseException) -> str:
    """``Type: first line of the message`` (a report in one line)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def run_steps(steps: Sequence[Need], execute: Callable[[Need], str],
              dependencies: Callable[[Need], Sequence[Need]], *, slots: int,
              draining: threading.Event, report: Writer,
              on_done: Callable[[], None] | None = None, retry_s: float = RETRY_S) -> Outcome:
    """Run ``steps`` (see the module contract); ``on_done`` is called after each step ends."""
    outcome = Outcome()
    planned = set(steps)
    deps: Mapping[Need, list[Need]] = {s: [d for d in dependencies(s) if d in planned]
                                       for s in steps}
    pending = list(steps)
    order = {s: i for i, s in enumerate(steps)}
    not_before: dict[Need, float] = {}  # busy steps: when to try again
    running: set[Need] = set()
    changed = threading.Condition()

    def work(step: Need) -> None:
        start = time.monotonic()
        try:
            result = execute(step)
        except StepBusy:
            with changed:
                running.discard(step)
                pending.append(step)  # (ready steps are taken in plan order)
                not_before[step] = time.monotonic() + retry_s
                changed.notify_all()
            return
        except Exception as e:  # noqa: BLE001 - any failure is this step's outcome, reported
            result = FAILED
            report(f"[qnn-genai] prebuild {step.label}: failed ({first_line(e)}); the test that "
                   "needs it builds it and reports its error")
        with changed:
            outcome.results[step] = result
            outcome.seconds[step] = time.monotonic() - start
            running.discard(step)
            changed.notify_all()
        if on_done is not None:
            on_done()

    def next_ready() -> Need | None:
        in_process_busy = any(not s.in_subprocess for s in running)
        now = time.monotonic()
        for step in sorted(pending, key=order.__getitem__):
            if not_before.get(step, 0.0) > now:
                continue
            if any(outcome.results.get(d) in (FAILED, SKIPPED) for d in deps[step]):
                return step  # started only to be marked skipped below
            if any(d not in outcome.results for d in deps[step]):
                continue
            if in_process_busy and not step.in_subprocess:
                continue
            return step
        return None

    with changed:
        while (pending and not draining.is_set()) or running:
            step = None if draining.is_set() or len(running) >= max(1, slots) else next_ready()
            if step is None:
                changed.wait(timeout=min(1.0, retry_s))  # a step ended, draining, a retry due
                continue
            pending.remove(step)
            if any(outcome.results.get(d) in (FAILED, SKIPPED) for d in deps[step]):
                outcome.results[step] = SKIPPED
                continue
            running.add(step)
            threading.Thread(target=work, args=(step,), name=f"prebuild {step.label}",
                             daemon=True).start()
    return outcome
