"""The machine a run computes on: what the run's header names, never a key.

Contract. :func:`kind` names this machine's CPU by the model name the kernel reports
(``/proc/cpuinfo``) and the widest instruction set its flags offer (:func:`native_isa`);
:attr:`CpuKind.label` is the form a reader quotes (``AMD EPYC, AVX512``). It describes; it decides
nothing: every build computes on the one pinned path (:mod:`pytest_qnn_genai.isa`), so neither
the cache keys nor the accepted records depend on it.

Hazard. The native instruction set is read from the flags, not from torch, which reports the
pinned path. A virtual machine that hides its model (``AMD EPYC`` with no generation) merges
kinds in the description; on the pinned path that changes no figure.
"""
from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

from pytest_qnn_genai.isa import CPUINFO, cpu_flags

AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl")  # torch's own test for AVX512


@dataclass(frozen=True)
class CpuKind:
    """A CPU's model name and the widest instruction set it offers."""

    model: str
    capability: str

    @property
    def label(self) -> str:
        """``AMD EPYC, AVX512``: as a reader quotes it."""
        return f"{self.model}, {self.capability}"


def model_name(cpuinfo: Path = CPUINFO) -> str:
    """The first ``model name`` of ``cpuinfo``, else the platform's processor, else its machine."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == "model name" and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def native_isa(flags: frozenset[str]) -> str:
    """``AVX512``, ``AVX2`` or ``DEFAULT``: what torch would dispatch to unpinned."""
    if all(f in flags for f in AVX512):
        return "AVX512"
    return "AVX2" if {"avx2", "fma"} <= flags else "DEFAULT"


@functools.cache
def kind() -> CpuKind:
    """This machine's CPU kind (read once a process)."""
    return CpuKind(model_name(), native_isa(cpu_flags()))
