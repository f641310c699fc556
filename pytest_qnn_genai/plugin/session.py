"""The plugin's state for one pytest process, under one stash key, with one xdist payload.

:class:`QnnSession` owns the resolved settings, the QNN SDK, the artifact cache, the parity table,
the run's records and the report; the hooks in :mod:`pytest_qnn_genai.plugin` only call it. Under
pytest-xdist each worker has its own session; at the end a worker ships one payload
(:meth:`QnnSession.worker_payload`: cache statistics, parity rows, records) which the controller
merges (:meth:`QnnSession.merge_worker`) before it writes the summary and the report
(:mod:`pytest_qnn_genai.plugin.summary`, from the plugin's hook).

Configure-time problems (bad option, unknown model, missing SDK, bad ``--device``, damaged perf
golden file, a machine or torch off the pinned numeric path) are one ``pytest.UsageError`` line
each.
"""
from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pytest

from pytest_qnn_genai import cpu, isa, threads
from pytest_qnn_genai.cache import ArtifactCache, CacheStats
from pytest_qnn_genai.cache.configured import open_cache
from pytest_qnn_genai.checks.parity import ParityTable
from pytest_qnn_genai.figures import FAIL, problem
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.plugin import marks, options, order, prebuild
from pytest_qnn_genai.report.results import Header, Record, RecordDict, ResultsFile, ResultsFileError
from pytest_qnn_genai.sdk import QnnSdk, SdkError, activate, resolve_sdk
from pytest_qnn_genai.sdk.versions import dist_version, stack
from pytest_qnn_genai.shards import Selection, SelectionDict
from pytest_qnn_genai.stages import gguf_import

if TYPE_CHECKING:
    from pytest_qnn_genai.prebuild.launch import PrebuildProcess
    from pytest_qnn_genai.report.diff import FigureDiff
    from pytest_qnn_genai.targets import Target

PAYLOAD = "qnn_genai"  # the key of this plugin's xdist worker output


class WorkerPayload(TypedDict):
    """What a worker ships to the controller (through xdist's ``workeroutput``)."""

    cache_stats: dict[str, object]  # CacheStats.to_dict()
    parity_rows: list[dict[str, str]]
    records: list[RecordDict]
    shard: SelectionDict | None


REBUILD_BEFORE = "qnn_rebuild_before"  # the controller's rebuild time, in workerinput
SESSION_START = "qnn_session_start"  # the controller's start: no worker evicts what others use


