"""The artifact cache: content keys, atomic entries, damage detection, one build per key."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.cache.store import CacheWarning

VERSIONS = {"torch": "t", "executorch": "e", "qairt": "q", "pytest-qnn-genai": "p"}


def _writer(payload: bytes, calls: list[int]):
    def build(out: Path) -> None:
        calls.append(1)
        (out / "artifact.bin").write_bytes(payload)
    return build


def test_miss_then_hit_and_manifest(tmp_path: Path) -> None:
    cache, calls = ArtifactCache(tmp_path, VERSIONS, progress=lambda _m: None), []
    first = cache.get_or_build("compile", {"soc": "SM8650"}, _writer(b"x" * 100, calls))
    second = cache.get_or_build("compile", {"soc": "SM8650"}, _writer(b"y", calls))
    assert (first.hit, second.hit, len(calls)) == (False, True, 1)
    assert second.file("artifact.bin").read_bytes() == b"x" * 100
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["inputs"] == {"soc": "SM8650"} and manifest["files"]["artifact.bin"]["size"] == 100
    assert (cache.stats.hits, cache.stats.builds, cache.stats.bytes_built) == (1, 1, 100)


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
    cache, calls = ArtifactCache(tmp_path, VERSIONS, progress=lambda _m: None), []
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
    assert not again.hit and len(calls) == 2
    assert again.file("artifact.bin").read_bytes() == b"0123456789"


def test_failed_build_leaves_no_entry(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path, VERSIONS, progress=lambda _m: None)

    def broken(out: Path) -> None:
        (out / "half.bin").write_bytes(b"half")
        raise RuntimeError("compile crashed")

    with pytest.raises(RuntimeError, match="compile crashed"):
        cache.get_or_build("s", {}, broken)
    assert [p.name for p in (tmp_path / "s").iterdir() if not p.name.endswith(".lock")] == []
    assert cache.lookup("s", cache.key("s", {})) is None


def test_rebuild_ignores_entries_older_than_the_session(tmp_path: Path) -> None:
    calls: list[int] = []
    ArtifactCache(tmp_path, VERSIONS, progress=lambda _m: None).get_or_build(
        "s", {}, _writer(b"old", calls))
    rebuild = ArtifactCache(tmp_path, VERSIONS, rebuild_before=time.time(), progress=lambda _m: None)
    first = rebuild.get_or_build("s", {}, _writer(b"new", calls))
    second = rebuild.get_or_build("s", {}, _writer(b"newer", calls))
    assert (first.hit, second.hit, len(calls)) == (False, True, 2)
    assert second.file("artifact.bin").read_bytes() == b"new"


def test_progress_names_stage_and_label(tmp_path: Path) -> None:
    lines: list[str] = []
    ArtifactCache(tmp_path, VERSIONS, progress=lines.append).get_or_build(
        "compile", {}, _writer(b"x", []), label="stories260k SM8650-htp-emulator")
    assert lines[0] == "[qnn-genai] build compile stories260k SM8650-htp-emulator: started"
    assert lines[-1].startswith("[qnn-genai] build compile stories260k SM8650-htp-emulator: done in")


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
