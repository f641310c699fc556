"""syrupy snapshots stored as golden files: an amber extension writing into one folder.

Snapshot files live in ``<golden dir>/snapshots/`` beside the other golden files instead of next
to each test module, so one review covers every committed expectation. They change only with
syrupy's ``--snapshot-update``.
"""
from __future__ import annotations

from pathlib import Path

_EXTENSIONS: dict[Path, type] = {}


def golden_extension(folder: Path) -> type:
    """An amber extension storing its ``.ambr`` files in ``folder`` (one class per folder)."""
    if folder not in _EXTENSIONS:
        from syrupy.extensions.amber import AmberSnapshotExtension

        class GoldenAmberExtension(AmberSnapshotExtension):
            @classmethod
            def dirname(cls, *, test_location: object) -> str:
                return str(folder)

        _EXTENSIONS[folder] = GoldenAmberExtension
    return _EXTENSIONS[folder]
