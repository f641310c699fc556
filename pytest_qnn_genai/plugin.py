"""pytest entry point (``pytest11: qnn_genai``): wires options, marks, parametrisation and reports.

The logic lives in plain modules (options, targets, marks, sdk, cache, stages); this module only
connects them to pytest's hooks.
"""
from __future__ import annotations

import time

import pytest

from pytest_qnn_genai import marks, options, progress
from pytest_qnn_genai.cache import CacheStats
from pytest_qnn_genai.fixtures import *  # noqa: F401,F403  (fixtures are registered from here)
from pytest_qnn_genai.fixtures import RESULTS
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.parity import ParityTable
from pytest_qnn_genai.sdk import SdkError, resolve_sdk
from pytest_qnn_genai.stash import CACHE, REBUILD_BEFORE, SDK, SETTINGS
from pytest_qnn_genai.versions import dist_version

WORKER_STATS = "qnn_cache_stats"
WORKER_TOTALS = pytest.StashKey[CacheStats]()
WORKER_PARITY = "qnn_parity_rows"
PARITY_TABLE = pytest.StashKey[ParityTable]()  # legacy-vs-new rows (suites/parity)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests():  # noqa: ANN201 - runs before output capture starts
    progress.remember_terminal()
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    marks.register(config)
    if config.option.help or config.option.version:
        return
    values = options.resolve(config.getoption, config.getini)
    settings = options.Settings.from_values(values, config.rootpath)
    try:
        registry.select(list(settings.models))
    except registry.ModelCaseError as e:
        raise pytest.UsageError(f"--models: {e}") from None
    try:
        config.stash[SDK] = resolve_sdk(settings.qnn_sdk, settings.cache_dir)
    except SdkError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[SETTINGS] = settings
    if settings.rebuild:
        worker_input = getattr(config, "workerinput", {})
        config.stash[REBUILD_BEFORE] = worker_input.get("qnn_rebuild_before", time.time())
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(config), "qnn_genai_xdist")
    config.stash[WORKER_TOTALS] = CacheStats()
    config.stash[PARITY_TABLE] = ParityTable()
    _configure_report(config, settings)
    if settings.devices and _xdist_workers(config) and not hasattr(config, "workerinput"):
        _check_devices(config, settings)  # xdist workers cannot report a usage error: check now


# -- phones (--device): checked once before any test runs, one line per problem ---------------
DEVICES_CHECKED = pytest.StashKey[bool]()


def _xdist_workers(config: pytest.Config) -> int | None:
    """pytest-xdist's worker count for this session (None without xdist)."""
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None:
        return int(worker_input.get("workercount", 1))
    n = getattr(config.option, "numprocesses", None)
    return n if isinstance(n, int) and n > 0 else None


def _check_devices(config: pytest.Config, settings: options.Settings) -> None:
    from pytest_qnn_genai.devices.session import DeviceSetupError, validate

    config.stash[DEVICES_CHECKED] = True
    try:
        validate(settings, _xdist_workers(config))
    except DeviceSetupError as e:
        raise pytest.UsageError(str(e)) from None


def _drives_phone(item: pytest.Item) -> bool:
    """True if ``item`` will run on a phone: not skipped, a phone target, a device fixture."""
    target = marks.item_target(item)
    if target is None or target.is_emulator or item.get_closest_marker("skip"):
        return False
    argnames = getattr(getattr(item, "_fixtureinfo", None), "argnames", ())
    return "qnn_run" in item.fixturenames or bool({"qnn_devices", "qnn_pipeline"} & set(argnames))


