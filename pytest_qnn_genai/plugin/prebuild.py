"""The plugin's side of building ahead (:mod:`pytest_qnn_genai.prebuild`).

Once collection is final (after ``-k``/``-m`` deselection and the skip marks), the process that
owns the prebuild (the only process without xdist; worker ``gw0`` under xdist, since the
controller collects nothing) describes the selected items as plan requests and starts the
prebuild process for the plan; nothing starts under ``--collect-only``, with
``--no-qnn-prebuild`` or for an empty plan. At the session's end it is stopped: at once when no
test can need it any more (no xdist, one worker, an interrupted or failed-fast session), else it
builds on until every other worker has ended: ``gw0`` may run out of tests while another worker
has tests to come that need entries still planned (stopped there, it leaves a long compile to a
test at the end of a cold gate, one core idle). Each other worker says it has ended with a
file in a folder named by xdist's ``testrunuid`` (:func:`worker_ended`), which ``gw0`` watches
and removes. Its build statistics join this process's, so the summary counts its builds.
A measurement (a ``perf`` item) first waits until the prebuild has built its plan
(:func:`wait_for_builds`, bounded): its rates are not measured beside the builds.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pytest_qnn_genai import progress
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.products import Need, Wants
from pytest_qnn_genai.plugin import marks
from pytest_qnn_genai.prebuild import building, launch
from pytest_qnn_genai.prebuild.plan import Request, plan
from pytest_qnn_genai.prebuild.process import PrebuildConfig
from pytest_qnn_genai.settings import Settings

OWNER_WORKER = "gw0"
# At most this many builds at once: one in-process build plus subprocess builds (llama.py, cmake),
# each about one core and a few GB; the tests run beside them.
MAX_SLOTS = 4
# A measurement waits at most this long for the prebuild's builds to end (``building``).
QUIET_TIMEOUT_S = 1800.0


def item_wants(item: pytest.Item) -> tuple[Wants, ...]:
    """What the fixtures of ``item``'s closure declare they get (``products.needs``), in the
    order pytest resolves them (an overriding fixture and the one it overrides both count)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs if info is not None else {}
    found: dict[Wants, None] = {}
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in defs.get(name, ()):
            found.update(dict.fromkeys(products.declared(fixturedef.func)))
    return tuple(found)


def requests(items: Sequence[pytest.Item]) -> Iterator[Request]:
    """The selected items that will run, as the plan sees them."""
    for item in items:
        if item.get_closest_marker("skip"):
            continue
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        case = params.get("qnn_case")
        pair = params.get("qnn_ab_pair")
        yield Request(item_wants(item), case if isinstance(case, ModelCase) else None,
                      marks.item_target(item),
                      tuple(pair) if isinstance(pair, tuple) and len(pair) == 2 else None)


def session_plan(settings: Settings, items: Sequence[pytest.Item]) -> list[Need]:
    """What the selected items will ask the cache for, in the order to build it ahead."""
    runners_src = None if (settings.runner and not settings.devices) else settings.executorch_src
    return plan(requests(items), runners_src)


def _worker_input(config: pytest.Config) -> dict[str, object]:
    """What xdist gave this worker (empty without xdist)."""
    return getattr(config, "workerinput", None) or {}


def ended_folder(config: pytest.Config) -> Path | None:
    """Where this run's xdist workers say they have ended (None without xdist)."""
    run = _worker_input(config).get("testrunuid")
    return None if run is None else Path(tempfile.gettempdir()) / f"qnn-genai-ended-{run}"


def building_flag(config: pytest.Config) -> Path:
    """The flag the run's prebuild holds while it builds (the same path in every worker)."""
    run = _worker_input(config).get("testrunuid") or f"pid{os.getpid()}"
    return Path(tempfile.gettempdir()) / f"qnn-genai-building-{run}"


def wait_for_builds(config: pytest.Config) -> float:
    """Before a measurement: wait until the run's prebuild has built its plan (bounded)."""
    return building.wait_done(building_flag(config), QUIET_TIMEOUT_S, progress.stderr_writer)


def worker_ended(config: pytest.Config) -> None:
    """Say that this worker has ended, if the owner of the prebuild waits for it (its folder
    exists while the prebuild runs)."""
    folder = ended_folder(config)
    worker = _worker_input(config).get("workerid")
    if folder is not None and folder.is_dir() and worker != OWNER_WORKER:
        try:
            (folder / str(worker)).touch()
        except OSError:
            pass  # the owner removed the folder meanwhile: it waits for nobody any more


def others_ended(config: pytest.Config, workers: int) -> bool:
    """True once every other worker has said it has ended."""
    folder = ended_folder(config)
    return folder is None or len(list(folder.glob("gw*"))) >= workers - 1


def owns_prebuild(config: pytest.Config) -> bool:
    """True for the process that starts the prebuild: no xdist, or worker ``gw0``."""
    worker = _worker_input(config).get("workerid")
    return worker is None or worker == OWNER_WORKER


def start(config: pytest.Config, settings: Settings, items: Sequence[pytest.Item], *,
          session_start: float, rebuild_before: float | None) -> launch.PrebuildProcess | None:
    """Start the session's prebuild process for ``items``, or None (nothing to start)."""
    if not settings.prebuild or config.option.collectonly or not owns_prebuild(config):
        return None
    needs = session_plan(settings, items)
    if not needs:
        return None
    cores = len(os.sched_getaffinity(0))
    try:
        process = launch.start(needs, PrebuildConfig(
            settings, session_start, rebuild_before, tuple(products.registered_modules()),
            slots=max(1, min(cores, MAX_SLOTS)), building_flag=str(building_flag(config))),
            terminal_fd=progress.terminal_fd())
    except OSError as e:  # building ahead is an optimisation: the tests build what they need
        progress.stderr_writer(f"[qnn-genai] prebuild: cannot start ({e}); the tests build "
                               "what they need")
        return None
    atexit.register(process.stop)  # e.g. an internal error: never outlive this process
    folder = ended_folder(config)
    if folder is not None:
        folder.mkdir(exist_ok=True)
        atexit.register(shutil.rmtree, folder, True)
    return process


def stop(config: pytest.Config, process: launch.PrebuildProcess | None, workers: int | None,
         stopped: bool) -> dict[str, object]:
    """End the prebuild (building on while another worker may still need it) and return its
    build statistics (the session adds them to what it reports); in another worker, say it has
    ended."""
    if process is None:
        worker_ended(config)
        return {}
    if workers is not None and workers > 1 and not stopped:
        stats = process.finish(lambda: others_ended(config, workers))
    else:
        stats = process.stop()
    folder = ended_folder(config)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
    building_flag(config).unlink(missing_ok=True)  # left behind when it was stopped mid-build
    return stats
