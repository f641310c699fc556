"""The prebuild process: ``python -m pytest_qnn_genai.prebuild PLAN.json``.

It opens the session's artifact cache and QNN SDK as the tests do (same cache folder, tool
versions, ``--qnn-rebuild`` time, session start, size bound and remote cache: :class:`PrebuildConfig`)
and builds the plan's steps through the same :class:`~pytest_qnn_genai.pipeline.Pipeline` methods
the tests call, so each is an ordinary ``get_or_build`` under the key's lock: a test that needs an
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

import dataclasses
import json
import os
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
from pytest_qnn_genai.prebuild import building
from pytest_qnn_genai.prebuild import plan as p
from pytest_qnn_genai.prebuild.schedule import Outcome, StepBusy, first_line, run_steps
from pytest_qnn_genai.untyped import Json

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.pipeline import Pipeline
    from pytest_qnn_genai.targets import Target

DRAIN = "drain"
EXIT_KILLED = 3  # stopped by end of file on stdin or by its deadline


@dataclass(frozen=True)
class PrebuildConfig:
    """What the process needs to open the session's cache and SDK, and its own bounds."""

    cache_dir: str
    qnn_sdk: str | None
    session_start: float
    rebuild_before: float | None = None
    cache_max_gb: float | None = None
    remote_cache: str | None = None
    slots: int = 2
    deadline_s: float = 4 * 3600.0
    stats_file: str = ""
    log: str = ""
    building_flag: str = ""  # held while the steps run (``building.held``), if set

    def to_dict(self) -> dict[str, Json]:
        return dataclasses.asdict(self)


def write_plan(path: Path, config: PrebuildConfig, steps: Sequence[p.Step]) -> None:
    """The file the process reads (its only argument)."""
    write_text_atomic(path, json.dumps({"config": config.to_dict(),
                                        "steps": [s.to_dict() for s in steps]}, indent=1))


def read_plan(path: Path) -> tuple[PrebuildConfig, list[p.Step]]:
    data = json.loads(Path(path).read_text())
    return PrebuildConfig(**data["config"]), [p.Step.from_dict(s) for s in data["steps"]]


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

    def get_or_build(self, stage: str, inputs: Mapping[str, Json], build: Callable[[Path], object],
                     upstream: Sequence[str] = (), label: str = "") -> CacheEntry:
        (self.root / stage).mkdir(parents=True, exist_ok=True)
        probe = KeyLock(lock_path(self.root / stage, self.key(stage, inputs, upstream)))
        if not probe.acquire(blocking=False):
            raise StepBusy(f"{stage} {label}".rstrip())
        probe.release()  # (a test may take it now: then this waits, as a test would)
        return super().get_or_build(stage, inputs, build, upstream, label)


def open_pipeline(config: PrebuildConfig) -> Pipeline:
    """The session's cache and SDK, opened as the plugin opens them, in a Pipeline."""
    from pytest_qnn_genai.cache.remote import open_remote
    from pytest_qnn_genai.pipeline import Pipeline
    from pytest_qnn_genai.sdk import SdkError, activate, resolve_sdk
    from pytest_qnn_genai.sdk.versions import stack

    sdk = resolve_sdk(config.qnn_sdk, Path(config.cache_dir))
    if sdk is None:
        raise SdkError("no QNN SDK")
    activate(sdk)

    def mark(line: str) -> None:  # its builds' progress, told apart from the tests' own
        progress.stderr_writer(line.replace("[qnn-genai] build ", "[qnn-genai] prebuild ", 1))

    gb = config.cache_max_gb
    cache = ProbingCache(Path(config.cache_dir) / "artifacts", stack(sdk),
                         rebuild_before=config.rebuild_before, progress=mark,
                         max_bytes=None if gb is None else int(gb * 1e9),
                         session_start=config.session_start,
                         remote=None if config.remote_cache is None
                         else open_remote(config.remote_cache))
    return Pipeline(cache)


def _case(name: str) -> ModelCase:
    """A registered case, or one of its declared variants (``stories260k@ar8``)."""
    from pytest_qnn_genai.models import registry

    base, _, variant = name.partition(registry.VARIANT_SEPARATOR)
    case = registry.select([base])[0]
    return case.variant(variant) if variant else case


