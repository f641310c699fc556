"""Torch's CPU threads when several of the run's processes share the cores.

The hazard (torch's CPU wheel, its OpenMP pool; ``scripts/bench_harness.py threads`` shows it):
two processes with torch's default of one thread per core each spend markedly more CPU time on
the same work than with one thread each: each parallel region's threads spin and wait for a
sibling the other process keeps off its core. A cold ``make gate`` under ``-n auto`` runs two
xdist workers, the prebuild and its llama.py builds on the cores at once, so every role spends
more CPU than in a one-worker run, and the run gains less wall time than its busy cores suggest.

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
