"""``--qnn-shard K/N`` in a pytest run: the shards' items are disjoint and cover the run, every
target of one case × SoC-backend (the emulator, upstream's x86 runners) is on one shard, tests
without a combination run on shard 1, the rest is deselected (never skipped), collection order
does not matter, xdist workers agree, and a malformed value is one usage line."""
from __future__ import annotations

import re
from collections import defaultdict

import pytest

from pytest_qnn_genai.report.results import ResultsFile

pytestmark = pytest.mark.usefixtures("qnn_env")

TESTS = """
def test_pair(qnn_case, qnn_target):
    pass

def test_pair_again(qnn_case, qnn_target):
    pass

def test_block(qnn_target):
    pass

def test_plain():
    pass
"""
# reverses the collected items before the plugin sees them when QNN_SHARD_TEST_REVERSE is set
REVERSING_CONFTEST = """
import os
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    if os.environ.get("QNN_SHARD_TEST_REVERSE"):
        items.reverse()
"""
# two SoCs and two model cases: the counts below are of this run, whatever else is registered
RUN = ("--soc", "SM8650", "--soc", "SM8750", "--models", "stories260k,llama3_2_toy")
PARAMS = re.compile(r"\[(?:(?P<case>[a-z0-9_]+)-)?(?P<soc>SM\d+)-(?P<backend>htp)-(?P<device>[\w-]+)\]")


def _ids(result: pytest.RunResult) -> list[str]:
    return sorted(x for x in result.outlines if "::" in x)


def _ran(result: pytest.RunResult) -> list[str]:
    """The test ids ``-v`` reported as passed or skipped (with or without xdist's prefix)."""
    return sorted(next(w for w in x.split() if "::" in w) for x in result.outlines
                  if ("PASSED" in x or "SKIPPED" in x) and "::" in x)


def _collect(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--co", "-q", *RUN, *args)
    assert result.ret == pytest.ExitCode.OK, result.outlines
    return _ids(result)


def _group(test_id: str) -> tuple[str, str, str] | None:
    m = PARAMS.search(test_id)
    if m is None:
        return None
    if "test_block" in test_id:
        return ("", m["soc"], m["backend"])
    return (m["case"], m["soc"], m["backend"])


@pytest.mark.parametrize("count", [2, 3, 5])
def test_shards_are_disjoint_cover_the_run_and_keep_each_build_group_together(
        pytester: pytest.Pytester, count: int) -> None:
    pytester.makepyfile(TESTS)
    everything = _collect(pytester)
    shards = {k: _collect(pytester, "--qnn-shard", f"{k}/{count}") for k in range(1, count + 1)}
    seen = [t for ids in shards.values() for t in ids]
    assert sorted(seen) == everything  # covering, and no test on two shards
    owner: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    for k, ids in shards.items():
        for t in ids:
            group = _group(t)
            if group is not None:
                owner[group].add(k)
    assert len(owner) == 6  # 2 cases x 2 SoCs, and the case-less block on each SoC
    assert all(len(ks) == 1 for ks in owner.values()), dict(owner)  # emulator + x86-runner together
    plain = [k for k, ids in shards.items() if any(t.endswith("::test_plain") for t in ids)]
    assert plain == [1]
    used = sum(1 for ids in shards.values() if ids)
    assert used == min(count, 6)  # no shard idles while another has two groups


def test_collection_order_does_not_matter(pytester: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(TESTS)
    pytester.makeconftest(REVERSING_CONFTEST)
    before = [_collect(pytester, "--qnn-shard", f"{k}/3") for k in (1, 2, 3)]
    monkeypatch.setenv("QNN_SHARD_TEST_REVERSE", "1")
    assert [_collect(pytester, "--qnn-shard", f"{k}/3") for k in (1, 2, 3)] == before


def test_the_rest_is_deselected_not_skipped_and_the_terminal_says_what_ran(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TESTS)
    whole = pytester.runpytest(*RUN)
    whole.assert_outcomes(passed=11, skipped=10)  # x86-runner items: no --executorch-src
    one = pytester.runpytest(*RUN, "--qnn-shard", "1/2")
    two = pytester.runpytest(*RUN, "--qnn-shard", "2/2")
    one_n, two_n = one.parseoutcomes(), two.parseoutcomes()
    assert one_n.get("deselected", 0) + two_n.get("deselected", 0) == 21
    for got in (one_n, two_n):
        assert got["passed"] + got.get("skipped", 0) + got["deselected"] == 21
    assert one_n["passed"] + two_n["passed"] == 11
    assert one_n.get("skipped", 0) + two_n.get("skipped", 0) == 10  # only the marks' skips
    # 2 cases x 2 SoCs x 2 targets, plus the block's 2 SoCs x 2 targets: 12 combinations
    one.stdout.fnmatch_lines(["shard 1/2: 6 of 12 combinations (model case × target), "
                              "* of 21 tests; builds here: *"])
    two.stdout.fnmatch_lines(["*- qnn-genai shard -*", "shard 2/2: 6 of 12 combinations *"])


def test_xdist_workers_select_the_same_and_the_controller_says_it(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TESTS)
    alone = pytester.runpytest(*RUN, "--qnn-shard", "2/3", "-v")
    workers = pytester.runpytest_subprocess(*RUN, "--qnn-shard", "2/3", "-n", "2", "-v",
                                            "--qnn-report", "report")
    assert workers.ret == pytest.ExitCode.OK, workers.outlines[-20:]
    [results] = (pytester.path / "report").glob("*/results.json")
    kept = ResultsFile.load(results).header.fingerprint["shard"]  # for the merge
    assert kept["shard"] == "2/3" and kept["total_combinations"] == 12 and kept["combinations"]

    assert _ran(alone) == _ran(workers) != []
    line = [x for x in alone.outlines if x.startswith("shard 2/3:")][-1]
    workers.stdout.fnmatch_lines(["*- qnn-genai shard -*", line])


@pytest.mark.parametrize("value", ["3/2", "0/2", "two/4", "2"])
def test_a_malformed_shard_is_one_usage_line(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_subprocess("--qnn-shard", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [x for x in result.errlines if x.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --qnn-shard: expected K/N"), errors
