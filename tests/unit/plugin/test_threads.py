"""The cores shared among the run's processes: torch's threads in each, ``OMP_NUM_THREADS`` for
what they start (``plugin/threads.py``)."""
from __future__ import annotations

import json
import os

import pytest
import torch

from pytest_qnn_genai.plugin.threads import THREADS_ENV, per_process, share_cores


@pytest.mark.parametrize(("cores", "processes", "threads"), [
    (2, 1, None), (2, 2, 1), (2, 3, 1), (8, 3, 2), (8, 2, 4), (1, 4, 1)])
def test_each_process_gets_its_share_of_the_cores(cores, processes, threads) -> None:
    assert per_process(cores, processes) == threads


@pytest.fixture
def torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("torch_threads")
def test_sharing_sets_torch_here_and_the_variable_for_child_processes() -> None:
    environ: dict[str, str] = {}
    threads = share_cores(len(os.sched_getaffinity(0)) + 1, environ)
    assert threads == 1
    assert environ == {THREADS_ENV: "1"}
    assert torch.get_num_threads() == 1


@pytest.mark.usefixtures("torch_threads")
def test_the_users_variable_wins_and_one_process_keeps_the_default() -> None:
    before = torch.get_num_threads()
    assert share_cores(3, {THREADS_ENV: "2"}) is None
    environ: dict[str, str] = {}
    assert share_cores(1, environ) is None
    assert environ == {} and torch.get_num_threads() == before


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


def test_under_xdist_each_worker_and_its_children_take_a_share(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers and the prebuild on the machine's cores (the default ``make gate``): each
    worker and what it starts run ``cores // 3`` threads, at least one (without the sharing:
    torch's default, one per core, in each)."""
    monkeypatch.delenv(THREADS_ENV, raising=False)
    share = per_process(len(os.sched_getaffinity(0)), 3)
    seen = _seen(pytester, "-n", "2")
    assert seen and all(s == {"here": share, "variable": str(share), "child": share}
                        for s in seen), seen


def test_one_worker_without_the_prebuild_keeps_torchs_default(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child runs with the environment unset: torch's own default, which the worker kept."""
    monkeypatch.delenv(THREADS_ENV, raising=False)
    seen = _seen(pytester, "-n", "1", "--no-qnn-prebuild")
    assert len(seen) == 1 and seen[0]["variable"] is None, seen
    assert seen[0]["here"] == seen[0]["child"], seen
