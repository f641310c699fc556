"""The artifact cache across real processes: a damaged entry is repaired once, and the leftovers
of a killed build are swept by the next run while a live build in another process is left alone."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pytest_qnn_genai.cache import ArtifactCache

VERSIONS = {"v": "1"}

REPAIRER = """
import sys, time, warnings
from pathlib import Path
from pytest_qnn_genai.cache import ArtifactCache, CacheWarning
root, log, ready, go = map(Path, sys.argv[1:5])
def build(out):
    with open(log, "a") as f:
        f.write(f"build {sys.argv[5]}\\n")
    time.sleep(0.5)
    (out / "a.bin").write_bytes(b"payload")
cache = ArtifactCache(root, {"v": "1"}, progress=lambda m: None)
ready.touch()
deadline = time.monotonic() + 30
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.002)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    entry = cache.get_or_build("s", {"k": 1}, build)
damaged = sum(issubclass(w.category, CacheWarning) for w in caught)
print(entry.hit, entry.file("a.bin").read_bytes().decode(), damaged)
"""

SLOW_BUILDER = """
import sys, time
from pathlib import Path
from pytest_qnn_genai.cache import ArtifactCache
root, started, release = map(Path, sys.argv[1:4])
def build(out):
    (out / "partial.bin").write_bytes(b"half")
    started.write_text(str(out))
    deadline = time.monotonic() + 30
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    (out / "a.bin").write_bytes(b"done")
entry = ArtifactCache(root, {"v": "1"}, progress=lambda m: None).get_or_build(
    "s", {"k": sys.argv[4]}, build)
print(entry.hit, entry.file("a.bin").read_bytes().decode())
"""


def _wait_for(paths: list[Path], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"timed out waiting for {paths}"
        time.sleep(0.01)


def test_damaged_entry_found_by_three_processes_is_rebuilt_once(tmp_path: Path) -> None:
    root, log, go = tmp_path / "c", tmp_path / "builds.log", tmp_path / "go"
    cache = ArtifactCache(root, VERSIONS, progress=lambda _m: None)
    entry = cache.get_or_build("s", {"k": 1}, lambda out: (out / "a.bin").write_bytes(b"payload"))
    entry.file("a.bin").write_bytes(b"paylaod")  # same size, wrong content
    ready = [tmp_path / f"ready{i}" for i in range(3)]
    procs = [subprocess.Popen([sys.executable, "-c", REPAIRER, str(root), str(log), str(r), str(go),
                               str(i)], stdout=subprocess.PIPE, text=True)
             for i, r in enumerate(ready)]
    _wait_for(ready)
    go.touch()  # all three look at the damaged entry at once
    outs = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert len(log.read_text().splitlines()) == 1
    assert outs == ["False payload 1", "True payload 0", "True payload 0"]
    assert sorted(p.name for p in (root / "s").iterdir()) == [entry.key]  # no trash, no locks


def test_killed_build_leftovers_are_swept_but_a_live_build_survives(tmp_path: Path) -> None:
    root, release = tmp_path / "c", tmp_path / "release"
    started = {name: tmp_path / f"started-{name}" for name in ("live", "doomed")}
    procs = {name: subprocess.Popen([sys.executable, "-c", SLOW_BUILDER, str(root), str(path),
                                     str(release), name], stdout=subprocess.PIPE, text=True)
             for name, path in started.items()}
    try:
        _wait_for(list(started.values()))
        os.kill(procs["doomed"].pid, signal.SIGKILL)
        procs["doomed"].communicate(timeout=30)
        cache = ArtifactCache(root, VERSIONS, progress=lambda _m: None)
        live_tmp, doomed_tmp = (Path(started[n].read_text()) for n in ("live", "doomed"))
        doomed_key, live_key = cache.key("s", {"k": "doomed"}), cache.key("s", {"k": "live"})
        stage = root / "s"
        trash = stage / f".trash-{doomed_key}-123-456"  # killed while deleting an old entry
        trash.mkdir()
        (trash / "big.bin").write_bytes(b"x")
        foreign = stage / ".tmp-abcd1234-old"  # not the cache's name format: never touched
        foreign.mkdir()
        assert doomed_tmp.is_dir() and (stage / f"{doomed_key}.lock").exists()

        cache.get_or_build("s", {"k": "other"}, lambda out: (out / "a.bin").write_bytes(b"o"))

        assert not doomed_tmp.exists() and not trash.exists()
        assert not (stage / f"{doomed_key}.lock").exists()
        assert cache.stats.leftovers_removed == 3
        assert live_tmp.is_dir() and (live_tmp / "partial.bin").exists()  # its owner is alive
        assert (stage / f"{live_key}.lock").exists() and foreign.is_dir()
        rebuilt = cache.get_or_build("s", {"k": "doomed"},
                                     lambda out: (out / "a.bin").write_bytes(b"again"))
        assert not rebuilt.hit and rebuilt.file("a.bin").read_bytes() == b"again"
    finally:
        release.touch()
    out, _ = procs["live"].communicate(timeout=60)
    assert procs["live"].returncode == 0 and out.strip() == "False done"
    names = sorted(p.name for p in stage.iterdir())
    assert names == sorted([live_key, doomed_key, cache.key("s", {"k": "other"}), foreign.name])
