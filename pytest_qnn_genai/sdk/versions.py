"""Versions of the tool stack, as recorded in cache keys, headers and reports."""
from __future__ import annotations

from importlib import metadata

import pytest_qnn_genai
from pytest_qnn_genai import isa
from pytest_qnn_genai.sdk.loader import QnnSdk
from pytest_qnn_genai.threads import THREADS


def dist_version(dist: str) -> str:
    """Installed version of a distribution, or ``"not installed"``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


# Every distribution whose code shapes an artifact: the lowering (torch, executorch), the PT2E
# quantizer (torchao) and, for the emulator SDK, the wheel its QAIRT libraries come from.
SHAPING_DISTS = ("torch", "executorch", "torchao", "onnxruntime-qnn")


def stack(sdk: QnnSdk) -> dict[str, str]:
    """The versions that shape an artifact (a cache-key input), also shown in headers and reports:
    :data:`SHAPING_DISTS`, QAIRT with the SDK kind, the SDK folder (for the emulator SDK its name
    carries the ABI adapter's digest), this package's version, the torch threads every build
    computes with (:mod:`pytest_qnn_genai.threads`) and the numeric path every x86-64 machine
    computes on (:mod:`pytest_qnn_genai.isa`), not the machine's CPU kind."""
    return {**{d: dist_version(d) for d in SHAPING_DISTS},
            "qairt": f"{sdk.qairt_version}-{sdk.kind}", "qnn_sdk": sdk.root.name,
            "pytest-qnn-genai": pytest_qnn_genai.__version__, "torch_threads": str(THREADS),
            "numeric_path": isa.PATH}
