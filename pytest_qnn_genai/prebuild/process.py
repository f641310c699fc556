"""The prebuild process: ``python -m pytest_qnn_genai.prebuild PLAN``.

It opens the session's artifact cache and QNN SDK as the tests do (from the session's own
:class:`~pytest_qnn_genai.settings.Settings`, with its start and ``--qnn-rebuild`` times:
:class:`PrebuildConfig`) and builds each planned need with one call, its product's ``make``
(:mod:`pytest_qnn_genai.pipeline.products`) through the same
:class:`~pytest_qnn_genai.pipeline.Pipeline` the tests use, so each entry is an ordinary
``get_or_build`` under the key's lock: a test that needs an
entry being built here waits on that lock and then finds a hit; an entry a test is building is a
hit here once it is done. Steps run on :func:`~.schedule.run_steps` (one in-process build at a
time, subprocess builds beside it, ``slots`` in all).

Its lifetime is the session's, told through its stdin (a pipe from the session):

- a line ``drain``: start nothing more, finish the running steps, exit;
- end of file (the session closed the pipe, or its process died and the kernel closed it): kill
  every child's process group (llama.py, cmake: each runs in its own group) and exit at once;
- ``deadline_s`` after it started it does the same on its own.

Build output goes to ``log`` (the tests' builds keep theirs in pytest's capture); progress lines
go to the terminal, marked ``prebuild``. After each step the cache statistics of its builds are
written to ``stats_file`` (hits are left out: the tests count their own), which the session adds
to its summary.
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai import progress
from pytest_qnn_genai.cache import ArtifactCache, CacheEntry
from pytest_qnn_genai.cache.layout import lock_path
from pytest_qnn_genai.cache.lock import KeyLock
from pytest_qnn_genai.files import write_text_atomic
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.products import Need
from pytest_qnn_genai.prebuild import building
from pytest_qnn_genai.prebuild.plan import dependencies
from pytest_qnn_genai.prebuild.schedule import Outcome, StepBusy, first_line, run_steps
from pytest_qnn_genai.settings import Settings
from pytest_qnn_genai.stages import gguf_import

if TYPE_CHECKING:
    from pytest_qnn_genai.pipeline import Pipeline

DRAIN = "drain"
EXIT_KILLED = 3  # stopped by end of file on stdin or by its deadline


@dataclass(frozen=True)
class PrebuildConfig:
    """The session's settings (the one object the tests read), the times its cache keys and
    housekeeping agree on, the modules that register products from outside the package, and the
    process's own bounds."""

    settings: Settings
    session_start: float
    rebuild_before: float | None = None
    product_modules: tuple[str, ...] = ()
    slots: int = 2
    deadline_s: float = 4 * 3600.0
    stats_file: str = ""
    log: str = ""
    building_flag: str = ""  # held while the steps run (``building.held``), if set


def write_plan(path: Path, config: PrebuildConfig, needs: Sequence[Need]) -> None:
    """The file the process reads (its only argument): a pickle, read only by the child this
    session starts from it, so the settings arrive whole."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(pickle.dumps((config, [n.to_dict() for n in needs])))
    tmp.replace(path)


def read_plan(path: Path) -> tuple[PrebuildConfig, list[Need]]:
    config, needs = pickle.loads(Path(path).read_bytes())  # noqa: S301 - our own session's file
    if not isinstance(config, PrebuildConfig):
        raise ValueError(f"{path}: not a prebuild plan")
    return config, [Need.from_dict(n) for n in needs]


# -- stopping ----------------------------------------------------------------------------------
def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def kill_children() -> int:
    """SIGKILL each child of this process with its process group (a llama.py or cmake build
    leads its own group: nothing it started outlives it); how many there were."""
    killed = 0
    for child in children(os.getpid()):
        try:
            if os.getpgid(child) == child:
                os.killpg(child, signal.SIGKILL)
            else:
                os.kill(child, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass
    return killed


def _stop_now(why: str, quiet: bool = False) -> None:
    """Kill the builds' subprocesses and exit at once (an in-process build dies with us; its
    temporary folder is swept by the next run). Said on the terminal unless ``quiet`` and no
    subprocess build was running."""
    if kill_children() or not quiet:
        progress.stderr_writer(f"[qnn-genai] prebuild: stopped ({why})")
    os._exit(EXIT_KILLED)


def _watch_session(draining: threading.Event) -> None:
    """Read the session's pipe: ``drain`` sets ``draining``; end of file stops everything."""
    for line in sys.stdin:
        if line.strip() == DRAIN:
            draining.set()
    _stop_now("the session ended", quiet=True)


def _watch_deadline(deadline_s: float) -> None:
    time.sleep(deadline_s)
    _stop_now(f"deadline of {deadline_s:.0f}s")