class XdistHooks:
    """Pass the rebuild time to workers and collect their cache statistics."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_configure_node(self, node) -> None:  # noqa: ANN001 (xdist WorkerController)
        if REBUILD_BEFORE in self.config.stash:
            node.workerinput["qnn_rebuild_before"] = self.config.stash[REBUILD_BEFORE]

    def pytest_testnodedown(self, node, error) -> None:  # noqa: ANN001
        stats = getattr(node, "workeroutput", {}).get(WORKER_STATS)
        if stats:
            self.config.stash[WORKER_TOTALS].merge(stats)
        if PARITY_TABLE in self.config.stash:
            self.config.stash[PARITY_TABLE].merge(
                getattr(node, "workeroutput", {}).get(WORKER_PARITY, ()))
        if RESULTS in self.config.stash:
            from pytest_qnn_genai.report import Record

            for data in getattr(node, "workeroutput", {}).get(WORKER_RECORDS, ()):
                self.config.stash[RESULTS].add(Record.from_dict(data))


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if CACHE in config.stash and hasattr(config, "workeroutput"):
        config.workeroutput[WORKER_STATS] = config.stash[CACHE].stats.to_dict()
    if PARITY_TABLE in config.stash and hasattr(config, "workeroutput"):
        config.workeroutput[WORKER_PARITY] = config.stash[PARITY_TABLE].to_dicts()
    if RESULTS in config.stash and hasattr(config, "workeroutput"):
        config.workeroutput[WORKER_RECORDS] = [r.to_dict() for r in config.stash[RESULTS].records]
    elif RESULTS in config.stash:
        _write_report(config)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # noqa: ANN001
    if WORKER_TOTALS not in config.stash:
        return
    totals = CacheStats()
    totals.merge(config.stash[WORKER_TOTALS].to_dict())
    if CACHE in config.stash:
        totals.merge(config.stash[CACHE].stats.to_dict())
    if totals.hits or totals.builds:
        terminalreporter.write_sep("-", "qnn-genai artifact cache")
        terminalreporter.write_line(
            f"{totals.hits} hits, {totals.builds} builds ({totals.build_s:.1f}s building, "
            f"{totals.bytes_built / 1e6:.2f} MB written, {totals.rebuilt_damaged} damaged entries "
            f"rebuilt) in {config.stash[SETTINGS].cache_dir}")
    table = config.stash.get(PARITY_TABLE, None)
    if table is not None and table.rows and not hasattr(config, "workerinput"):
        terminalreporter.write_sep("-", "qnn-genai parity: legacy vs new")
        for line in table.format():
            terminalreporter.write_line(line)
    _report_summary(terminalreporter, config)


def pytest_report_header(config: pytest.Config) -> str | None:
    if SETTINGS not in config.stash:
        return None
    s, sdk = config.stash[SETTINGS], config.stash[SDK]
    return (f"qnn-genai: soc={','.join(x.name for x in s.socs)} backend={s.backend} "
            f"device={s.device_label} qairt={sdk.qairt_version} ({sdk.kind} sdk) "
            f"executorch={dist_version('executorch')} torch={dist_version('torch')} cache={s.cache_dir}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if SETTINGS not in config.stash:
        return
    s = config.stash[SETTINGS]
    if "qnn_case" in metafunc.fixturenames:
        cases = registry.select(list(s.models))
        metafunc.parametrize("qnn_case", cases, ids=[c.name for c in cases], scope="session")
    if "qnn_target" in metafunc.fixturenames:
        from pytest_qnn_genai.devices.session import device_targets

        tgts = device_targets(s, _xdist_workers(config))  # several phones + xdist: "...-device"
        metafunc.parametrize("qnn_target", tgts, ids=[t.id for t in tgts], scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SETTINGS not in config.stash:
        return
    for item in items:
        reason = marks.skip_reason(item, config.stash[SETTINGS])
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
    s = config.stash[SETTINGS]
    if not hasattr(config, "workerinput") and any(i.get_closest_marker("perf") for i in items):
        _check_goldens(s)  # the perf suite is selected: a damaged golden file is a usage error
    if (s.devices and DEVICES_CHECKED not in config.stash and not hasattr(config, "workerinput")
            and any(_drives_phone(item) for item in items)):
        _check_devices(config, s)  # a UsageError here still exits 4 with one line


# -- perf gate and report (--qnn-report, --qnn-compare-to) ------------------------------------
WORKER_RECORDS = "qnn_results_records"
BASELINE = pytest.StashKey[object]()  # the --qnn-compare-to ResultsFile
REPORT = pytest.StashKey[tuple]()  # (report folder, files written, diffs against the baseline)


def _configure_report(config: pytest.Config, settings: options.Settings) -> None:
    from pytest_qnn_genai import versions
    from pytest_qnn_genai.perf.benchmark import BenchmarkHooks, load_baseline, machine_info
    from pytest_qnn_genai.report import Header, ResultsFile, ResultsFileError

    sdk = config.stash[SDK]
    config.stash[RESULTS] = ResultsFile(Header.collect(
        [s.name for s in settings.socs], settings.backend, list(settings.devices),
        versions.stack(sdk), config.rootpath))
    if settings.compare_to is not None and not hasattr(config, "workerinput"):
        try:
            config.stash[BASELINE] = load_baseline(settings.compare_to)
        except ResultsFileError as e:
            raise pytest.UsageError(f"--qnn-compare-to: {e}") from None
    if config.pluginmanager.hasplugin("benchmark"):
        config.pluginmanager.register(BenchmarkHooks(lambda: machine_info(settings, sdk)),
                                      "qnn_genai_benchmark")


def _check_goldens(settings: options.Settings) -> None:
    from pytest_qnn_genai.perf.golden import GoldenFileError, load_goldens

    try:
        load_goldens(settings.golden_dir / "perf")
    except GoldenFileError as e:
        raise pytest.UsageError(str(e)) from None


def _write_report(config: pytest.Config) -> None:
    from pytest_qnn_genai.perf.benchmark import write_report
    from pytest_qnn_genai.perf.compare import compare
    from pytest_qnn_genai.perf.golden import GoldenFileError, load_goldens

    s, results = config.stash[SETTINGS], config.stash[RESULTS]
    baseline = config.stash.get(BASELINE, None)
    diffs = (compare(results.perf_figures(), baseline.perf_figures(), s.perf_noise)
             if baseline is not None else [])
    folder, written = None, []
    if s.report_dir is not None:
        try:
            goldens = load_goldens(s.golden_dir / "perf")
        except GoldenFileError:
            goldens = {}  # reported by the perf tests themselves
        folder, written = write_report(s.report_dir, results, goldens, baseline, s.perf_noise)
    config.stash[REPORT] = (folder, written, diffs)


def _report_summary(terminalreporter, config: pytest.Config) -> None:  # noqa: ANN001
    if REPORT not in config.stash:
        return
    from pytest_qnn_genai.perf.compare import render_table

    folder, written, diffs = config.stash[REPORT]
    if BASELINE in config.stash:
        terminalreporter.write_sep("-", f"qnn-genai perf vs {config.stash[SETTINGS].compare_to}")
        terminalreporter.write(render_table(diffs))
    if folder is not None:
        terminalreporter.write_sep("-", "qnn-genai report")
        terminalreporter.write_line(f"{len(config.stash[RESULTS].records)} records: "
                                    + ", ".join(str(p) for p in written))
