"""Every process of a run computes with one torch thread (``pytest_qnn_genai/threads.py``): torch
here, ``OMP_NUM_THREADS`` for what it starts, whatever the workers, the cores or the user's
variable; a Pipeline pins on creation (a script's builds); the thread count is in every key."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from pytest_qnn_genai import threads
from pytest_qnn_genai.threads import THREADS, THREADS_ENV, pin


@pytest.fixture
def torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("torch_threads")
def test_pinning_sets_torch_here_and_the_variable_for_child_processes() -> None:
    torch.set_num_threads(2)
    environ = {THREADS_ENV: "4"}  # a user's own value would make a build depend on it
    pin(environ)
    assert environ == {THREADS_ENV: str(THREADS)} and torch.get_num_threads() == THREADS == 1


@pytest.mark.usefixtures("torch_threads")
def test_a_pipeline_pins_on_creation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_qnn_genai.cache import ArtifactCache
    from pytest_qnn_genai.pipeline import Pipeline

    monkeypatch.setenv(THREADS_ENV, "2")
    torch.set_num_threads(2)
    Pipeline(ArtifactCache(tmp_path / "cache", {"torch": "t"}))
    assert torch.get_num_threads() == 1 and os.environ[THREADS_ENV] == "1"


def test_the_thread_count_is_in_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread count is another set of keys: an entry built before the pin (with torch's
    default threads, which moved a 135M calibration's scales) is never taken for one after."""
    from pytest_qnn_genai.sdk import versions

    class Sdk:
        qairt_version, kind, root = "2.47.0", "emulator", Path("/sdk/qairt")

    assert versions.stack(Sdk())["torch_threads"] == "1"
    monkeypatch.setattr(versions, "THREADS", 2)
    assert versions.stack(Sdk())["torch_threads"] == "2"
    assert threads.THREADS == 1


SEEN = """
import json, os, subprocess, sys
import torch

def test_threads(worker_id, request):
    child = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, timeout=120, check=True)
    seen = {"here": torch.get_num_threads(), "variable": os.environ.get("OMP_NUM_THREADS"),
            "child": int(child.stdout)}
    (request.config.rootpath / f"seen-{worker_id}.json").write_text(json.dumps(seen))
"""


def _seen(pytester: pytest.Pytester, *args: str) -> list[dict]:
    pytester.makepyfile(test_seen=SEEN.replace("def test_threads", "def test_a") + SEEN.replace(
        "def test_threads", "def test_b"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args,
                                           timeout=300)
    result.assert_outcomes(passed=2)
    return [json.loads(p.read_text()) for p in sorted(pytester.path.glob("seen-*.json"))]


@pytest.mark.parametrize("args", [("-n", "2"), ("-n", "1", "--no-qnn-prebuild")],
                         ids=["two-workers", "one-worker"])
def test_every_worker_and_its_children_compute_with_one_thread(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]) -> None:
    """However the run is split, and with the user's variable set: one thread everywhere (before
    the pin, one worker kept torch's default and two workers took ``cores // 3``)."""
    monkeypatch.setenv(THREADS_ENV, "3")
    seen = _seen(pytester, *args)
    assert seen and all(s == {"here": 1, "variable": "1", "child": 1} for s in seen), seen
