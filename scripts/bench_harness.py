#!/usr/bin/env python
"""Benchmarks of the gate itself (not a test): prints one table.

    python scripts/bench_harness.py overhead [--cache-dir DIR] [--rounds N]
    python scripts/bench_harness.py cold-warm [--soc SM8650] [--workers 2]    # minutes
    python scripts/bench_harness.py cold-cores [--soc SM8650] [--models NAME] [--one-worker-first]
                                               [--only default|one]
    python scripts/bench_harness.py build-cpu [--soc SM8650] [--models NAME]   # minutes
    python scripts/bench_harness.py threads                                    # about a minute
    python scripts/bench_harness.py isa                                        # about a minute
    python scripts/bench_harness.py all

overhead   host-runner overhead over raw ``Method.execute``: per round, ``runner_overhead_s``
           (prefill + decode time not spent in execute: inputs, KV copies) against the summed
           ``execute_s``, for the new flow's cached .pte (and the legacy .pte when cached).
cold-warm  wall time of ``pytest suites/gate`` with a fresh ``--qnn-cache-dir`` (cold: builds
           everything) and again on the same cache (warm), then the artifact-cache build counts
           under ``-n N`` on another fresh cache, parsed from the "N hits, M builds" summary line.
cold-cores ``make gate``'s pytest (``pytest suites --soc SOC``) on a fresh ``--qnn-cache-dir``
           each, one after the other (two cold gates: the longest mode): the default (``-n auto``, builds
           scheduled ahead) first, then one worker building each entry when a test asks
           (``-n 1 --no-qnn-prebuild``), or the other way round:
           wall times and their ratio, the summed build seconds and builds of the summary
           line, the CPU seconds of the run's process tree (every process in it: this script
           is its subreaper, so orphans count too) and the cores they kept busy on average,
           the load average before and after, and each role's own CPU seconds (pytest, xdist
           workers, prebuild, llama.py, runner build, upstream runners: ``cpu_roles.py``).
build-cpu  how many cores one build keeps busy: the new flow's quantize + compile (in this
           process) and llama.py's build (a subprocess) of one case on a fresh cache, one at a
           time, each with its wall time and its CPU seconds (this process's and its waited-for
           children's). A build that keeps both cores busy alone leaves a second worker nothing
           to gain: what ``cold-cores``' ratio can reach is bounded by it.
threads    what torch's threads cost when processes share the cores: one torch workload (matmuls
           and a reduction) alone, then in as many processes at once as there are cores, with
           torch's default threads and with one thread each: wall and CPU seconds per process
           (the measurement behind ``pytest_qnn_genai/threads.py``).
isa        what the pinned numeric path costs: torch workloads (a transformer layer's forward,
           as calibration runs it, and the matmul/reduction of ``threads``) with one thread, on
           the pinned AVX2 path (``pytest_qnn_genai/isa.py``) and on the path this machine's
           torch picks unpinned, each alone, three times (the measurement behind ``isa.py``).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_qnn_genai.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE_LINE = re.compile(r"(\d+) hits, (\d+) builds")
BUILD_SECONDS = re.compile(r"builds \(([\d.]+)s building")
OUTCOME = re.compile(r"^=* ?(\d+ (?:passed|failed).*) in [\d.]+s", re.MULTILINE)
PYTEST_TIMEOUT_S = 5400  # about twice a cold one-worker gate of the three cases on 2 cores


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def emulator_pipeline(cache_dir: Path) -> Pipeline:
    """A pipeline on ``cache_dir`` with the emulator SDK found (or provisioned) and activated."""
    import executorch.runtime  # noqa: F401  (before the SDK preload: see host_runner)

    from pytest_qnn_genai.cache import ArtifactCache
    from pytest_qnn_genai.pipeline import Pipeline
    from pytest_qnn_genai.sdk import activate, resolve_sdk
    from pytest_qnn_genai.sdk.versions import stack

    sdk = resolve_sdk(None, cache_dir)
    if sdk is None:
        raise SystemExit("bench_harness: no QNN SDK (install onnxruntime-qnn or set QNN_SDK_ROOT)")
    activate(sdk)
    return Pipeline(ArtifactCache(cache_dir / "artifacts", stack(sdk)))


def overhead(cache_dir: Path, rounds: int, max_new_tokens: int) -> list[tuple[str, str]]:
    """Run each cached .pte ``rounds`` times (after a warm-up) through the HybridRunner."""
    from pytest_qnn_genai.models.registry import available
    from pytest_qnn_genai.perf.benchmark import Workload, fit_workload
    from pytest_qnn_genai.runtime.host_runner import HybridRunner
    from pytest_qnn_genai.targets import Target, soc

    pipeline = emulator_pipeline(cache_dir)
    case, target = available()["stories260k"], Target(soc("SM8650"))
    ptes = {"new": pipeline.pte(case, target).pte}  # built if not cached (minutes)
    if pipeline.cached_entry("legacy", case, target) is not None:  # never built here
        ptes["legacy"] = pipeline.artifacts("legacy", case, target).pte
    workload = Workload.for_case(case)
    rows: list[tuple[str, str]] = [("workload", f"{workload.prompt[:40]!r}..., "
                                               f"{max_new_tokens} new tokens, {rounds} rounds")]
    for name, pte in ptes.items():
        runner = HybridRunner(pte)
        ids, max_new_tokens = fit_workload(Workload(workload.prompt, max_new_tokens),
                                           case.path("tokenizer_model"), [runner])
        runner.generate(ids, max_new_tokens, stop_at_eos=False)  # warm-up
        over, execute, wall = [], [], []
        for _ in range(rounds):
            res = runner.generate(ids, max_new_tokens, stop_at_eos=False)
            executed = sum(sum(t) for t in res.extra["execute_s"].values())
            over.append(res.extra["runner_overhead_s"])
            execute.append(executed)
            wall.append(res.extra["prefill_s"] + res.extra["decode_s"])
            perf = res.perf
        med_o, med_e = statistics.median(over), statistics.median(execute)
        rows += [(f"{name}: load_s", f"{runner.load_s:.3f}"),
                 (f"{name}: prefill / decode tok/s (last)",
                  f"{perf.prefill_tok_s:.1f} / {perf.decode_tok_s:.2f} (ttft {perf.ttft_s:.3f} s)"),
                 (f"{name}: execute_s median", f"{med_e:.3f}"),
                 (f"{name}: runner_overhead_s median", f"{med_o:.4f} "
                                                       f"({med_o / med_e:.2%} of execute)"),
                 (f"{name}: prefill+decode wall median", f"{statistics.median(wall):.3f}")]
    return rows


def _pytest(args: list[str], roles: dict[str, float] | None = None,
            idle: dict[str, float] | None = None) -> tuple[float, str, int]:
    """Run pytest; its wall time, output and exit code (``roles``: filled with its tree's CPU
    seconds by role, :mod:`scripts.cpu_roles`; call its :func:`become_subreaper` first for the
    exact total; ``idle``: with the core-seconds it left idle, first and last minute apart)."""
    from scripts.cpu_roles import RoleSampler, reap_orphans

    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider",
                                 "-q"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True)
        sampler = RoleSampler(proc.pid).start()
        try:
            proc.wait(timeout=PYTEST_TIMEOUT_S)
        finally:
            sampler.stop()
            if roles is not None:
                roles.update(sampler.by_role())
            if idle is not None:
                idle.update(sampler.idle_core_s(len(os.sched_getaffinity(0))))
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reap_orphans()
        out.seek(0)
        return time.perf_counter() - start, out.read(), proc.returncode


def _builds(output: str) -> str:
    m = CACHE_LINE.search(output)
    return f"{m.group(1)} hits, {m.group(2)} builds" if m else "no cache summary line"


def cold_warm(soc_name: str, workers: int) -> list[tuple[str, str]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as cold:
        args = ["suites/gate", "--soc", soc_name, "--qnn-cache-dir", cold]
        for label in ("cold", "warm"):
            wall, out, rc = _pytest(args)
            rows.append((f"gate {label} wall", f"{wall:.1f} s (exit {rc}; {_builds(out)})"))
    with tempfile.TemporaryDirectory(prefix="bench-xdist-") as fresh:
        wall, out, rc = _pytest(["suites/gate", "--soc", soc_name, "--qnn-cache-dir", fresh,
                                 "-n", str(workers)])
        rows.append((f"gate -n {workers} fresh cache", f"{wall:.1f} s (exit {rc}; "
                                                       f"{_builds(out)})"))
    return rows


def _cpu_s(who: int) -> float:
    import resource

    use = resource.getrusage(who)
    return use.ru_utime + use.ru_stime


def build_cpu(soc_name: str, models: str | None) -> list[tuple[str, str]]:
    """One case's builds one at a time on a fresh cache: wall, CPU seconds, cores busy."""
    import resource

    from pytest_qnn_genai.models.registry import available
    from pytest_qnn_genai.targets import Target, soc

    name = models or "stories260k"
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-build-cpu-") as fresh:
        pipeline = emulator_pipeline(Path(fresh))
        case, target = available()[name], Target(soc(soc_name))
        builds = [("new flow: quantize + compile (in process)", lambda: pipeline.pte(case, target)),
                  ("llama.py build (subprocess)",
                   lambda: pipeline.artifacts("legacy", case, target))]
        for label, build in builds:
            start = time.perf_counter()
            cpu = _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN)
            build()
            wall = time.perf_counter() - start
            cpu = _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN) - cpu
            rows.append((f"{name} {label}", f"{wall:.0f} s wall, {cpu:.0f} CPU s: "
                                            f"{cpu / wall:.2f} cores busy"))
    return rows


