"""pytest entry point (``pytest11: qnn_genai``): thin hooks over :class:`QnnSession`.

The only package of pytest_qnn_genai that imports pytest; nothing else imports it. Options are
:mod:`.options`, marks :mod:`.marks`, fixtures :mod:`.fixtures`, and the state of the run is one
:class:`~pytest_qnn_genai.plugin.session.QnnSession` under one stash key.
"""
from __future__ import annotations

import os
from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai import progress
from pytest_qnn_genai.plugin import accepted, marks, options, summary, updates
from pytest_qnn_genai.plugin.accepted import *  # noqa: F403 (the qnn_accepted fixture)
from pytest_qnn_genai.plugin.fixtures import *  # noqa: F403 (fixtures are registered from here)
from pytest_qnn_genai.plugin.session import PAYLOAD, SESSION, QnnSession

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests() -> object:  # runs before output capture starts
    progress.remember_terminal()
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    marks.register(config)
    if not (config.option.help or config.option.version):
        config.stash[SESSION] = QnnSession(config)
        updates.refuse_in_ci(config, config.stash[SESSION].settings, os.environ)
        if config.stash[SESSION].settings.update_golden:  # the tree as it was before any write
            accepted.provenance(config)


def pytest_report_header(config: pytest.Config) -> str | None:
    return config.stash[SESSION].header() if SESSION in config.stash else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if SESSION in metafunc.config.stash:
        metafunc.config.stash[SESSION].parametrize(metafunc)


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: judge only what will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SESSION in config.stash:
        config.stash[SESSION].modify_items(items)


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    """``--qnn-shard``: what this shard took, under "collected N items" (without xdist; its
    controller collects nothing, so the line is in the summary at the end)."""
    shard = config.stash[SESSION].shard if SESSION in config.stash else None
    return shard.line() if shard is not None else None


@pytest.hookimpl(tryfirst=True)  # before the item's fixtures are set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    if SESSION in item.config.stash:
        item.config.stash[SESSION].before_setup(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None],
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if SESSION in item.config.stash:
        qnn = item.config.stash[SESSION]
        # what this phase wrote: in an update run the test reports "updated"
        updates.note(item, report, updates.update_run(item.config, qnn.settings))
        qnn.note_failure(item, report)
    return report


def pytest_report_teststatus(report: pytest.TestReport,
                             config: pytest.Config) -> tuple[str, str, str] | None:
    return updates.teststatus(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if SESSION in session.config.stash:
        stopped = bool(session.shouldstop or session.shouldfail
                       or exitstatus == pytest.ExitCode.INTERRUPTED)
        qnn = session.config.stash[SESSION]
        if qnn.finish(stopped):
            summary.write_report(qnn)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    updates.terminal_summary(terminalreporter)
    if SESSION in config.stash:
        summary.terminal_summary(config.stash[SESSION], terminalreporter)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: WorkerController) -> None:
    node.workerinput.update(node.config.stash[SESSION].worker_input())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: WorkerController, error: object) -> None:
    node.config.stash[SESSION].merge_worker(getattr(node, "workeroutput", {}).get(PAYLOAD))


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, object]) -> None:
    if SESSION in config.stash:
        machine_info["qnn_genai"] = config.stash[SESSION].machine_info()
