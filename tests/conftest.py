"""Shared set-up for the plugin's own tests."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib.backends.backend_agg  # noqa: F401 - see below
import matplotlib.dates  # noqa: F401
import matplotlib.figure  # noqa: F401
import pytest

from pytest_qnn_genai.sdk import emulator

# matplotlib is imported once, before any in-process pytester run: such a run drops the modules it
# imported when it ends, and a later plot mixed the dropped modules' classes with re-imported ones
# (measured under -n 2: "Single argument to subplot must be a three-digit integer, not GridSpec",
# "Legend needs either Axes or FigureBase as parent" in the report's plots).
from tests.support import XDIST_ENV

if TYPE_CHECKING:
    from pytest_qnn_genai.devices.session import DeviceSession
    from pytest_qnn_genai.flows.legacy import LegacyArtifacts
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.runners import RunnerBuild
    from pytest_qnn_genai.targets import Target


@pytest.fixture(autouse=True)
def _pytester_without_unused_plugins(request: pytest.FixtureRequest) -> None:
    """Pytester runs get the repository's ``addopts`` (pyproject.toml: ``-p no:`` for the pytest
    plugins executorch's dependencies install, whose imports cost seconds per pytest start, more
    than a one-test pytester subprocess takes without them). Pytester drops
    PYTEST_ADDOPTS when it is created, so it is set again after. Under ``make test`` (``-n 2``)
    the outer worker's xdist variables are dropped: an inner run that inherited
    ``PYTEST_XDIST_WORKER=gw1`` would take itself for worker 1 of 2. ``CI`` is dropped too: a
    test of the CI behaviour sets it for its inner run."""
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")
        addopts = " ".join(request.config.getini("addopts"))
        monkeypatch = request.getfixturevalue("monkeypatch")
        monkeypatch.setenv("PYTEST_ADDOPTS", addopts)
        for name in XDIST_ENV:  # an inner run is no worker of the outer run's xdist
            monkeypatch.delenv(name, raising=False)
        # nor a CI run (where updates are refused and a missing tool fails) unless it says so
        monkeypatch.delenv("CI", raising=False)


@pytest.fixture(scope="session")
def emulator_sdk_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An emulator SDK provisioned once for the whole test session."""
    return emulator.provision(tmp_path_factory.mktemp("shared-cache"))


@pytest.fixture
def qnn_env(monkeypatch: pytest.MonkeyPatch, emulator_sdk_root: Path, tmp_path: Path) -> Path:
    """Environment for in-process pytester runs: the shared SDK, a private cache, no stray knobs."""
    import os

    for name in [n for n in os.environ if n.startswith("QNN_GENAI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("QNN_SDK_ROOT", str(emulator_sdk_root))
    monkeypatch.setenv("QNN_GENAI_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def case() -> ModelCase:
    """The shipped, trained default model case."""
    from pytest_qnn_genai.models.registry import available

    return available()["stories260k"]


@pytest.fixture(scope="session")
def sm8650_emulator() -> Target:
    """SM8650 / HTP on the x86 emulator: the target the plugin's own tests build for."""
    from pytest_qnn_genai.targets import Target, soc

    return Target(soc("SM8650"))


@pytest.fixture(scope="session")
def legacy(qnn_pipeline, qnn_sdk, case, sm8650_emulator) -> LegacyArtifacts:
    """The legacy llama.py build of the default model (a cache entry shared with the suites)."""
    return qnn_pipeline.legacy(case, sm8650_emulator)


@pytest.fixture(scope="session")
def x86_runners(qnn_pipeline, qnn_settings) -> RunnerBuild:
    """ExecuTorch's own qnn_llama_runner and qnn_executor_runner built for x86_64 from
    upstream's source tree (``tests.support.upstream``: ``--executorch-src``, else the checkout
    beside this one; a cache entry); without one skipped, or failed where ``$CI`` is set."""
    from tests.support.upstream import require_source_tree

    return qnn_pipeline.runners(require_source_tree(qnn_settings.executorch_src))


@pytest.fixture(scope="module")
def x86_runner_session(x86_runners: RunnerBuild, emulator_sdk_root: Path,
                       tmp_path_factory: pytest.TempPathFactory) -> DeviceSession:
    """Upstream's x86 qnn_llama_runner for SM8650, the way the x86-runner target runs it: through
    the local transport, on QNN's x86 HTP simulator, in a workspace of the module's own."""
    from pytest_qnn_genai.devices.local import LocalTransport
    from pytest_qnn_genai.devices.session import DeviceSession
    from pytest_qnn_genai.targets import soc

    folder = tmp_path_factory.mktemp("x86-runner")
    started = DeviceSession.for_runner(LocalTransport(folder / "device"), soc("SM8650"),
                                       x86_runners.llama_runner, emulator_sdk_root, folder,
                                       qnn_option="--qnn-sdk")
    started.start()
    return started
