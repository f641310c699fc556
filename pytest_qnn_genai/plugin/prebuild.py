"""The plugin's side of building ahead (:mod:`pytest_qnn_genai.prebuild`).

Once collection is final (after ``-k``/``-m`` deselection and the skip marks), the process that
owns the prebuild (the only process without xdist; worker ``gw0`` under xdist, since the
controller collects nothing) describes the selected items as plan requests and starts the
prebuild process for the plan; nothing starts under ``--collect-only``, with
``--no-qnn-prebuild`` or for an empty plan. At the session's end it is stopped: at once when no
test can need it any more (no xdist, one worker, an interrupted or failed-fast session), else
drained (``gw0`` may end while another worker waits on one of its builds). Its build statistics
join this process's, so the summary counts its builds.
"""
from __future__ import annotations

import atexit
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai import progress
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.plugin import marks
from pytest_qnn_genai.prebuild import launch
from pytest_qnn_genai.prebuild.plan import Request, Step, plan
from pytest_qnn_genai.prebuild.process import PrebuildConfig

if TYPE_CHECKING:
    from pytest_qnn_genai.plugin.session import QnnSession

OWNER_WORKER = "gw0"
# At most this many builds at once: one in-process build plus subprocess builds (llama.py, cmake),
# each about one core and a few GB; the tests run beside them.
MAX_SLOTS = 4


def requests(items: Sequence[pytest.Item]) -> Iterator[Request]:
    """The selected items that will run, as the plan sees them."""
    for item in items:
        if item.get_closest_marker("skip"):
            continue
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        case = params.get("qnn_case")
        pair = params.get("qnn_ab_pair")
        yield Request(frozenset(getattr(item, "fixturenames", ())),
                      case if isinstance(case, ModelCase) else None, marks.item_target(item),
                      tuple(pair) if isinstance(pair, tuple) and len(pair) == 2 else None)


def session_plan(session: QnnSession, items: Sequence[pytest.Item]) -> list[Step]:
    """What the selected items will ask the cache for, in the order to build it ahead."""
    s = session.settings
    runners_src = None if (s.runner and not s.devices) else s.executorch_src
    return plan(requests(items), runners_src)


def owns_prebuild(config: pytest.Config) -> bool:
    """True for the process that starts the prebuild: no xdist, or worker ``gw0``."""
    worker_input = getattr(config, "workerinput", None)
    return worker_input is None or worker_input.get("workerid") == OWNER_WORKER


def start(session: QnnSession, items: Sequence[pytest.Item]) -> launch.PrebuildProcess | None:
    """Start the session's prebuild process for ``items``, or None (nothing to start)."""
    config = session.config
    if (not session.settings.prebuild or config.option.collectonly
            or not owns_prebuild(config)):
        return None
    steps = session_plan(session, items)
    if not steps:
        return None
    s = session.settings
    cores = len(os.sched_getaffinity(0))
    try:
        process = launch.start(steps, PrebuildConfig(
            cache_dir=str(s.cache_dir), qnn_sdk=s.qnn_sdk, session_start=session.started,
            rebuild_before=session.rebuild_before, cache_max_gb=s.cache_max_gb,
            remote_cache=s.remote_cache, slots=max(1, min(cores, MAX_SLOTS))),
            terminal_fd=progress.terminal_fd())
    except OSError as e:  # building ahead is an optimisation: the tests build what they need
        progress.stderr_writer(f"[qnn-genai] prebuild: cannot start ({e}); the tests build "
                               "what they need")
        return None
    atexit.register(process.stop)  # e.g. an internal error: never outlive this process
    return process


def stop(session: QnnSession, process: launch.PrebuildProcess | None, stopped: bool) -> None:
    """End the prebuild (drained when another worker may still wait on it) and add its build
    statistics to this process's (``session.worker_stats``: what this process reports)."""
    if process is None:
        return
    others_may_wait = session.workers is not None and session.workers > 1 and not stopped
    stats = process.drain() if others_may_wait else process.stop()
    session.worker_stats.merge(stats)

