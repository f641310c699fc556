"""The prebuild scheduler: dependency order, one in-process build beside subprocess builds, a
failure that stops nothing else, a busy entry tried later, draining."""
from __future__ import annotations

import threading
import time

from pytest_qnn_genai.pipeline import products as p
from pytest_qnn_genai.pipeline.products import Need
from pytest_qnn_genai.prebuild.plan import dependencies
from pytest_qnn_genai.prebuild.schedule import FAILED, SKIPPED, StepBusy, run_steps

Q = Need(p.QUANTIZE, "a", "SM8650", "htp")
NEW = Need("new", "a", "SM8650", "htp")
LEGACY = Need("legacy", "a", "SM8650", "htp")
LEGACY_B = Need("legacy", "b", "SM8650", "htp")
SMOKE = Need(p.SMOKE, soc="SM8650", backend="htp", arg="fp16")


class Builds:
    """Records when each step ran and how many ran at once (in process / in all)."""

    def __init__(self, seconds: float = 0.05, fail: tuple[Need, ...] = ()) -> None:
        self.seconds, self.fail = seconds, fail
        self.started: list[Need] = []
        self.finished: list[Need] = []
        self.running: set[Need] = set()
        self.max_in_process = self.max_total = 0
        self.overlapped: set[tuple[Need, Need]] = set()
        self.lock = threading.Lock()

    def __call__(self, step: Need) -> str:
        with self.lock:
            self.started.append(step)
            self.overlapped |= {(step, other) for other in self.running}
            self.running.add(step)
            self.max_total = max(self.max_total, len(self.running))
            self.max_in_process = max(self.max_in_process,
                                      sum(not s.in_subprocess for s in self.running))
        time.sleep(self.seconds)
        with self.lock:
            self.running.discard(step)
            self.finished.append(step)
        if step in self.fail:
            raise RuntimeError(f"{step.label} broke\nsecond line")
        return "built"


def run(steps, builds, slots=2, draining=None, lines=None):  # noqa: ANN001
    return run_steps(steps, builds, dependencies, slots=slots,
                     draining=draining or threading.Event(),
                     report=(lines if lines is not None else []).append, retry_s=0.05)


def test_dependencies_first_and_one_in_process_build_beside_subprocess_ones() -> None:
    builds = Builds(seconds=0.2)
    outcome = run([Q, NEW, LEGACY, SMOKE, LEGACY_B], builds, slots=3)
    assert outcome.results == dict.fromkeys([Q, NEW, LEGACY, SMOKE, LEGACY_B], "built")
    assert builds.finished.index(Q) < builds.started.index(NEW)
    assert builds.max_in_process == 1  # quantize, compile and the smoke block take turns
    assert builds.max_total == 3  # two llama.py builds beside the in-process one
    assert (LEGACY, Q) in builds.overlapped or (Q, LEGACY) in builds.overlapped


def test_slots_bound_everything() -> None:
    builds = Builds(seconds=0.1)
    run([LEGACY, LEGACY_B, Q], builds, slots=1)
    assert builds.max_total == 1


def test_a_failure_is_one_line_skips_its_dependents_and_stops_nothing_else() -> None:
    builds, lines = Builds(fail=(Q,)), []
    outcome = run([Q, NEW, LEGACY, SMOKE], builds, lines=lines)
    assert outcome.results == {Q: FAILED, NEW: SKIPPED, LEGACY: "built", SMOKE: "built"}
    assert NEW not in builds.started
    assert lines == ["[qnn-genai] prebuild quantize a SM8650-htp: failed (RuntimeError: quantize a "
                     "SM8650-htp broke); the test that needs it builds it and reports its error"]
    assert set(outcome.summary().split(", ")) == {"1 failed", "1 skipped", "2 built"}


def test_a_busy_entry_is_tried_later_while_the_lane_builds_the_next_step() -> None:
    builds = Builds()
    busy = {Q: 2}  # a test holds quantize's lock for the first two tries

    def execute(step: Need) -> str:
        if busy.get(step, 0) > 0:
            busy[step] -= 1
            raise StepBusy(step.label)
        return builds(step)

    outcome = run([Q, NEW, SMOKE], execute)
    assert outcome.results == dict.fromkeys([Q, NEW, SMOKE], "built")
    assert builds.started == [SMOKE, Q, NEW]  # the smoke block did not wait for quantize


def test_draining_starts_nothing_more_and_lets_the_running_step_finish() -> None:
    draining = threading.Event()
    builds = Builds(seconds=0.3)

    def execute(step: Need) -> str:
        draining.set()  # the session ends while the first step runs
        return builds(step)

    outcome = run([Q, NEW, SMOKE], execute, draining=draining)
    assert outcome.results == {Q: "built"} and builds.finished == [Q]