# -- building ----------------------------------------------------------------------------------
class ProbingCache(ArtifactCache):
    """The artifact cache, except that ``get_or_build`` raises :class:`StepBusy` instead of
    waiting when another process holds the key's lock (it is building the entry: the step is
    tried again later, and this lane builds something else meanwhile)."""

    def get_or_build(self, stage: str, inputs: Mapping[str, object], build: Callable[[Path], object],
                     upstream: Sequence[str] = (), label: str = "") -> CacheEntry:
        (self.root / stage).mkdir(parents=True, exist_ok=True)
        probe = KeyLock(lock_path(self.root / stage, self.key(stage, inputs, upstream)))
        if not probe.acquire(blocking=False):
            raise StepBusy(f"{stage} {label}".rstrip())
        probe.release()  # (a test may take it now: then this waits, as a test would)
        return super().get_or_build(stage, inputs, build, upstream, label)


def open_pipeline(config: PrebuildConfig) -> Pipeline:
    """The session's cache and SDK, opened as the plugin opens them, in a Pipeline."""
    from pytest_qnn_genai.cache.configured import open_cache
    from pytest_qnn_genai.pipeline import Pipeline
    from pytest_qnn_genai.sdk import SdkError, activate, resolve_sdk
    from pytest_qnn_genai.sdk.versions import stack

    s = config.settings
    sdk = resolve_sdk(s.qnn_sdk, s.cache_dir)
    if sdk is None:
        raise SdkError("no QNN SDK")
    activate(sdk)

    def mark(line: str) -> None:  # its builds' progress, told apart from the tests' own
        progress.stderr_writer(line.replace("[qnn-genai] build ", "[qnn-genai] prebuild ", 1))

    pipeline = Pipeline(open_cache(s, stack(sdk), session_start=config.session_start,
                                   rebuild_before=config.rebuild_before, progress=mark,
                                   cache_class=ProbingCache))
    gguf_import.install(lambda: pipeline.cache)  # a GGUF case's files, as the session's
    return pipeline


def execute(pipeline: Pipeline, need: Need, case_dirs: Sequence[Path] = ()) -> str:
    """Build ``need``'s entries through its product's ``make`` (the call its fixture's test
    makes): ``built``, ``cached`` or ``remembered failure`` (a build failure the cache keeps
    under the key, e.g. genai's: the test recalls it)."""
    from pytest_qnn_genai.cache import RememberedFailure

    builds = pipeline.cache.stats.builds + pipeline.cache.stats.downloaded
    try:
        pipeline.make_need(products.resolve(need, case_dirs))
    except RememberedFailure:
        return "remembered failure"
    # (another thread's build may land in between: the word is for the progress line only)
    done = pipeline.cache.stats.builds + pipeline.cache.stats.downloaded
    return "built" if done > builds else "cached"


def _write_stats(cache: ArtifactCache, path: str) -> None:
    """The cache's statistics less its hits and recalled failures (the tests count those)."""
    if path:
        stats = dict(cache.stats.to_dict(), hits=0, failures_recalled=0)
        write_text_atomic(Path(path), json.dumps(stats))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pytest_qnn_genai.prebuild PLAN", file=sys.stderr)
        return 2
    config, steps = read_plan(Path(args[0]))
    products.import_modules(config.product_modules)
    progress.remember_terminal()  # the session's terminal, before build output is sent away
    if config.log:
        log = os.open(config.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    signal.signal(signal.SIGTERM, lambda *_: _stop_now("SIGTERM"))
    draining = threading.Event()
    threading.Thread(target=_watch_session, args=(draining,), daemon=True).start()
    threading.Thread(target=_watch_deadline, args=(config.deadline_s,), daemon=True).start()
    start = time.monotonic()
    subprocess_steps = sum(s.in_subprocess for s in steps)
    progress.stderr_writer(
        f"[qnn-genai] prebuild: {len(steps)} cache entries the selected tests need "
        f"({subprocess_steps} built in subprocesses), up to {config.slots} at a time")
    try:
        pipeline = open_pipeline(config)
    except Exception as e:  # noqa: BLE001 - said in one line: the tests build what they need
        progress.stderr_writer(f"[qnn-genai] prebuild: cannot start ({first_line(e)}); the "
                               "tests build what they need")
        return 1
    flag = building.held(Path(config.building_flag)) if config.building_flag else nullcontext()
    with flag:
        outcome: Outcome = run_steps(
            steps, lambda need: execute(pipeline, need, config.settings.case_dirs),
            dependencies, slots=config.slots,
            draining=draining, report=progress.stderr_writer,
            on_done=lambda: _write_stats(pipeline.cache, config.stats_file))
    _write_stats(pipeline.cache, config.stats_file)
    left = len(steps) - len(outcome.results)
    progress.stderr_writer(
        f"[qnn-genai] prebuild: {outcome.summary()}"
        + (f", {left} not started (the session ended first)" if left else "")
        + f" in {time.monotonic() - start:.0f}s")
    return 0
