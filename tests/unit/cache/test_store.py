"""The artifact cache: content keys, atomic entries, damage detection, one build per key, locks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.cache.lock import KeyLock, holder
from pytest_qnn_genai.cache.store import CacheWarning

VERSIONS = {"torch": "t", "executorch": "e", "qairt": "q", "pytest-qnn-genai": "p"}


def quiet(_line: str) -> None:
    pass


def _writer(payload: bytes, calls: list[int]):
    def build(out: Path) -> None:
        calls.append(1)
        (out / "artifact.bin").write_bytes(payload)
    return build


def test_miss_then_hit_and_manifest(tmp_path: Path) -> None:
    cache, calls = ArtifactCache(tmp_path, VERSIONS, progress=quiet), []
    first = cache.get_or_build("compile", {"soc": "SM8650"}, _writer(b"x" * 100, calls))
    second = cache.get_or_build("compile", {"soc": "SM8650"}, _writer(b"y", calls))
    assert (first.hit, second.hit, len(calls)) == (False, True, 1)
    assert second.file("artifact.bin").read_bytes() == b"x" * 100
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["inputs"] == {"soc": "SM8650"}
    assert manifest["files"]["artifact.bin"]["size"] == 100
    assert (cache.stats.hits, cache.stats.builds, cache.stats.bytes_built) == (1, 1, 100)
    assert sorted(p.name for p in (tmp_path / "compile").iterdir()) == [first.key]  # no lock file


def test_key_covers_inputs_upstream_and_versions(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path, VERSIONS)
    base = cache.key("compile", {"soc": "SM8650"}, ["abc"])
    assert cache.key("compile", {"soc": "SM8750"}, ["abc"]) != base
    assert cache.key("compile", {"soc": "SM8650"}, ["abd"]) != base
    assert cache.key("quantize", {"soc": "SM8650"}, ["abc"]) != base
    assert ArtifactCache(tmp_path, {**VERSIONS, "qairt": "other"}).key(
        "compile", {"soc": "SM8650"}, ["abc"]) != base


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "manifest"])
def test_damaged_entry_is_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    cache, calls = ArtifactCache(tmp_path, VERSIONS, progress=quiet), []
    entry = cache.get_or_build("s", {}, _writer(b"0123456789", calls))
    f = entry.file("artifact.bin")
    if damage == "truncate":
        f.write_bytes(b"01234")
    elif damage == "flip":
        f.write_bytes(b"0123456780")
    elif damage == "delete":
        f.unlink()
    else:
        (entry.path / "manifest.json").write_text("{not json")
    with pytest.warns(CacheWarning, match="damaged"):
        again = cache.get_or_build("s", {}, _writer(b"0123456789", calls))
    assert not again.hit and len(calls) == 2 and cache.stats.rebuilt_damaged == 1
    assert again.file("artifact.bin").read_bytes() == b"0123456789"
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [again.key]  # no trash, no lock


def test_lookup_discards_a_damaged_entry(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path, VERSIONS, progress=quiet)
    entry = cache.get_or_build("s", {}, _writer(b"abc", []))
    entry.file("artifact.bin").write_bytes(b"abd")
    with pytest.warns(CacheWarning, match="does not match its recorded sha256"):
        assert cache.lookup("s", entry.key) is None
    assert list((tmp_path / "s").iterdir()) == []
    assert cache.lookup("s", entry.key) is None  # absent now: no warning, no error


def test_failed_build_leaves_no_entry(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path, VERSIONS, progress=quiet)

    def broken(out: Path) -> None:
        (out / "half.bin").write_bytes(b"half")
        raise RuntimeError("compile crashed")

    with pytest.raises(RuntimeError, match="compile crashed"):
        cache.get_or_build("s", {}, broken)
    assert list((tmp_path / "s").iterdir()) == []  # no .tmp- folder, no lock file
    assert cache.lookup("s", cache.key("s", {})) is None


def test_rebuild_ignores_entries_older_than_the_session(tmp_path: Path) -> None:
    calls: list[int] = []
    ArtifactCache(tmp_path, VERSIONS, progress=quiet).get_or_build("s", {}, _writer(b"old", calls))
    rebuild = ArtifactCache(tmp_path, VERSIONS, rebuild_before=time.time(), progress=quiet)
    first = rebuild.get_or_build("s", {}, _writer(b"new", calls))
    second = rebuild.get_or_build("s", {}, _writer(b"newer", calls))
    assert (first.hit, second.hit, len(calls)) == (False, True, 2)
    assert second.file("artifact.bin").read_bytes() == b"new"
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [first.key]


def test_a_hit_records_its_use(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path, VERSIONS, progress=quiet)
    entry = cache.get_or_build("s", {}, _writer(b"x", []))
    manifest = entry.path / "manifest.json"
    os.utime(manifest, (1e9, 1e9))  # last used in 2001
    assert cache.get_or_build("s", {}, _writer(b"x", [])).hit
    assert manifest.stat().st_mtime > time.time() - 60
    assert json.loads(manifest.read_text())["created"] > 1e9  # created is kept in the content


def test_progress_names_stage_and_label(tmp_path: Path) -> None:
    lines: list[str] = []
    ArtifactCache(tmp_path, VERSIONS, progress=lines.append).get_or_build(
        "compile", {}, _writer(b"x", []), label="stories260k SM8650-htp-emulator")
    assert lines[0] == "[qnn-genai] build compile stories260k SM8650-htp-emulator: started"
    assert lines[-1].startswith(
        "[qnn-genai] build compile stories260k SM8650-htp-emulator: done in")


def test_key_lock_excludes_other_holders_and_removes_its_file(tmp_path: Path) -> None:
    path = tmp_path / "k.lock"
    first, second = KeyLock(path), KeyLock(path)
    assert first.acquire(blocking=False)
    assert holder(path).startswith(f"{os.getpid()} ")
    assert not second.acquire(blocking=False)  # another open file, same process: excluded
    first.release()
    assert not path.exists()
    assert second.acquire(blocking=False)
    second.release()


def test_key_lock_never_has_two_holders_while_files_are_removed(tmp_path: Path) -> None:
    """Each release removes the file, so a waiter must lock the new file, not the old one."""
    path, inside, worst = tmp_path / "k.lock", [0], [0]
    guard = threading.Lock()

    def worker() -> None:
        for _ in range(40):
            with KeyLock(path):
                with guard:
                    inside[0] += 1
                    worst[0] = max(worst[0], inside[0])
                time.sleep(0.0005)
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert worst[0] == 1 and not path.exists()


BUILDER = """
import sys, time
from pathlib import Path
from pytest_qnn_genai.cache import ArtifactCache
def build(out):
    with open(sys.argv[2], "a") as log:
        log.write("build\\n")
    time.sleep(1.0)
    (out / "a.bin").write_bytes(b"payload")
cache = ArtifactCache(Path(sys.argv[1]), {"v": "1"}, progress=lambda m: None)
entry = cache.get_or_build("s", {"k": 1}, build)
print(entry.hit, entry.file("a.bin").read_bytes().decode())
"""


def test_one_build_per_key_across_processes(tmp_path: Path) -> None:
    log = tmp_path / "builds.log"
    procs = [subprocess.Popen([sys.executable, "-c", BUILDER, str(tmp_path / "c"), str(log)],
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert log.read_text().count("build") == 1
    assert outs == ["False payload", "True payload", "True payload"]