class QnnSession:
    """Everything the plugin knows during one pytest process."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = options.resolve(config.getoption, config.getini, config.rootpath)
        try:  # every build and reference computes on the one path the records were measured on
            isa.check()
        except isa.IsaError as e:
            raise pytest.UsageError(f"pytest-qnn-genai: {e}") from None
        try:
            cases = registry.select(list(self.settings.models), self.settings.case_dirs,
                                    nightly=self.settings.nightly)
        except registry.ModelCaseError as e:
            flags = "--models/--qnn-cases" if self.settings.case_dirs else "--models"
            raise pytest.UsageError(f"{flags}: {e}") from None
        options.check_ab_pairs(self.settings.ab_pairs,
                               registry.available(self.settings.case_dirs).values())
        options.check_x86_runner(self.settings)
        if self.settings.shard is not None or len(cases) < len(
                registry.select([], self.settings.case_dirs, nightly=self.settings.nightly)):
            # a share of the cases: the committed snapshots of the others go unused, which
            # syrupy fails a run for (its selection sees the tests, not their parameters)
            config.option.warn_unused_snapshots = True
        try:  # cheap checks now; the emulator SDK is built only when a test needs QNN
            self._sdk: QnnSdk | None = resolve_sdk(self.settings.qnn_sdk,
                                                   self.settings.cache_dir, provision=False)
        except SdkError as e:
            raise pytest.UsageError(str(e)) from None
        worker_input = getattr(config, "workerinput", None)
        self.is_worker = worker_input is not None
        self.started: float = (worker_input or {}).get(SESSION_START, time.time())
        self.rebuild_before: float | None = None
        if self.settings.rebuild:
            self.rebuild_before = (worker_input or {}).get(REBUILD_BEFORE, self.started)
        self.workers: int | None = _xdist_workers(config)
        self._cache: ArtifactCache | None = None
        gguf_import.install(lambda: self.cache)  # a case naming a GGUF imports it through it
        self._sdk_active = False
        self.worker_stats = CacheStats()  # merged from xdist workers (controller)
        self.parity = ParityTable()
        self._results: ResultsFile | None = None
        self.baseline: ResultsFile | None = None
        if self.settings.compare_to is not None and not self.is_worker:
            from pytest_qnn_genai.report.write import load_baseline

            try:
                self.baseline = load_baseline(self.settings.compare_to)
            except ResultsFileError as e:
                raise pytest.UsageError(f"--qnn-compare-to: {e}") from None
        # (report folder, files written, diffs against the baseline), once the run has ended
        self.report: tuple[Path | None, list[Path], list[FigureDiff]] | None = None
        self.devices_checked = False
        self.shard: Selection | None = None  # --qnn-shard: what this shard took (xdist: merged)
        self.prebuild: PrebuildProcess | None = None  # builds started ahead (plugin/prebuild.py)
        if self.workers and not self.is_worker:  # xdist workers cannot report a usage error:
            self.require_sdk()                   # the controller checks now (it collects nothing)
            if self.settings.devices:
                self.check_devices()

    # -- shared resources ---------------------------------------------------------------------
    @property
    def sdk(self) -> QnnSdk:
        """The QNN SDK, provisioned on first use (the emulator SDK's adapter is compiled then)."""
        if self._sdk is None:
            self._sdk = resolve_sdk(self.settings.qnn_sdk, self.settings.cache_dir)
        if self._sdk is None:
            raise SdkError("no QNN SDK: pass --qnn-sdk, set QNN_SDK_ROOT, or install "
                           "onnxruntime-qnn for the emulator SDK")
        return self._sdk

    @property
    def recorded(self) -> bool:
        """Whether any test recorded figures (without making the results file)."""
        return self._results is not None and bool(self._results.records)

    @property
    def results(self) -> ResultsFile:
        """This run's records (their header names the tool stack, so made on first use)."""
        if self._results is None:
            s = self.settings
            self._results = ResultsFile(Header.collect(
                [x.name for x in s.socs], s.backend, list(s.devices), stack(self.sdk),
                self.config.rootpath))
        return self._results

    def active_sdk(self) -> QnnSdk:
        """The QNN SDK, loaded into this process (``QNN_SDK_ROOT`` set, host libraries loaded)."""
        if not self._sdk_active:
            try:
                activate(self.sdk)
            except SdkError as e:  # at fixture time: one line, no traceback
                pytest.fail(str(e), pytrace=False)
            self._sdk_active = True
            atexit.register(_quiet_exit)
        return self.sdk

    @property
    def cache(self) -> ArtifactCache:
        """The artifact cache (``--qnn-cache-dir``; ``--qnn-rebuild`` ignores older entries)."""
        if self._cache is None:
            self._cache = open_cache(self.settings, stack(self.sdk),
                                     session_start=self.started,
                                     rebuild_before=self.rebuild_before)
        return self._cache

    def x86_runners(self) -> tuple[Path, Path]:
        """(upstream's qnn_llama_runner for x86_64, the root of the x86 QNN libraries it runs
        with): the user's prebuilt ``--runner`` (no ``--device``), else the cached build from
        ``--executorch-src``; the libraries are the session's SDK's."""
        s = self.settings
        if s.runner and not s.devices:
            runner = Path(s.runner).expanduser()
        elif s.executorch_src is not None:
            from pytest_qnn_genai.pipeline import Pipeline

            runner = Pipeline(self.cache).runners(s.executorch_src).llama_runner
        else:
            raise RuntimeError(s.x86_runner_missing or "no x86 runners")
        return runner, self.active_sdk().root

    # -- collection -----------------------------------------------------------------------------
    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        """Parametrise ``qnn_case`` by ``--models``, ``qnn_target`` by SoC × device and
        ``qnn_ab_pair`` by ``--qnn-ab``."""
        if "qnn_case" in metafunc.fixturenames:
            cases = registry.select(list(self.settings.models), self.settings.case_dirs,
                                    nightly=self.settings.nightly)
            metafunc.parametrize("qnn_case", cases, ids=[c.name for c in cases], scope="session")
        if "qnn_target" in metafunc.fixturenames:
            from pytest_qnn_genai.devices.setup import device_targets

            tgts = device_targets(self.settings, self.workers)  # several phones + xdist: "device"
            metafunc.parametrize("qnn_target", tgts, ids=[t.id for t in tgts], scope="session")
        if "qnn_ab_pair" in metafunc.fixturenames:
            pairs = self.settings.ab_pairs
            metafunc.parametrize("qnn_ab_pair", pairs, ids=[f"{b}-vs-{a}" for a, b in pairs],
                                 scope="session")

    def modify_items(self, items: list[pytest.Item]) -> None:
        """Run the measurements last (``order``); skip what the marks exclude; check perf goldens
        and phones when tests need them; then pin the run's torch threads (:mod:`~pytest_qnn_genai.
        threads`, inherited by the prebuild) and start building ahead what the selected tests
        need."""
        order.measurements_last(items)
        for item in items:
            excluded = marks.exclusion(item, self.settings)
            if excluded is not None:
                item.add_marker(excluded)
        if self.settings.shard is not None:  # after the skips: they weigh nothing
            from pytest_qnn_genai.plugin.shard import select

            self.shard = select(items, self.settings.shard, self.config)
        if any(_needs_qnn(item) for item in items):
            self.require_sdk()
        if not self.is_worker:
            if any(i.get_closest_marker("perf") for i in items):
                self.check_goldens()
            if (self.settings.devices and not self.devices_checked
                    and any(_drives_phone(item) for item in items)):
                self.check_devices()
        if not self.config.option.collectonly:  # before the prebuild starts: it inherits this
            threads.pin()
        self.prebuild = prebuild.start(self.config, self.settings, items,
                                       session_start=self.started,
                                       rebuild_before=self.rebuild_before)

    def before_setup(self, item: pytest.Item) -> None:
        """A measurement waits until the run's prebuild has built its plan (``order``)."""
        marks.fail_if_missing(item)  # under CI: what CI could run is never skipped
        if item.get_closest_marker(order.MEASUREMENT_MARK):
            prebuild.wait_for_builds(self.config)

    def require_sdk(self) -> None:
        """Provision the SDK now; a missing compiler or SDK is one usage-error line."""
        try:
            self.sdk  # noqa: B018
        except SdkError as e:
            raise pytest.UsageError(str(e)) from None

    def check_devices(self) -> None:
        """Every ``--device`` problem as one usage-error line, before any test runs."""
        from pytest_qnn_genai.devices.setup import DeviceSetupError, validate

        self.devices_checked = True
        try:
            validate(self.settings, self.workers, build_qairt=self.sdk.qairt_version)
        except DeviceSetupError as e:
            raise pytest.UsageError(str(e)) from None

    def check_goldens(self) -> None:
        """The perf suite is selected: a damaged golden perf file is a usage error."""
        from pytest_qnn_genai.golden.perf import GoldenFileError, load_goldens

        try:
            load_goldens(self.settings.golden_dir / "perf")
        except GoldenFileError as e:
            raise pytest.UsageError(str(e)) from None

    # -- the report ---------------------------------------------------------------------------
    def note_failure(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """A test of a model case x target that failed without a failed figure in the report
        gets one (``test_failed``, its first failure line): the report's counts never read all
        pass while a test failed before it recorded, or failed on an unrecorded check."""
        if (self.settings.report_dir is None or not report.failed
                or hasattr(report, "wasxfail")):
            return
        funcargs = getattr(item, "funcargs", {})
        target = funcargs.get("qnn_target")
        if target is None:
            return
        try:
            records = self.results.records  # (its header names the SDK)
        except SdkError:
            return  # the SDK itself is what failed: no report to keep honest
        if any(r.test == item.nodeid and r.verdict == FAIL for r in records):
            return
        case = funcargs.get("qnn_case")
        kind = next((k for k in ("perf", "parity", "smoke") if item.get_closest_marker(k)
                     or k in item.path.parts), "gate")
        text = report.longreprtext.strip().splitlines()
        errors = [x[1:].strip() for x in text if x.startswith("E ")]
        why = errors[0] if errors else (text[-1] if text else "failed")
        self.results.add(Record.for_target(
            kind, case.name if case is not None else item.name, target,
            [problem("test_failed", why, f"the test's own assertions ({report.when})")],
            test=item.nodeid))

    # -- xdist ----------------------------------------------------------------------------------
    def worker_input(self) -> dict[str, float]:
        """What the controller passes each worker, so all agree on the session's times."""
        out = {SESSION_START: self.started}
        if self.rebuild_before is not None:
            out[REBUILD_BEFORE] = self.rebuild_before
        return out

    def worker_payload(self) -> WorkerPayload:
        """What a worker ships to the controller at its end."""
        return {"cache_stats": self.cache_stats().to_dict(), "parity_rows": self.parity.to_dicts(),
                "records": [] if self._results is None else
                [r.to_dict() for r in self._results.records],
                "shard": None if self.shard is None else self.shard.to_dict()}

    def merge_worker(self, payload: WorkerPayload | None) -> None:
        """Fold one worker's payload into the controller's state."""
        if not payload:
            return
        self.worker_stats.merge(payload["cache_stats"])
        self.parity.merge(payload["parity_rows"])
        if payload.get("shard"):  # every worker selected the same
            self.shard = Selection.from_dict(payload["shard"])
        for data in payload["records"]:  # (the results header resolves the SDK)
            self.results.add(Record.from_dict(data))

    # -- the end --------------------------------------------------------------------------------
    def cache_stats(self) -> CacheStats:
        """This process's cache statistics plus those merged from workers."""
        totals = CacheStats()
        totals.merge(self.worker_stats.to_dict())
        if self._cache is not None:
            totals.merge(self._cache.stats.to_dict())
        return totals

    def finish(self, stopped: bool = False) -> bool:
        """End the prebuild (``stopped``: the session was interrupted or failed fast), then ship
        the payload (a worker: False) or say the report is to be written (True)."""
        self.worker_stats.merge(prebuild.stop(self.config, self.prebuild, self.workers, stopped))
        self.prebuild = None
        worker_output = getattr(self.config, "workeroutput", None)
        if worker_output is not None:
            worker_output[PAYLOAD] = self.worker_payload()
            return False
        return True

    def header(self) -> str:
        s, sdk = self.settings, self._sdk
        qairt = (f"qairt={sdk.qairt_version} ({sdk.kind} sdk)" if sdk is not None
                 else "qairt=emulator sdk (provisioned when a test needs it)")
        return (f"qnn-genai: soc={','.join(x.name for x in s.socs)} backend={s.backend} "
                f"device={s.device_label} {qairt} "
                f"executorch={dist_version('executorch')} torch={dist_version('torch')} "
                f"cpu={cpu.kind().label} on the {isa.PATH} path cache={s.cache_dir}")

    def machine_info(self) -> dict[str, str]:
        """pytest-benchmark's ``machine_info["qnn_genai"]``: SoCs, backend, devices, versions."""
        s, sdk = self.settings, self.sdk
        return {"soc": ",".join(x.name for x in s.socs), "backend": s.backend,
                "device": s.device_label, "qairt": f"{sdk.qairt_version} ({sdk.kind} sdk)",
                "executorch": dist_version("executorch"), "torch": dist_version("torch")}


def _quiet_exit() -> None:
    """At process exit, after pytest's last line: executorch's QNN backend logs its teardown
    ("[INFO] [Qnn ExecuTorch]: Destroy Qnn context", ...) from destructors that run after every
    Python handler; its output goes to /dev/null instead of the user's terminal."""
    sys.stdout.flush()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


def _xdist_workers(config: pytest.Config) -> int | None:
    """pytest-xdist's worker count for this session (None without xdist)."""
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None:
        return int(worker_input.get("workercount", 1))
    n = getattr(config.option, "numprocesses", None)
    return n if isinstance(n, int) and n > 0 else None


def _needs_qnn(item: pytest.Item) -> bool:
    """True if ``item`` will run and uses the QNN SDK (directly or through the pipeline)."""
    return "qnn_sdk" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("skip")


def _drives_phone(item: pytest.Item) -> bool:
    """True if ``item`` will run on a phone: not skipped, a phone target, and the phone sessions
    among its fixtures (directly or through another, e.g. the pipeline)."""
    target: Target | None = marks.item_target(item)
    if (target is None or target.is_emulator or target.is_x86_runner
            or item.get_closest_marker("skip")):
        return False
    return "qnn_devices" in getattr(item, "fixturenames", ())


SESSION = pytest.StashKey[QnnSession]()


def session_of(config: pytest.Config) -> QnnSession:
    """The plugin's session for ``config`` (configured by ``pytest_configure``)."""
    return config.stash[SESSION]
