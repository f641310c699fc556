"""The run's order: the performance measurements after every other selected test.

Contract of :func:`measurements_last`: the items marked ``perf`` move behind the others, each
side keeping its collection order (a stable partition, in place); nothing is added or dropped.
It runs before the prebuild is planned and before pytest-xdist hands items out (both follow
this order), so under ``-n auto`` the benchmarks and A/B gates start once the other tests'
builds, which are theirs too, are done instead of beside them; each then waits until the
run's prebuild has built its whole plan (the lookahead builds only they need come last in it:
``plugin/prebuild.py`` ``wait_for_builds``).

Measured hazard (a cold ``pytest suites --soc SM8650 -n auto``, 2 cores, collection order:
gate, parity, perf, smoke): the perf tests ran while the prebuild and the other worker built
(both cores busy, up to five runnable processes). The emulator's A/B gate of stories260k took
327 s, and the three cases' A/B gates and benchmarks 755 s of a worker's time, against 35 s and
126 s on the same cache with nothing else running: the A/B gate adds rounds while a verdict is
inconclusive (noise widens the bounds, up to 4x the rounds), and every round ran slower. Those
seconds were CPU the builds waited for, and the figures measured the builds as much as the
programs.
"""
from __future__ import annotations

import pytest

MEASUREMENT_MARK = "perf"


def measurements_last(items: list[pytest.Item]) -> None:
    """Move the ``perf`` items behind the others, each side in its own order (in place)."""
    measured = [i for i in items if i.get_closest_marker(MEASUREMENT_MARK)]
    if measured:
        items[:] = [i for i in items if not i.get_closest_marker(MEASUREMENT_MARK)] + measured
