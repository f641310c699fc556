"""What the plugin's own tests need from outside the repository, found when a test runs, and the
rule for when it is not found: skip on a developer's machine, fail where ``$CI`` is set.

Upstream's ExecuTorch source tree is ``--executorch-src`` / ``$QNN_GENAI_EXECUTORCH_SRC`` (read
when the test runs, never at import: a module that read the variable at import skipped itself
whenever ``pytest tests`` ran outside ``make``), else the checkout the Makefile uses beside this
one (``../shared/upstream/executorch``). The hazard :func:`missing` guards: a CI job whose tests
skipped because a tool or tree was absent is green with nothing run, so there it is a failure
naming what was missing. (adb, nginx and Chromium fail without skipping anywhere: their
fixtures say how to install them.)
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from pytest_qnn_genai.runners import ENV_VAR
from pytest_qnn_genai.settings import in_ci

REPO_ROOT = Path(__file__).resolve().parents[2]
BESIDE = REPO_ROOT.parent / "shared" / "upstream" / "executorch"  # the Makefile's default


def missing(what: str, how: str) -> NoReturn:
    """Skip the test, naming what was not found and how to provide it; where ``$CI`` is set,
    fail it with that line instead (a CI run never skips what it could run)."""
    if in_ci():
        pytest.fail(f"CI={os.environ.get('CI')}: {what} not found, so this test cannot run and "
                    f"CI does not skip it: {how}", pytrace=False)
    pytest.skip(f"{what} not found: {how}")


def source_tree(configured: Path | None = None) -> Path | None:
    """Upstream's source tree: ``configured`` (the session's ``--executorch-src``), else
    ``$QNN_GENAI_EXECUTORCH_SRC``, else :data:`BESIDE`; None when none is a folder."""
    for candidate in (configured, os.environ.get(ENV_VAR) or None, BESIDE):
        if candidate is not None and Path(candidate).is_dir():
            return Path(candidate)
    return None


def require_source_tree(configured: Path | None = None) -> Path:
    """:func:`source_tree`, or :func:`missing` naming where it looked."""
    tree = source_tree(configured)
    if tree is None:
        looked = ", ".join(str(p) for p in (configured, os.environ.get(ENV_VAR) or None, BESIDE)
                           if p)
        missing("upstream's ExecuTorch source tree",
                f"looked in {looked}; pass --executorch-src DIR or set {ENV_VAR}")
    return tree
