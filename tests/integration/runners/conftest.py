"""Upstream's qnn_llama_runner on this machine, the way the x86-runner target runs it: through
the local transport, on QNN's x86 HTP simulator, in a workspace of the module's own."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.devices.local import LocalTransport
from pytest_qnn_genai.devices.session import DeviceSession
from pytest_qnn_genai.runners import RunnerBuild
from pytest_qnn_genai.targets import soc


@pytest.fixture(scope="module")
def x86_runner_session(x86_runners: RunnerBuild, emulator_sdk_root: Path,
                       tmp_path_factory: pytest.TempPathFactory) -> DeviceSession:
    """A started session of upstream's x86 qnn_llama_runner for SM8650."""
    folder = tmp_path_factory.mktemp("x86-runner")
    started = DeviceSession.for_runner(LocalTransport(folder / "device"), soc("SM8650"),
                                       x86_runners.llama_runner, emulator_sdk_root, folder,
                                       qnn_option="--qnn-sdk")
    started.start()
    return started
