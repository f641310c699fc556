"""scripts/stage_costs.py, the docs' scaling table's tool: a stage built alone in its own
prebuild process, its CPU seconds, peak RSS and cache MB read back; on a warm cache it says hit."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.standin_plumbing import REPO_ROOT

TIMEOUT_S = 900


def _costs(cache: Path) -> list[str]:
    run = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "stage_costs.py"),
                          "--models", "stories260k", "--stages", "fp32-reference",
                          "--cache", str(cache)], capture_output=True, text=True,
                         timeout=TIMEOUT_S, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return [line for line in run.stdout.splitlines() if line.startswith("| stories260k |")]


def test_a_stage_measured_alone_then_a_hit(tmp_path: Path) -> None:
    [row] = _costs(tmp_path / "cache")
    _, case, stage, wall, cpu, rss, mb, _ = [cell.strip() for cell in row.split("|")]
    assert (case, stage) == ("stories260k", "fp32-reference")
    assert float(cpu) > 0 and float(wall) > 0
    assert 100 < float(rss.replace(",", "")) < 8000  # a Python with torch, a 260K model
    assert float(mb.replace(",", "")) > 0
    [again] = _costs(tmp_path / "cache")
    assert again.split("|")[5].strip() == "hit"  # the peak RSS column: nothing was built
