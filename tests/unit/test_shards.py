"""The shard arithmetic: ``K/N`` parsing, the assignment of build groups to shards
(deterministic, whatever the order it is given the groups in and in every process; disjoint;
covering; balanced by the groups' tests) and a shard's selection record."""
from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_qnn_genai.shards import BuildGroup, Selection, Shard, ShardError, assign, selection

REPO_ROOT = Path(__file__).resolve().parents[2]
CASES = ("stories260k", "llama3_2_toy", "qwen3_toy")
SOCS = ("SM8650", "SM8750", "SM8550")


def _groups() -> list[BuildGroup]:
    return ([BuildGroup(c, s, "htp") for c, s in itertools.product(CASES, SOCS)]
            + [BuildGroup("", s, "htp") for s in SOCS])


@pytest.mark.parametrize(("text", "index", "count"), [("1/4", 1, 4), (" 2 / 3 ", 2, 3),
                                                       ("1/1", 1, 1), ("12/12", 12, 12)])
def test_parse(text: str, index: int, count: int) -> None:
    shard = Shard.parse(text)
    assert (shard.index, shard.count, str(shard)) == (index, count, f"{index}/{count}")


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "2", "", "1/2/3", "-1/2", "1.0/2",
                                  "1 of 2"])
def test_malformed_is_one_line(text: str) -> None:
    with pytest.raises(ShardError) as e:
        Shard.parse(text)
    assert "K/N" in str(e.value) and "\n" not in str(e.value)


def test_assignment_does_not_depend_on_the_order_groups_come_in() -> None:
    weights = {g: 1 + i % 4 for i, g in enumerate(_groups())}
    for count in (2, 3, 5):
        first = assign(weights, count)
        rng = random.Random(count)
        for _ in range(20):
            order = list(weights)
            rng.shuffle(order)
            assert assign({g: weights[g] for g in order}, count) == first


ASSIGN_IN_A_FRESH_PROCESS = """
import json, sys
from pytest_qnn_genai.shards import BuildGroup, assign
groups = [BuildGroup(*g) for g in json.loads(sys.argv[1])]
print(json.dumps(sorted([str(g), k] for g, k in assign(dict.fromkeys(groups, 1), 3).items())))
"""


def test_assignment_is_the_same_in_every_process() -> None:
    """Equal weights leave the order to the stable hash: a salted ``hash()`` of the names would
    deal the groups differently under another PYTHONHASHSEED (another CI machine's shard)."""
    groups = json.dumps([[g.case, g.soc, g.backend] for g in _groups()])
    seen = set()
    for seed in ("1", "2", "3", "4"):
        out = subprocess.run([sys.executable, "-c", ASSIGN_IN_A_FRESH_PROCESS, groups],
                             env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)},
                             capture_output=True, text=True, timeout=60, check=True)
        seen.add(out.stdout)
    assert len(seen) == 1, seen


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 20])
def test_every_group_on_exactly_one_shard_and_balanced(count: int) -> None:
    groups = _groups()
    owner = assign(dict.fromkeys(groups, 1), count)
    assert set(owner) == set(groups)  # covering; a dict: each group on one shard
    assert set(owner.values()) <= set(range(1, count + 1))
    sizes = [list(owner.values()).count(k) for k in range(1, count + 1)]
    assert max(sizes) - min(sizes) <= 1, sizes  # equal weights: no shard idles while one has 2 more
    if count >= len(groups):
        assert sorted(owner.values()) == list(range(1, len(groups) + 1))


def test_heavy_groups_are_spread_before_light_ones() -> None:
    """Two cases of 20 tests and two smoke blocks of 5 on two shards: one case each (sorting by
    hash alone could put both cases on one shard: 40 tests against 10)."""
    weights = {BuildGroup("stories260k", "SM8650", "htp"): 20,
               BuildGroup("llama3_2_toy", "SM8650", "htp"): 20,
               BuildGroup("", "SM8650", "htp"): 5, BuildGroup("", "SM8750", "htp"): 5}
    owner = assign(weights, 2)
    load = [sum(w for g, w in weights.items() if owner[g] == k) for k in (1, 2)]
    assert load == [25, 25]


def test_a_group_of_skipped_tests_still_lands_on_one_shard() -> None:
    owner = assign({BuildGroup("a", "SM8650", "htp"): 0, BuildGroup("b", "SM8650", "htp"): 0}, 2)
    assert sorted(owner.values()) == [1, 2]


def test_selection_round_trip_and_line() -> None:
    g1, g2 = BuildGroup("stories260k", "SM8650", "htp"), BuildGroup("", "SM8650", "htp")
    combos = [("stories260k × SM8650-htp-emulator", 1), ("stories260k × SM8650-htp-x86-runner", 1),
              ("- × SM8650-htp-emulator", 2), ("stories260k × SM8650-htp-emulator", 1)]
    chosen = selection(Shard(1, 2), combos, 10, [f"t{i}" for i in range(14)], [g1], unsplit=1)
    assert chosen.combinations == ("stories260k × SM8650-htp-emulator",
                                   "stories260k × SM8650-htp-x86-runner")
    assert (chosen.total_combinations, chosen.tests, chosen.total_tests) == (3, 10, 14)
    assert chosen.line() == ("shard 1/2: 2 of 3 combinations (model case × target), 10 of 14 "
                             "tests; builds here: stories260k SM8650-htp")
    assert Selection.from_dict(json.loads(json.dumps(chosen.to_dict()))) == chosen
    assert str(g2) == "(no model case) SM8650-htp"
    # the collection digest ignores order and sees any other test id
    again = selection(Shard(2, 2), combos, 4, [f"t{i}" for i in reversed(range(14))], [g2])
    other = selection(Shard(2, 2), combos, 4, [f"t{i}" for i in range(13)] + ["x"], [g2])
    assert again.collected == chosen.collected != other.collected


@pytest.mark.parametrize("data", [{}, {"shard": "3/2"}, "1/2", {"shard": "1/2", "combinations": 3}])
def test_a_damaged_selection_record_is_one_line(data: object) -> None:
    with pytest.raises(ShardError) as e:
        Selection.from_dict(data)
    assert "\n" not in str(e.value)