TORCH_WORK = """
import resource, sys, time, torch
a, b, x = torch.randn(512, 512), torch.randn(512, 512), torch.randn(4096, 4096)
start, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
for _ in range(400):
    a @ b
    (x * 1.0001).sum()
now = resource.getrusage(resource.RUSAGE_SELF)
print(torch.get_num_threads(), time.perf_counter() - start,
      now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime)
"""


ISA_WORK = """
import time, torch
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).eval()
x = torch.randn(4, 128, 256)
with torch.no_grad():
    layer(x)
    start = time.perf_counter()
    for _ in range(60):
        layer(x)
    layer_s = time.perf_counter() - start
a, b, y = torch.randn(512, 512), torch.randn(512, 512), torch.randn(4096, 4096)
start = time.perf_counter()
for _ in range(400):
    a @ b
    (y * 1.0001).sum()
print(torch.backends.cpu.get_cpu_capability(), layer_s, time.perf_counter() - start)
"""


def isa_cost() -> list[tuple[str, str]]:
    """The pinned path's wall seconds against the unpinned one's, one thread, medians of three."""
    from pytest_qnn_genai import isa

    unpinned = {k: v for k, v in os.environ.items() if k not in isa.ENV}
    runs: dict[str, list[list[str]]] = {"pinned": [], "unpinned": []}
    for _ in range(3):  # alternated, so a slow spell of the machine hits both
        for name, env in (("pinned", {**unpinned, **isa.ENV}), ("unpinned", unpinned)):
            out = subprocess.run([sys.executable, "-c", ISA_WORK], text=True, timeout=600,
                                 capture_output=True, check=True,
                                 env={**env, "OMP_NUM_THREADS": "1"}).stdout.split()
            runs[name].append(out)
    medians = {name: [statistics.median(float(r[i]) for r in rs) for i in (1, 2)]
               for name, rs in runs.items()}
    rows = [(f"{name} ({rs[0][0]})", f"transformer layer {m[0]:.2f} s, matmul/reduction "
             f"{m[1]:.2f} s") for (name, rs), m in zip(runs.items(), medians.values())]
    rows.append(("pinned / unpinned", f"{medians['pinned'][0] / medians['unpinned'][0]:.2f}, "
                 f"{medians['pinned'][1] / medians['unpinned'][1]:.2f}"))
    return rows


