"""The run's order: the performance measurements after every other selected test.

Contract of :func:`measurements_last`: the items marked ``perf`` move behind the others, each
side keeping its collection order (a stable partition, in place); nothing is added or dropped.
It runs before the prebuild is planned and before pytest-xdist hands items out (both follow
this order), so under ``-n auto`` the benchmarks and A/B gates start once the other tests'
builds, which are theirs too, are done instead of beside them; each then waits until the
run's prebuild has built its whole plan (the lookahead builds only they need come last in it:
``plugin/prebuild.py`` ``wait_for_builds``).

The hazard (a cold ``pytest suites -n auto`` on few cores, in collection order): the perf tests
run while the prebuild and the other worker build, every core busy. The A/B gates and benchmarks
then take several times as long as on the same cache with nothing else running: the A/B gate
adds rounds while a verdict is inconclusive (noise widens the bounds, up to 4x the rounds), and
every round runs slower. That time is CPU the builds wait for, and the figures measure the
builds as much as the programs.
"""
from __future__ import annotations

import pytest

MEASUREMENT_MARK = "perf"


def measurements_last(items: list[pytest.Item]) -> None:
    """Move the ``perf`` items behind the others, each side in its own order (in place)."""
    measured = [i for i in items if i.get_closest_marker(MEASUREMENT_MARK)]
    if measured:
        items[:] = [i for i in items if not i.get_closest_marker(MEASUREMENT_MARK)] + measured
