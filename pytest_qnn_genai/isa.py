"""The one numeric path every build and every CPU reference computes on: x86-64's AVX2.

Contract. :func:`pin` sets :data:`ENV` (torch's kernels, MKL's and oneDNN's code paths, each to
AVX2) in this process's environment, so torch reads it when it loads and every process it
starts (the prebuild, llama.py's builds, upstream's tools) inherits it. The package pins on
import (``pytest_qnn_genai/__init__.py``), before any of its modules loads torch. :func:`check`
refuses, in one :class:`IsaError` line, a machine without AVX2 and FMA and a torch that loaded
before the pin and dispatches elsewhere. :data:`PATH` names the path in every cache key
(:func:`pytest_qnn_genai.sdk.versions.stack`); the accepted records are one file per case, the
same on every x86-64 machine.

Why. A float kernel on another instruction set (AVX512 against AVX2) or another vendor's library
path adds in another order: the same key, code and packages then give another calibration,
another program and figures that differ in their printed digits. Left to dispatch, a record
measured on one CPU kind fails on every other (a new laptop, a new CI runner), and the only way
on was to accept whatever the tree under test measured. On AVX2 the figures follow the path,
not the machine (the docs' measurements page, "One numeric path"), and every current x86-64
machine has it.

Hazard. The pin is read once, when torch (and MKL, oneDNN) first load: torch imported before
this package (a user's conftest, another plugin) keeps the path it chose, which :func:`check`
refuses. A newer torch, MKL or oneDNN may add in another order on the same path: their versions
are in the key, and the records are measured again then. The pinned path costs time against
the native one on an AVX512 machine (the measurements page gives the figure).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

PATH = "x86-64-avx2"
CAPABILITY = "AVX2"  # torch.backends.cpu.get_cpu_capability() on the pinned path
ENV: Mapping[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",    # torch's own kernels (DispatchStub)
    "MKL_CBWR": "AVX2",               # MKL's conditional numerical reproducibility: one branch
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",     # oneDNN's JIT kernels (torch's linear and conv on x86)
}
REQUIRED_FLAGS = ("avx2", "fma")
CPUINFO = Path("/proc/cpuinfo")


class IsaError(RuntimeError):
    """This machine or process cannot compute on :data:`PATH` (one line saying why)."""


def pin(environ: MutableMapping[str, str] | None = None) -> None:
    """Set :data:`ENV` in ``environ`` (this process's environment by default), whatever the
    user set: another value is another set of figures."""
    environ = os.environ if environ is None else environ
    environ.update(ENV)


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The first ``flags`` line of ``cpuinfo`` (empty when it cannot be read)."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == "flags":
                return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def check(flags: frozenset[str] | None = None, capability: str | None = None,
          environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`IsaError` unless this machine has AVX2 and FMA, :data:`ENV` is set, and
    torch dispatches to AVX2 (``capability``: torch's, read here when not given)."""
    flags = cpu_flags() if flags is None else flags
    if flags:  # a machine that shows no flags (not Linux) is judged by torch's answer alone
        missing = [f for f in REQUIRED_FLAGS if f not in flags]
        if missing:
            raise IsaError(f"this CPU lacks {', '.join(missing).upper()}: pytest-qnn-genai "
                           f"computes every build and reference on the {PATH} path, which "
                           "every accepted record was measured on")
    environ = os.environ if environ is None else environ
    unset = sorted(k for k, v in ENV.items() if environ.get(k) != v)
    if unset:
        raise IsaError(f"{', '.join(unset)} not set to the {PATH} path (import pytest_qnn_genai "
                       "before torch, or set " + " ".join(f"{k}={ENV[k]}" for k in unset) + ")")
    if capability is None:
        import torch

        capability = torch.backends.cpu.get_cpu_capability()
    if capability != CAPABILITY:
        loaded = "torch" in sys.modules
        raise IsaError(f"torch dispatches to {capability}, not {CAPABILITY}: "
                       + ("it loaded before pytest-qnn-genai pinned the path (a conftest or "
                          "plugin imported it first); set ATEN_CPU_CAPABILITY=avx2 in the "
                          "environment" if loaded else "this torch ignores ATEN_CPU_CAPABILITY"))
