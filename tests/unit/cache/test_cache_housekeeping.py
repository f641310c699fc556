"""Bounding the artifact cache: least-recently-used eviction that spares what is in use."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache, CacheEntry, housekeeping
from pytest_qnn_genai.cache.layout import lock_path
from pytest_qnn_genai.cache.lock import KeyLock

VERSIONS = {"v": "1"}
SIZE = 10_000  # each entry: 10 kB of payload plus a manifest of well under 1 kB


def quiet(_line: str) -> None:
    pass


def _entry(cache: ArtifactCache, name: str) -> CacheEntry:
    return cache.get_or_build("s", {"n": name},
                              lambda out: (out / "a.bin").write_bytes(b"x" * SIZE),
                              label=f"case-{name}")


def _old_entries(root: Path, ages: dict[str, float]) -> dict[str, CacheEntry]:
    """Entries built by an earlier session, last used ``ages[name]`` seconds ago."""
    earlier = ArtifactCache(root, VERSIONS, progress=quiet)
    made = {name: _entry(earlier, name) for name in ages}
    now = time.time()
    for name, ago in ages.items():
        os.utime(made[name].path / "manifest.json", (now - ago, now - ago))
    return made


def _left(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "s").iterdir())


def test_a_build_evicts_least_recently_used_entries_beyond_the_bound(tmp_path: Path) -> None:
    old = _old_entries(tmp_path, {"a": 300, "b": 100, "c": 200})
    lines: list[str] = []
    cache = ArtifactCache(tmp_path, VERSIONS, progress=lines.append, max_bytes=int(2.5 * SIZE))
    d = _entry(cache, "d")
    assert _left(tmp_path) == sorted([old["b"].key, d.key])  # a, then c: the least recently used
    assert (cache.stats.evicted, cache.stats.bytes_evicted // 1000) == (2, 2 * SIZE // 1000)
    evictions = [line for line in lines if "evicted" in line]
    assert [line.split()[4] for line in evictions] == ["case-a", "case-c"]
    assert evictions[0].startswith("[qnn-genai] cache: evicted s case-a (10.")
    assert evictions[0].endswith(" kB, least recently used)")


def test_entries_in_use_this_session_are_never_evicted(tmp_path: Path) -> None:
    old = _old_entries(tmp_path, {"a": 300, "b": 200, "c": 30})
    lines: list[str] = []
    cache = ArtifactCache(tmp_path, VERSIONS, progress=lines.append, max_bytes=int(2.5 * SIZE),
                          session_start=time.time() - 60)  # c: used by another xdist worker
    assert _entry(cache, "a").hit  # a: used by this process...
    os.utime(old["a"].path / "manifest.json", (1e9, 1e9))  # ...even if its use was not recorded
    d = _entry(cache, "d")
    assert _left(tmp_path) == sorted([old["a"].key, old["c"].key, d.key])  # only b could go
    assert any("is over its bound" in line for line in lines)


def test_an_entry_being_rebuilt_is_not_evicted(tmp_path: Path) -> None:
    old = _old_entries(tmp_path, {"a": 300, "b": 200, "c": 100})
    with KeyLock(lock_path(tmp_path / "s", old["a"].key)):  # another process is rebuilding a
        result = housekeeping.evict(tmp_path, max_bytes=int(2.5 * SIZE))
    assert [i.label for i in result.evicted] == ["case-b"]
    assert _left(tmp_path) == sorted([old["a"].key, old["c"].key])


def test_an_entry_used_while_it_is_evicted_is_put_back(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    old = _old_entries(tmp_path, {"a": 300})
    rename = os.rename

    def rename_as_a_reader_touches(src: Path, dst: Path) -> None:
        rename(src, dst)
        if Path(dst).name.startswith(".trash-"):  # a reader marked it used just before the move
            os.utime(Path(dst) / "manifest.json")

    monkeypatch.setattr(os, "rename", rename_as_a_reader_touches)
    assert housekeeping.evict(tmp_path, max_bytes=0).evicted == []
    monkeypatch.undo()
    assert _left(tmp_path) == [old["a"].key]
    assert ArtifactCache(tmp_path, VERSIONS, progress=quiet).lookup("s", old["a"].key) is not None


def test_unused_before_removes_old_entries_only(tmp_path: Path) -> None:
    old = _old_entries(tmp_path, {"a": 3 * 86400, "b": 60, "c": 2 * 86400})
    result = housekeeping.evict(tmp_path, unused_before=time.time() - 86400)
    assert sorted(i.label for i in result.evicted) == ["case-a", "case-c"]
    assert _left(tmp_path) == [old["b"].key]


def test_sweep_spares_leftovers_of_a_held_key(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path, VERSIONS, progress=quiet)
    live, dead = cache.key("s", {"n": "live"}), cache.key("s", {"n": "dead"})
    stage = tmp_path / "s"
    for key in (live, dead):
        (stage / f".tmp-{key}-x1").mkdir(parents=True)
    (stage / f"{dead}.lock").write_text("4242 gone-host\n")
    with KeyLock(lock_path(stage, live)):
        removed = cache.sweep()
    assert sorted(p.name for p in removed) == sorted([f".tmp-{dead}-x1", f"{dead}.lock"])
    assert _left(tmp_path) == [f".tmp-{live}-x1"]