def execute(pipeline: Pipeline, step: p.Step) -> str:
    """Build ``step``'s entry through the pipeline: ``built``, ``cached`` or ``remembered
    failure`` (a build failure the cache keeps under the key, e.g. genai's: the test recalls it)."""
    from pytest_qnn_genai.cache import RememberedFailure

    builds = pipeline.cache.stats.builds + pipeline.cache.stats.downloaded
    try:
        _build(pipeline, step)
    except RememberedFailure:
        return "remembered failure"
    # (another thread's build may land in between: the word is for the progress line only)
    done = pipeline.cache.stats.builds + pipeline.cache.stats.downloaded
    return "built" if done > builds else "cached"


def _build(pipeline: Pipeline, step: p.Step) -> None:
    """``step``'s entry through the Pipeline method its tests call (see :mod:`.plan`)."""
    from pytest_qnn_genai.flows import registry as flows
    from pytest_qnn_genai.targets import Target, soc

    target = Target(soc(step.soc), step.backend) if step.soc else None
    if step.kind == p.RUNNERS:
        pipeline.runners_entry(Path(step.arg))
    elif step.kind == p.SMOKE and target is not None:
        pipeline.smoke_block(target, step.arg)
    else:
        case = _case(step.case)
        if step.kind == p.QUANTIZE and target is not None:
            pipeline.qdq_entry(case, target)
        elif step.kind == p.FLOW and target is not None:
            pipeline.flow_entry(flows.get(step.arg), case, target)
        elif step.kind == p.LLM_CONFIG:
            pipeline.decoder_model_version(case)
        else:
            _references(pipeline, step, case, target)


def _references(pipeline: Pipeline, step: p.Step, case: ModelCase, target: Target | None) -> None:
    """The gate's references, on the tokens its fixtures use: the eval prompt as every run
    encodes it, the fp32 continuation of it (suites/gate/conftest.py,
    test_transformers_reference.py); the held-out windows' logits (suites/conftest.py)."""
    from pytest_qnn_genai.checks.perplexity import all_windows, heldout_documents
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

    if step.kind in (p.HELDOUT_FP32, p.HELDOUT_QDQ):
        for w in all_windows(heldout_documents(case)):
            if step.kind == p.HELDOUT_FP32:
                pipeline.fp32_logits(case, list(w.context), list(w.continuation))
            elif target is not None:
                pipeline.qdq_logits(case, target, list(w.context), list(w.continuation))
        return
    prompt = encode(load_tokenizer(case.path("tokenizer_model")), case.eval_prompt)
    fp32 = pipeline.fp32_reference(case, prompt)
    if step.kind == p.QDQ_LOGITS and target is not None:
        pipeline.qdq_logits(case, target, fp32.prompt_tokens, fp32.tokens)
    elif step.kind == p.TRANSFORMERS_LOGITS:
        pipeline.transformers_logits(case, list(fp32.prompt_tokens) + list(fp32.tokens[:-1]))


def _write_stats(cache: ArtifactCache, path: str) -> None:
    """The cache's statistics less its hits and recalled failures (the tests count those)."""
    if path:
        stats = dict(cache.stats.to_dict(), hits=0, failures_recalled=0)
        write_text_atomic(Path(path), json.dumps(stats))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pytest_qnn_genai.prebuild PLAN.json", file=sys.stderr)
        return 2
    config, steps = read_plan(Path(args[0]))
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
            steps, lambda step: execute(pipeline, step), p.dependencies, slots=config.slots,
            draining=draining, report=progress.stderr_writer,
            on_done=lambda: _write_stats(pipeline.cache, config.stats_file))
    _write_stats(pipeline.cache, config.stats_file)
    left = len(steps) - len(outcome.results)
    progress.stderr_writer(
        f"[qnn-genai] prebuild: {outcome.summary()}"
        + (f", {left} not started (the session ended first)" if left else "")
        + f" in {time.monotonic() - start:.0f}s")
    return 0
