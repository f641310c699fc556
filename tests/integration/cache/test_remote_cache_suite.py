"""Two machines, one remote cache, a real suite: ``pytest suites/smoke --qnn-remote-cache URL`` on
one empty local cache builds the attention blocks and uploads them to a real nginx DAV server on
loopback; the same run on a second empty local cache builds nothing, downloads every entry and
passes. The blocks' builds take up to a minute; everything else here is seconds."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import XDIST_ENV
from tests.support.dav_server import NginxDav

pytest_plugins = ["tests.support.dav_fixtures"]

REPO_ROOT = Path(__file__).resolve().parents[3]
RUN_TIMEOUT_S = 1800
SUMMARY = re.compile(r"(\d+) hits, (\d+) builds .*; remote (\S+): (\d+) downloaded \([\d.]+ MB\), "
                     r"(\d+) uploaded \([\d.]+ MB\), (\d+) rejected as damaged")


def _smoke(cache: Path, url: str, sdk_root: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    command = [sys.executable, "-m", "pytest", "suites/smoke/test_smoke.py", "-k",
               "test_only_qnn_delegate", "--soc", "SM8650", "--qnn-cache-dir", str(cache),
               "--qnn-remote-cache", url, "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
               "-W", "error::pytest_qnn_genai.cache.CacheWarning"]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("QNN_GENAI_") and k not in XDIST_ENV  # an inner run of its own,
           and k != "CI"}  # not a CI run: what it skips is its own choice of targets
    env.update(PYTHONPATH=str(REPO_ROOT), QNN_SDK_ROOT=str(sdk_root), no_proxy="127.0.0.1")
    run = subprocess.run(command, cwd=REPO_ROOT, env=env, text=True, capture_output=True,
                         timeout=RUN_TIMEOUT_S)
    match = SUMMARY.search(run.stdout)
    assert match, run.stdout[-4000:] + run.stderr[-2000:]
    hits, builds, remote, downloaded, uploaded, rejected = match.groups()
    return run, {"builds": int(builds), "remote": remote, "downloaded": int(downloaded),
                 "uploaded": int(uploaded), "rejected": int(rejected)}


def test_the_second_machine_runs_the_smoke_suite_without_building(
        dav: NginxDav, tmp_path: Path, emulator_sdk_root: Path) -> None:
    first, said = _smoke(tmp_path / "machine-1", dav.url, emulator_sdk_root)
    assert first.returncode == 0 and "2 passed" in first.stdout, first.stdout[-4000:]
    assert said == {"builds": 2, "remote": dav.url, "downloaded": 0, "uploaded": 2,
                    "rejected": 0}
    puts = [r for r in dav.requests() if r[0] == "PUT"]

    second, said = _smoke(tmp_path / "machine-2", dav.url, emulator_sdk_root)
    assert second.returncode == 0 and "2 passed" in second.stdout, second.stdout[-4000:]
    assert said == {"builds": 0, "remote": dav.url, "downloaded": 2, "uploaded": 0,
                    "rejected": 0}
    assert [r for r in dav.requests() if r[0] == "PUT"] == puts  # the second machine only read
    entries = sorted(p.name for p in (tmp_path / "machine-2" / "artifacts" / "smoke-lower").iterdir())
    assert entries == sorted(p.name for p in
                             (tmp_path / "machine-1" / "artifacts" / "smoke-lower").iterdir())
