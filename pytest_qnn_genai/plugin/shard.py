"""``--qnn-shard K/N``: keep this shard's share of the collected items, deselect the rest.

An item's combination is its ``qnn_case`` × ``qnn_target`` parameters; its build group is the
case on the target's SoC and backend (:class:`~pytest_qnn_genai.shards.BuildGroup`), so the
emulator's, upstream's x86 runners' and a phone's items of one case and SoC stay together and
their builds are made by one shard. Groups are assigned by
:func:`~pytest_qnn_genai.shards.assign` (weights: the group's items not already skipped by a
mark), independently of collection order.

Items without a combination (the plugin's own unit-style tests, a module that uses neither
parameter) run on shard 1 only: they may build through session fixtures shared across modules
(e.g. the default case's legacy build), which splitting them would build on several shards; they
do not weigh in the assignment, so shard 1 is not given fewer builds for them.

Deselected items go through ``pytest_deselected`` (pytest's "N deselected"), never skipped.
Under pytest-xdist every worker collects and deselects the same way (the assignment is
deterministic); the controller learns the selection from the workers' payload.
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.plugin.marks import item_target
from pytest_qnn_genai.shards import BuildGroup, Selection, Shard, assign, combination, selection


def _case(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get("qnn_case") if callspec else None
    return value.name if isinstance(value, ModelCase) else None


def group_of(item: pytest.Item) -> tuple[str, BuildGroup] | None:
    """(combination, build group) of an item, or None without a case and a target."""
    case, target = _case(item), item_target(item)
    if case is None and target is None:
        return None
    group = BuildGroup(case or "", target.soc.name if target else "",
                       target.backend if target else "")
    return combination(case, target.id if target else None), group


def select(items: list[pytest.Item], shard: Shard, config: pytest.Config) -> Selection:
    """Keep ``shard``'s items in ``items`` (in place), deselect the others; what it took."""
    grouped = {id(item): group_of(item) for item in items}
    weights: dict[BuildGroup, int] = {}
    for item in items:
        found = grouped[id(item)]
        if found is not None:
            weights[found[1]] = weights.get(found[1], 0) + (
                0 if item.get_closest_marker("skip") else 1)
    owner = assign(weights, shard.count)
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        found = grouped[id(item)]
        mine = shard.index == 1 if found is None else owner[found[1]] == shard.index
        (kept if mine else dropped).append(item)
    combos = [(c, owner[g]) for c, g in (f for f in grouped.values() if f is not None)]
    unsplit = sum(1 for f in grouped.values() if f is None)
    chosen = selection(shard, combos, len(kept), [i.nodeid for i in items],
                       [g for g, k in owner.items() if k == shard.index], unsplit)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    return chosen
