"""Committed expectations: golden continuations, perf floors, syrupy snapshots.

They change only under an explicit flag (``--qnn-update-golden``, syrupy's ``--snapshot-update``):
:func:`rewrite` is the one way this package writes a golden file, atomically, returning the diff.
Loading is strict: a damaged file is one line naming the file.
"""
from __future__ import annotations

import difflib
from pathlib import Path

from pytest_qnn_genai.files import write_text_atomic


class GoldenWriteRefused(PermissionError):
    """A golden file write was attempted without the explicit update flag."""


def diff(path: Path, text: str) -> str:
    """Unified diff from the file on disk (empty if absent) to ``text``; "" when unchanged."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True),
                                        text.splitlines(keepends=True),
                                        fromfile=f"{path} (old)", tofile=f"{path} (new)"))


def rewrite(path: Path, text: str, *, allow_write: bool) -> str:
    """Atomically replace ``path`` with ``text`` and return the diff ("" and no write when
    unchanged); :class:`GoldenWriteRefused` unless ``allow_write``."""
    if not allow_write:
        raise GoldenWriteRefused(f"{path}: golden files change only with --qnn-update-golden")
    change = diff(path, text)
    if change:
        write_text_atomic(path, text)
    return change
