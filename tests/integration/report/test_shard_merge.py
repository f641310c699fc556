"""Two shards of real suites merged make the report of one unsharded run.

``pytest suites/gate suites/smoke --soc SM8650`` (both default cases; upstream's x86 runners too
when the outer run has ``--executorch-src``) runs once whole and once as ``--qnn-shard 1/2`` and
``2/2``, each with ``--qnn-report``; ``python -m pytest_qnn_genai.report merge`` makes one report
of the shards. It must hold the same records (tests, figures, values, verdicts, judges) and
counts as the whole run and the same cache entries in its fingerprint; the shards' outcomes must
add up to the whole run's, and no build of a case × SoC-backend may be used by both shards.

The runs share the outer session's artifact cache (warm: well under a minute each, less without
the x86 runners; a cold cache builds both cases' programs first, once).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from pytest_qnn_genai.report.results import RESULTS_NAME, ResultsFile
from tests.support import XDIST_ENV

REPO_ROOT = Path(__file__).resolve().parents[3]
SUITES = ("suites/gate", "suites/smoke")
RUN_TIMEOUT_S = 3600  # a cold cache builds every program of both cases
MERGE_TIMEOUT_S = 300
# stages whose entries belong to one case × SoC-backend: never used by two shards
GROUP_STAGES = {"quantize", "compile", "legacy-build", "genai-build", "smoke-lower", "qdq-logits",
                "qdq-encodings"}
OUTCOME = re.compile(r"(\d+) (passed|failed|skipped|deselected|xfailed|xpassed|errors?)\b")


def _env(executorch_src: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("QNN_GENAI_") and k not in XDIST_ENV  # an inner run of its own,
           and k != "CI"}  # not a CI run: what it skips is its own choice of targets
    env["PYTHONPATH"] = str(REPO_ROOT)
    if executorch_src is not None:
        env["QNN_GENAI_EXECUTORCH_SRC"] = str(executorch_src)
    return env


def _suites(report: Path, settings, *extra: str) -> tuple[subprocess.CompletedProcess[str],  # noqa: ANN001
                                                          dict[str, int]]:
    command = [sys.executable, "-m", "pytest", *SUITES, "--soc", "SM8650", "--qnn-cache-dir",
               str(settings.cache_dir), "--qnn-report", str(report), "-p", "no:cacheprovider",
               "-p", "no:randomly", "-q", *extra]
    run = subprocess.run(command, cwd=REPO_ROOT, env=_env(settings.executorch_src), text=True,
                         capture_output=True, timeout=RUN_TIMEOUT_S)
    assert run.returncode in (0, 1), run.stdout[-4000:] + run.stderr[-2000:]
    last = run.stdout.strip().splitlines()[-1]
    outcomes = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
                for n, kind in OUTCOME.findall(last)}
    return run, outcomes


def _results(report: Path) -> ResultsFile:
    [path] = report.glob(f"*/{RESULTS_NAME}")
    return ResultsFile.load(path)


def _records(results: ResultsFile) -> list[str]:
    return sorted(json.dumps(r.to_dict(), sort_keys=True) for r in results.records)


def _entries(results: ResultsFile, stages: set[str] | None = None) -> set[tuple[str, str, str]]:
    return {(a["stage"], a["key"], a["digest"]) for a in results.header.fingerprint["artifacts"]
            if stages is None or a["stage"] in stages}


def test_two_shards_merged_are_the_unsharded_run(tmp_path: Path, qnn_settings) -> None:  # noqa: ANN001
    whole_run, whole = _suites(tmp_path / "whole", qnn_settings)
    shard_runs = [_suites(tmp_path / f"shard-{k}", qnn_settings, "--qnn-shard", f"{k}/2")
                  for k in (1, 2)]

    # the shards ran the whole run's tests between them, with the same outcomes
    for kind in ("passed", "failed", "skipped", "xfailed", "xpassed", "error"):
        assert sum(o.get(kind, 0) for _, o in shard_runs) == whole.get(kind, 0), (kind, whole)
    for k, (run, outcomes) in enumerate(shard_runs, 1):
        line = [x for x in run.stdout.splitlines() if x.startswith(f"shard {k}/2: ")][-1]
        taken, total = map(int, re.match(rf"shard {k}/2: (\d+) of (\d+) combinations", line)
                           .groups())
        assert 0 < taken < total, line  # a real split: both shards have work
        assert outcomes["deselected"] > 0

    shards = [_results(tmp_path / f"shard-{k}") for k in (1, 2)]
    one, two = (_entries(s, GROUP_STAGES) for s in shards)
    assert one and two and not one & two  # no build of a case x SoC-backend on both shards

    merged_dir = tmp_path / "merged"
    merge = subprocess.run([sys.executable, "-m", "pytest_qnn_genai.report", "merge",
                            str(tmp_path / "shard-1"), str(tmp_path / "shard-2"), "--out",
                            str(merged_dir)], cwd=REPO_ROOT, env=_env(None), text=True,
                           capture_output=True, timeout=MERGE_TIMEOUT_S)
    assert merge.returncode == 0 and merge.stdout.startswith("merged 2 shards ("), (
        merge.stdout + merge.stderr)
    merged, single = _results(merged_dir), _results(tmp_path / "whole")
    assert single.records, whole_run.stdout[-3000:]
    assert _records(merged) == _records(single)  # tests, figures, values, verdicts, judges
    assert merged.counts() == single.counts()
    assert _entries(merged) == _entries(single)
    fp, whole_fp = merged.header.fingerprint, single.header.fingerprint
    assert {k: fp[k] for k in ("versions", "harness", "settings", "cases")} == {
        k: whole_fp[k] for k in ("versions", "harness", "settings", "cases")}
    assert "shard" not in fp and fp["merged"]["shards"] == 2
    [summary] = merged_dir.glob("*/summary.md")
    assert "| merged from | 2 shards: shard 1/2: " in summary.read_text()

