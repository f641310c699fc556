"""The CPU kind a build and a measurement ran on: what, besides a key's inputs, shapes their bytes.

Contract. :func:`kind` names this machine's CPU by the model name the kernel reports
(``/proc/cpuinfo``) and the instruction set torch's kernels dispatch to
(``torch.backends.cpu.get_cpu_capability()``, which honours ``ATEN_CPU_CAPABILITY``);
:attr:`CpuKind.slug` is its file-name form (``amd-epyc-avx512``). The slug is in every cache key
(:func:`pytest_qnn_genai.sdk.versions.stack`) and names the folder of the accepted records
measured on this kind (:func:`pytest_qnn_genai.golden.accepted.path_for`).

Why. A float kernel on another CPU kind (another vendor's library path, AVX2 against AVX512) adds
in another order. The same key, code and packages then give another calibration, another program
and figures that differ in their printed digits (the docs' measurements page, "Builds depend on the
CPU"), so a record measured on one kind is not the truth on another, and a build fetched from a
cache another kind filled is neither kind's build.

Hazard. Two machines that report the same model name and instruction set are taken as one kind;
a virtual machine that hides its model (``AMD EPYC`` with no generation) can merge kinds that
compute differently, and then a record fails on a machine of the same name: the failure names
the kind, so a reader can tell.
"""
from __future__ import annotations

import functools
import platform
import re
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class CpuKind:
    """A CPU's model name and the instruction set torch dispatches to."""

    model: str
    capability: str

    @property
    def slug(self) -> str:
        """``amd-epyc-avx512``: lower case, every other run of characters one hyphen."""
        return re.sub(r"[^a-z0-9]+", "-", f"{self.model} {self.capability}".lower()).strip("-")

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


@functools.cache
def kind() -> CpuKind:
    """This machine's CPU kind (read once a process)."""
    import torch

    return CpuKind(model_name(), torch.backends.cpu.get_cpu_capability())