def threads_cost() -> list[tuple[str, str]]:
    """The torch workload alone and in one process per core at once, default and 1 thread."""
    cores = len(os.sched_getaffinity(0))
    rows = []
    for together in (1, cores):
        for threads in (None, "1"):
            env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
            if threads:
                env["OMP_NUM_THREADS"] = threads
            procs = [subprocess.Popen([sys.executable, "-c", TORCH_WORK], env=env, text=True,
                                      stdout=subprocess.PIPE) for _ in range(together)]
            out = [p.communicate(timeout=600)[0].split() for p in procs]
            rows.append((f"{together} process(es), {out[0][0]} thread(s) each",
                         ", ".join(f"{float(w):.1f} s wall {float(c):.1f} CPU s"
                                   for _, w, c in out)))
    return rows


def cold_cores(soc_name: str, models: str | None, one_worker_first: bool,
               only: str | None = None) -> list[tuple[str, str]]:
    import resource

    from scripts.cpu_roles import become_subreaper

    become_subreaper()  # the CPU of processes orphaned in the tree counts too
    rows, walls = [], {}
    narrow = ["--models", models] if models else []
    runs = [("default (-n auto, prebuild)", ["-n", "auto"]),
            ("one worker (-n 1 --no-qnn-prebuild)", ["-n", "1", "--no-qnn-prebuild"])]
    if only is not None:
        runs = [runs[0] if only == "default" else runs[1]]
    for label, args in runs[::-1] if one_worker_first else runs:
        with tempfile.TemporaryDirectory(prefix="bench-cores-") as fresh:
            load, cpu = os.getloadavg()[0], _cpu_s(resource.RUSAGE_CHILDREN)
            roles: dict[str, float] = {}
            idle: dict[str, float] = {}
            wall, out, rc = _pytest(["suites", "--soc", soc_name, "--qnn-cache-dir", fresh,
                                     *narrow, *args], roles, idle)
            cpu = _cpu_s(resource.RUSAGE_CHILDREN) - cpu
            build_s = BUILD_SECONDS.search(out)
            outcome = OUTCOME.search(out)
            walls[label] = wall
            log = Path(tempfile.gettempdir()) / f"bench-cores-{len(walls)}.log"
            log.write_text(out)
            rows.append((label, f"{wall:.0f} s wall (exit {rc}: "
                                f"{outcome.group(1) if outcome else '?'}); {_builds(out)}, "
                                f"{build_s.group(1) if build_s else '?'} s building; "
                                f"{cpu:.0f} CPU s ({cpu / wall:.2f} cores busy); load "
                                f"{load:.1f} -> {os.getloadavg()[0]:.1f}; output {log}"))
            rows.append((f"  own CPU s by role ({sum(roles.values()):.0f} seen)",
                         ", ".join(f"{role} {cpu:.0f}" for role, cpu in roles.items())))
            rows.append(("  idle core-s (seen)", ", ".join(f"{span} {s:.0f}"
                                                           for span, s in idle.items())))
    if len(walls) == 2:
        default, one = walls[runs[0][0]], walls[runs[1][0]]
        rows.append(("default / one worker", f"{default / one:.2f}"))
    return rows


def main(argv: list[str] | None = None) -> int:
    from pytest_qnn_genai.settings import default_cache_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("overhead", "cold-warm", "cold-cores", "build-cpu",
                                         "threads", "isa", "all"))
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--soc", default="SM8650")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--models", default=None,
                        help="cold-cores: only these model cases; build-cpu: the case")
    parser.add_argument("--only", choices=("default", "one"),
                        help="cold-cores: run one configuration only")
    parser.add_argument("--one-worker-first", action="store_true",
                        help="cold-cores: run the one-worker configuration first")
    a = parser.parse_args(argv)
    rows: list[tuple[str, str]] = []
    if a.what in ("overhead", "all"):
        rows += overhead(a.cache_dir.resolve(), a.rounds, a.max_new_tokens)
    if a.what in ("cold-warm", "all"):
        rows += cold_warm(a.soc, a.workers)
    if a.what == "cold-cores":
        rows += cold_cores(a.soc, a.models, a.one_worker_first, a.only)
    if a.what == "build-cpu":
        rows += build_cpu(a.soc, a.models)
    if a.what == "threads":
        rows += threads_cost()
    if a.what == "isa":
        rows += isa_cost()
    print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
