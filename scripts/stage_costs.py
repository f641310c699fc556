#!/usr/bin/env python
"""What each build stage of a model case costs, each stage alone in a process (not a test).

    python scripts/stage_costs.py --models stories260k,qwen3_toy [--soc SM8650] [--cache DIR]
                                  [--stages quantize,new,rates]

For every case, the stages the gate builds for the emulator run in dependency order, each the only
step of a prebuild process of its own (``python -m pytest_qnn_genai.prebuild PLAN``, one slot,
the plugin's own code path): the GGUF import (a case that names a GGUF file), the fp32 reference,
the staged flow's quantize and compile, and llama.py's build; then ``rates``: the emulator's
prompt and decode tok/s of the staged ``.pte``, measured as the gate's ``test_emulator_benchmark``
measures them (the same workload, warm-up, rounds and minimum work: :mod:`pytest_qnn_genai.perf.
benchmark`), medians over the rounds. ``os.wait4`` gives each process's CPU seconds and peak RSS
(Linux counts the descendants it reaped: llama.py's subprocess is in them), the cache statistics
the cache MB it wrote. A stage already in the cache costs nothing and says "hit": measure on an
empty cache (the default, a new temporary folder) for a cold table. The rates want the cores to
themselves: a build beside them slows them, so rates compare only within one run of this script.

Why a process per stage: builds that share a process share its peak RSS, and the prebuild runs
two at a time; measured together the table would give every stage the largest one's memory.
Prints one Markdown table (the docs' scaling table is made of its rows).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_qnn_genai.models import registry  # noqa: E402
from pytest_qnn_genai.pipeline import products  # noqa: E402
from pytest_qnn_genai.pipeline.products import Need  # noqa: E402
from pytest_qnn_genai.plugin.options import resolve  # noqa: E402
from pytest_qnn_genai.prebuild.process import PrebuildConfig, write_plan  # noqa: E402
from pytest_qnn_genai.sdk import resolve_sdk  # noqa: E402
from pytest_qnn_genai.settings import Settings  # noqa: E402

TIMEOUT_S = 3 * 3600  # one stage of a real-size case is about half an hour on 2 cores


@dataclasses.dataclass(frozen=True)
class Cost:
    stage: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    written_mb: float
    built: bool
    rates: dict[str, float] = dataclasses.field(default_factory=dict)


RATES = "rates"  # the emulator's prompt / decode tok/s of the staged .pte (not a build)
STAGES = (products.GGUF_IMPORT, products.FP32_REFERENCE, products.QUANTIZE, "new", "legacy",
          RATES)


def stages(case_name: str, soc: str, backend: str, names: tuple[str, ...] = STAGES) -> list[Need]:
    """The emulator builds of one case the gate needs (of ``names``), dependencies first."""
    (case,) = registry.select([case_name])
    out = []
    for name in (n for n in STAGES if n in names):
        if name == products.GGUF_IMPORT:
            out += [Need(name, case_name)] if case.gguf else []
        elif name == products.FP32_REFERENCE:
            out.append(Need(name, case_name))
        else:  # the builds for the emulator, and the rates of the .pte they built
            out.append(Need(name, case_name, soc, backend))
    return out


def measure(need: Need, settings: Settings, work: Path) -> Cost:
    """Build ``need`` in a prebuild process of its own (``rates``: measure them in a process of
    their own, :func:`rates`); what it cost."""
    plan, stats = work / "plan.pickle", work / "stats.json"
    stats.unlink(missing_ok=True)
    start = time.monotonic()
    log = work / "prebuild.log"
    if need.product == RATES:
        command = [sys.executable, __file__, "--rates-of", need.case, "--soc", need.soc,
                   "--backend", need.backend, "--cache", str(settings.cache_dir),
                   "--out", str(stats)]
    else:
        write_plan(plan, PrebuildConfig(settings, session_start=time.time(), slots=1,
                                        stats_file=str(stats)), [need])
        command = [sys.executable, "-m", "pytest_qnn_genai.prebuild", str(plan)]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stderr=out, stdout=out)
    # the prebuild stops when its stdin closes (the session's end): kept open while it works;
    # reaped here only (Popen.poll would reap it first and its usage would be lost)
    deadline = time.monotonic() + TIMEOUT_S
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    while not pid:
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"{need.product} {need.case}: no end after {TIMEOUT_S} s")
        time.sleep(1)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if need.product == RATES and proc.returncode:  # its last line says why (SystemExit's)
        said = log.read_text().strip().splitlines()
        raise SystemExit(said[-1] if said else f"rates {need.case}: exit {proc.returncode}")
    failed = [line for line in log.read_text().splitlines() if ": failed (" in line]
    if proc.returncode or failed:  # a failed build costs what it cost, but measures no stage
        raise SystemExit(failed[0] if failed else
                         f"{need.product} {need.case}: the prebuild exited {proc.returncode}")
    done = json.loads(stats.read_text()) if stats.exists() else {}
    return Cost(need.product, time.monotonic() - start, usage.ru_utime + usage.ru_stime,
                usage.ru_maxrss / 1024.0, float(done.get("bytes_built", 0)) / 1e6,
                int(done.get("builds", 0)) > 0 or need.product == RATES,
                {k: float(v) for k, v in done.get("rates", {}).items()})


def rates(case_name: str, soc_name: str, backend: str, settings: Settings) -> dict[str, float]:
    """The emulator's prompt and decode tok/s of ``case_name``'s staged .pte, measured as
    ``test_emulator_benchmark`` measures them (warm-up, ``--qnn-perf-rounds`` rounds, topped up
    to the minimum work): the medians and the rounds. The .pte must be in the cache already
    (the ``new`` stage before it): this process builds nothing on its clock."""
    from pytest_qnn_genai.perf.benchmark import Minimum, generation_for
    from pytest_qnn_genai.perf.benchmark import measure as measure_rounds
    from pytest_qnn_genai.runtime.result import RunResult
    from pytest_qnn_genai.stages import gguf_import
    from pytest_qnn_genai.stages.compile import PteArtifacts
    from pytest_qnn_genai.targets import Target, soc
    from scripts.bench_harness import emulator_pipeline

    pipeline = emulator_pipeline(settings.cache_dir)
    gguf_import.install(lambda: pipeline.cache)  # a GGUF case's files, as the prebuild's
    (case,) = registry.select([case_name])
    target = Target(soc(soc_name), backend)
    entry = pipeline.cached_entry("new", case, target)
    if entry is None:
        raise SystemExit(f"rates {case_name}: the staged .pte is not in the cache (measure the "
                         "'new' stage first)")
    pte = PteArtifacts.load(entry.path).pte

    def no_phone(prompt: str, n: int) -> RunResult:
        raise AssertionError("the emulator target runs the .pte in this process")

    result = measure_rounds(generation_for(case, target, lambda: pte, no_phone),
                            settings.perf_rounds, Minimum.from_settings(settings))
    if result.shortfall:
        raise SystemExit(f"rates {case_name}: " + "; ".join(result.shortfall))
    return {"prompt_tok_s": result.median("prefill_tok_s"),
            "decode_tok_s": result.median("decode_tok_s"), "rounds": float(len(result.rounds))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="cases, comma separated")
    parser.add_argument("--soc", default="SM8650")
    parser.add_argument("--backend", default="htp")
    parser.add_argument("--cache", type=Path, help="artifact cache (default: a new empty one)")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help="the stages to measure, comma separated (a stage whose inputs are "
                             "not in the cache builds them too, within its row)")
    parser.add_argument("--rates-of", help=argparse.SUPPRESS)  # the rates stage's own process
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    defaults = resolve(lambda name: None, lambda name: None, ROOT, environ=dict(os.environ))
    if args.rates_of:
        settings = dataclasses.replace(defaults, cache_dir=args.cache)
        measured = rates(args.rates_of, args.soc, args.backend, settings)
        args.out.write_text(json.dumps({"rates": measured}))
        return 0
    if not args.models:
        parser.error("--models is required")
    names = tuple(args.stages.split(","))
    if unknown := [n for n in names if n not in STAGES]:
        parser.error(f"--stages: {', '.join(unknown)}: not one of {', '.join(STAGES)}")
    cache = args.cache or Path(tempfile.mkdtemp(prefix="stage-costs-"))
    settings = dataclasses.replace(defaults, cache_dir=cache)
    resolve_sdk(settings.qnn_sdk, cache)  # provisioned here, not on the first stage's clock
    print("| case | stage | wall s | CPU s | peak RSS MB | cache MB | prompt tok/s | decode tok/s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            for need in stages(name, args.soc, args.backend, names):
                cost = measure(need, settings, Path(work))
                rss = f"{cost.peak_rss_mb:,.0f}" if cost.built else "hit"
                rate = " | ".join(f"{cost.rates[k]:.4g}" if k in cost.rates else ""
                                  for k in ("prompt_tok_s", "decode_tok_s"))
                print(f"| {name} | {cost.stage} | {cost.wall_s:.0f} | {cost.cpu_s:.0f} | {rss} "
                      f"| {cost.written_mb:,.1f} | {rate} |", flush=True)
    print(f"\ncache: {cache}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
