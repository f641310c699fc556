"""Every process of a run computes with one torch thread: what makes a build a function of its key.

Contract. :func:`pin` sets torch's intra-op threads to :data:`THREADS` in this process and
``OMP_NUM_THREADS`` for every process it starts (the prebuild, llama.py's builds, upstream's
tools), whatever the cores, the number of xdist workers or the user's ``OMP_NUM_THREADS``. The
plugin pins before the prebuild starts; :class:`~pytest_qnn_genai.pipeline.Pipeline` pins on
creation, so a script's builds (``scripts/stage_costs.py``) compute as the gate's do.
:data:`THREADS` is in every cache key (:func:`pytest_qnn_genai.sdk.versions.stack`).

Why. A float reduction split over more threads adds in another order. At real size that moves
a calibration's scales in the 7th digit and, through the program built from them, the gate's
figures (the docs' measurements page, "Builds depend on torch's threads"), so a verdict held to
an accepted record at its printed resolution depended on ``-n`` and the machine's cores, and a
cached entry on who built it first. One thread per process is also what a run's processes
sharing the cores want: two processes with torch's default threads each spend markedly more CPU
on the same work (``scripts/bench_harness.py threads``).

Hazard. A machine with many cores and few workers builds slower than torch could: run more
workers (``-n auto``) for speed, never more threads. Another value of :data:`THREADS` is another
set of cache keys, so every build reruns.
"""
from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

THREADS = 1
THREADS_ENV = "OMP_NUM_THREADS"


def pin(environ: MutableMapping[str, str] | None = None) -> None:
    """Torch in this process (if imported; else it reads the variable when it is) and the
    processes it starts compute with :data:`THREADS` threads."""
    environ = os.environ if environ is None else environ
    environ[THREADS_ENV] = str(THREADS)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != THREADS:
        torch.set_num_threads(THREADS)
