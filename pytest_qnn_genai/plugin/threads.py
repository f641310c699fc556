"""Torch's CPU threads when several of the run's processes share the cores.

Measured hazard (2 vCPUs, torch 2.13 CPU wheel, its OpenMP pool; ``scripts/bench_harness.py
threads``): two processes with torch's default of one thread per core each spend ~40 % more CPU
seconds on the same work than with one thread each (19.0 against 13.6 CPU s for 400 rounds of a
512² matmul and a 16M-element reduction; wall 19.1 against 13.7 s): each parallel region's
threads spin and wait for a sibling the other process keeps off its core. A cold ``make gate``
under ``-n auto`` runs two xdist workers, the prebuild and its llama.py builds on 2 cores at once:
it spent 1491 CPU s where the one-worker run spent 1340 (every role 11-14 % more), which put it
at 0.65 of the one-worker wall time though it kept 1.97 cores busy.

So when more than one of the run's processes works at once (two or more xdist workers, or the
prebuild beside the tests), each gets ``cores // processes`` threads, at least one: torch in this
process (``torch.set_num_threads`` if it is imported, else torch reads the variable when it is)
and every process it starts (``OMP_NUM_THREADS``: the prebuild, llama.py's builds). A user's own
``OMP_NUM_THREADS`` wins; one process alone keeps torch's default.
"""
from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

THREADS_ENV = "OMP_NUM_THREADS"


def per_process(cores: int, processes: int) -> int | None:
    """Threads for each of ``processes`` processes working at once on ``cores`` (None: one
    process, torch's default)."""
    return None if processes <= 1 else max(1, cores // processes)


def share_cores(processes: int, environ: MutableMapping[str, str] | None = None) -> int | None:
    """Give this process and those it starts their share of the cores; the threads set, or None
    (one process, or the user set ``OMP_NUM_THREADS``)."""
    environ = os.environ if environ is None else environ
    threads = per_process(len(os.sched_getaffinity(0)), processes)
    if threads is None or environ.get(THREADS_ENV):
        return None
    environ[THREADS_ENV] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    return threads
