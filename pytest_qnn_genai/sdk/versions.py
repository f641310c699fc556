"""Versions of the tool stack, as recorded in cache keys, headers and reports."""
from __future__ import annotations

from importlib import metadata

import pytest_qnn_genai
from pytest_qnn_genai.sdk.loader import QnnSdk


def dist_version(dist: str) -> str:
    """Installed version of a distribution, or ``"not installed"``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def stack(sdk: QnnSdk) -> dict[str, str]:
    """torch, executorch, QAIRT (with SDK kind) and this package's version."""
    return {"torch": dist_version("torch"), "executorch": dist_version("executorch"),
            "qairt": f"{sdk.qairt_version}-{sdk.kind}",
            "pytest-qnn-genai": pytest_qnn_genai.__version__}
