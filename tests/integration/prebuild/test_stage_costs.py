"""scripts/stage_costs.py, the docs' scaling table's tool: a stage built alone in its own
prebuild process, its CPU seconds, peak RSS and cache MB read back; on a warm cache it says hit.
Its ``rates`` stage measures the emulator's prompt and decode tok/s of a built .pte and refuses,
in one line, a case whose .pte is not built."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.standin_plumbing import REPO_ROOT

TIMEOUT_S = 900


def _run(cache: Path, stages: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "stage_costs.py"),
                           "--models", "stories260k", "--stages", stages, "--cache", str(cache)],
                          capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO_ROOT)


def _rows(cache: Path, stages: str) -> list[list[str]]:
    run = _run(cache, stages)
    assert run.returncode == 0, run.stderr[-3000:]
    return [[cell.strip() for cell in line.split("|")[1:-1]]
            for line in run.stdout.splitlines() if line.startswith("| stories260k |")]


def test_a_stage_measured_alone_then_a_hit(tmp_path: Path) -> None:
    [row] = _rows(tmp_path / "cache", "fp32-reference")
    case, stage, wall, cpu, rss, mb, prompt, decode = row
    assert (case, stage) == ("stories260k", "fp32-reference")
    assert float(cpu) > 0 and float(wall) > 0
    assert 100 < float(rss.replace(",", "")) < 8000  # a Python with torch, a 260K model
    assert float(mb.replace(",", "")) > 0
    assert (prompt, decode) == ("", "")  # a build has no rates
    [again] = _rows(tmp_path / "cache", "fp32-reference")
    assert again[4] == "hit"  # the peak RSS column: nothing was built


def test_the_rates_of_the_built_pte(qnn_pipeline, qnn_settings, case, sm8650_emulator) -> None:
    qnn_pipeline.pte_entry(case, sm8650_emulator)  # built here, or a hit of the session's cache
    [row] = _rows(qnn_settings.cache_dir, "rates")
    _, stage, wall, cpu, rss, mb, prompt, decode = row
    assert stage == "rates" and float(cpu) > 0
    assert float(mb) == 0.0  # measuring builds nothing
    assert float(prompt) > 0 and float(decode) > 0
    assert float(prompt) > float(decode)  # a prompt pass computes many positions a call


def test_rates_without_a_built_pte_are_refused_in_one_line(tmp_path: Path) -> None:
    run = _run(tmp_path / "cache", "rates")
    assert run.returncode != 0
    last = (run.stderr or run.stdout).strip().splitlines()[-1]
    assert "rates stories260k" in last and "not in the cache" in last, last
