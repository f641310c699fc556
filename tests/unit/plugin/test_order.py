"""The measurements run last (``plugin/order.py``)."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.plugin.order import measurements_last


class _Item:
    def __init__(self, name: str, perf: bool) -> None:
        self.name, self.perf = name, perf

    def get_closest_marker(self, name: str) -> object | None:
        return object() if self.perf and name == "perf" else None


def test_perf_items_move_behind_the_others_each_side_in_its_order() -> None:
    items = [_Item("p1", True), _Item("a", False), _Item("p2", True), _Item("b", False)]
    measurements_last(items)  # items need only get_closest_marker
    assert [i.name for i in items] == ["a", "b", "p1", "p2"]


def test_without_perf_items_the_order_is_kept() -> None:
    items = [_Item("b", False), _Item("a", False)]
    measurements_last(items)  # items need only get_closest_marker
    assert [i.name for i in items] == ["b", "a"]


PERF_FIRST = {
    "test_a_perf": "import pytest\npytestmark = pytest.mark.perf\n"
                   "def test_bench_1(): pass\ndef test_bench_2(): pass\n",
    "test_b_gate": "def test_gate_1(): pass\ndef test_gate_2(): pass\n",
}


def test_the_session_runs_perf_tests_after_the_rest(pytester: pytest.Pytester) -> None:
    """Collected first (file order), run last: what xdist hands out and the prebuild plans."""
    pytester.makepyfile(**PERF_FIRST)
    result = pytester.runpytest("-p", "no:randomly", "-v", "--no-qnn-prebuild")
    result.assert_outcomes(passed=4)
    ran = [line.split(" ")[0].split("::")[1] for line in result.outlines if " PASSED" in line]
    assert ran == ["test_gate_1", "test_gate_2", "test_bench_1", "test_bench_2"], ran


def test_xdist_workers_agree_on_the_order(pytester: pytest.Pytester) -> None:
    """Every worker reorders alike (xdist refuses workers that collected different orders)."""
    pytester.makepyfile(**PERF_FIRST)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                           "-n", "2", "--no-qnn-prebuild", timeout=300)
    result.assert_outcomes(passed=4)


HOLDING_CONFTEST = """
import subprocess, sys
from pytest_qnn_genai.plugin.prebuild import building_flag

HOLDER = '''
import sys, time
from pathlib import Path
from pytest_qnn_genai.prebuild.building import held
gate = Path(sys.argv[2]).with_name("gate")
with held(Path(sys.argv[1])):
    print("held", flush=True)
    deadline = time.monotonic() + 120  # until the gate test has run (a loaded machine: slow)
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    Path(sys.argv[2]).write_text(repr(time.time()))
'''

def pytest_configure(config):  # a prebuild building: its flag held until the gate test ran
    config.holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(building_flag(config)),
         str(config.rootpath / "released")], stdout=subprocess.PIPE, text=True)
    assert config.holder.stdout.readline() == "held\\n"

def pytest_unconfigure(config):
    config.holder.wait(60)
"""
STARTED = """
import time
from pathlib import Path
def _started(name, request):
    (request.config.rootpath / name).write_text(repr(time.time()))
"""


def test_a_measurement_starts_after_the_prebuilds_builds(pytester: pytest.Pytester) -> None:
    """A ``perf`` item waits for the prebuild's flag (``prebuild/building.py``); others do not."""
    pytester.makeconftest(HOLDING_CONFTEST)
    pytester.makepyfile(
        test_a_perf=STARTED + "import pytest\npytestmark = pytest.mark.perf\n"
                              "def test_bench(request): _started('bench', request)\n",
        test_b_gate=STARTED + "def test_gate(request): _started('gate', request)\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                           "--no-qnn-prebuild", timeout=300)
    result.assert_outcomes(passed=2)
    released, bench, gate = (float((pytester.path / n).read_text())
                             for n in ("released", "bench", "gate"))
    assert gate < released <= bench, (gate, released, bench)
    assert "waiting for the prebuild's builds to end before measuring" in result.stderr.str()
