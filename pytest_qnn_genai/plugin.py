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
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.sdk import SdkError, resolve_sdk
from pytest_qnn_genai.stash import CACHE, REBUILD_BEFORE, SDK, SETTINGS
from pytest_qnn_genai.versions import dist_version

WORKER_STATS = "qnn_cache_stats"
WORKER_TOTALS = pytest.StashKey[CacheStats]()


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if CACHE in config.stash and hasattr(config, "workeroutput"):
        config.workeroutput[WORKER_STATS] = config.stash[CACHE].stats.to_dict()


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
        tgts = s.targets
        metafunc.parametrize("qnn_target", tgts, ids=[t.id for t in tgts], scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SETTINGS not in config.stash:
        return
    for item in items:
        reason = marks.skip_reason(item, config.stash[SETTINGS])
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
