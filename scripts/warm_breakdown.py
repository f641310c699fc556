#!/usr/bin/env python
"""Where a warm run of the suites spends its wall time (not a test): prints one table.

    python scripts/warm_breakdown.py [--rounds N] [PYTEST ARGS...]
    # default pytest args: suites --ignore suites/perf -p no:randomly

Each round runs, from the repository root and on the default artifact cache (warm it first):

- ``pytest --co -q suites``: the bare start-up (imports, plugin set-up, collection);
- the suites with this file loaded as a plugin (``-p warm_breakdown``), which times every
  emulator run the suites make: the host runner's (``runtime.run.run``, ``run_method`` and
  ``prompt_logits``, the three entry points the pipeline calls: loading the .pte into the
  emulator and generating, one method, teacher-forced prompt rows for held-out perplexity) and
  upstream's x86 runners' on the x86-runner target (``DeviceWorkspace._run``: one
  qnn_llama_runner / qnn_executor_runner call and the pull of its outputs);

and reports wall time = start-up + emulator runs (host runner, upstream's runners) + the rest
(everything else: loading cached artifacts, checks, builds if the cache was not warm). The
medians over the rounds are printed, with the share of the wall time outside start-up and
emulator runs (the harness's own overhead, which the README bounds).
The artifact-cache summary line of the last round is printed too (0 builds = warm).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ARGS = ["suites", "--ignore", "suites/perf", "-p", "no:randomly"]
OUT_ENV = "WARM_BREAKDOWN_OUT"
_spent = {"host_runner_s": 0.0, "upstream_runners_s": 0.0}


# -- the plugin (loaded into the measured pytest run) -----------------------------------------
def _timed(original: Callable[..., Any], key: str) -> Callable[..., Any]:  # Any: passed through
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _spent[key] += time.perf_counter() - start
    return timed


def pytest_configure(config: object) -> None:
    from pytest_qnn_genai.devices.workspace import DeviceWorkspace
    from pytest_qnn_genai.runtime import run as run_module

    for name in ("run", "run_method", "prompt_logits"):  # imported at call time: patched here
        setattr(run_module, name, _timed(getattr(run_module, name), "host_runner_s"))
    DeviceWorkspace._run = _timed(DeviceWorkspace._run, "upstream_runners_s")  # type: ignore[method-assign]


def pytest_unconfigure(config: object) -> None:
    out = os.environ.get(OUT_ENV)
    if out and not os.environ.get("PYTEST_XDIST_WORKER"):
        Path(out).write_text(json.dumps(_spent))


# -- the runner -----------------------------------------------------------------------------------
def _pytest(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=3600)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 5):
        sys.exit(f"pytest {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    return wall, done.stdout


def main(argv: list[str]) -> int:
    rounds = 1
    if argv[:1] == ["--rounds"]:
        rounds, argv = int(argv[1]), argv[2:]
    args = argv or DEFAULT_ARGS
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    rows: list[tuple[float, float, float, float]] = []
    summary = ""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "emulator.json"
        for _ in range(rounds):
            startup, _ = _pytest(["--co", "-q", "suites", "-p", "no:cacheprovider"], env)
            wall, stdout = _pytest([*args, "-q", "-p", "no:cacheprovider", "-p", "warm_breakdown"],
                                   {**env, OUT_ENV: str(out)})
            spent = json.loads(out.read_text())
            rows.append((wall, startup, spent["host_runner_s"], spent["upstream_runners_s"]))
            summary = next((x for x in stdout.splitlines() if " hits, " in x), "")
    wall, startup, host, upstream = (statistics.median(r[i] for r in rows) for i in range(4))
    rest = wall - startup - host - upstream
    shares = sorted(100 * (r[0] - r[1] - r[2] - r[3]) / r[0] for r in rows)
    print(f"pytest {' '.join(args)}  (median of {rounds})")
    print(f"  wall {wall:6.1f} s = start-up {startup:.1f} s + emulator runs {host + upstream:.1f} s "
          f"(host runner {host:.1f} s, upstream's x86 runners {upstream:.1f} s) "
          f"+ the rest {rest:.1f} s ({100 * rest / wall:.0f} % of the wall time; "
          f"{shares[0]:.0f}-{shares[-1]:.0f} % over the rounds)")
    print(f"  cache: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
