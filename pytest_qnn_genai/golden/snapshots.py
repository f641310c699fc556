"""syrupy snapshots stored as golden files: an amber extension writing into one folder per build label.

Snapshot files live in ``<golden dir>/snapshots/<SoC>-<backend>-<kind>/`` beside the other golden
files instead of next to each test module, so one review covers every committed expectation. They
change only with syrupy's ``--snapshot-update``.

A snapshot is named after its test id with the target's device replaced by the kind of build it
holds (:func:`build_label`): a phone's serial never reaches a snapshot name, so a user's phone
finds the snapshots committed for that SoC ("... does not exist!" otherwise, on any phone), and a
device that runs the emulator's builds (upstream's x86 runners, the loopback phone) is held to
the emulator's snapshots.

The hazard the folders guard: syrupy counts every snapshot in a file it discovered that no test of
the run asserted as unused, and an unused snapshot fails the session (exit 1 with every test
passed). A run without a phone would find the committed phone snapshots unused if they shared the
emulator's file or folder (discovery walks sub-folders too), and a run for another SoC would find
SM8650's unused: so each build label (:func:`build_label`) has a sibling folder, and a run opens
only the folders of the builds it makes, where every snapshot must be asserted.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from syrupy.extensions.amber import AmberSnapshotExtension
    from syrupy.location import PyTestLocation
    from syrupy.types import SnapshotIndex

    from pytest_qnn_genai.targets import Target

_EXTENSIONS: dict[tuple[Path, str, str], type[AmberSnapshotExtension]] = {}


def build_kind(build_target: Target) -> str:
    """``emulator`` for the emulator's builds, ``phone`` for a phone's."""
    return "emulator" if build_target.is_emulator else "phone"


def build_label(target: Target, build_target: Target) -> str:
    """``SOC-backend-emulator`` for the emulator's builds, ``SOC-backend-phone`` for a phone's."""
    return f"{target.soc.name}-{target.backend}-{build_kind(build_target)}"


def snapshot_folder(golden_dir: Path, target: Target, build_target: Target,
                    tier: str = "default") -> Path:
    """Where the snapshots of one build label are stored: ``<golden dir>/snapshots/<label>``, and
    a nightly-tier case's in ``<label>-nightly`` beside it: a run that leaves such a case out (the
    default selection, ``make test``) never opens that folder, so neither finds its snapshots
    unused nor gives up failing on the stale snapshots of the cases it runs."""
    label = build_label(target, build_target)
    return golden_dir / "snapshots" / (label if tier == "default" else f"{label}-{tier}")


def golden_extension(folder: Path, target_id: str = "", label: str = "",
                     ) -> type[AmberSnapshotExtension]:
    """An amber extension storing its ``.ambr`` files in ``folder``, naming snapshots with
    ``label`` where the test id says ``target_id`` (one class per folder and renaming)."""
    key = (folder, target_id, label)
    if key not in _EXTENSIONS:
        from syrupy.extensions.amber import AmberSnapshotExtension

        class GoldenAmberExtension(AmberSnapshotExtension):
            @classmethod
            def dirname(cls, *, test_location: PyTestLocation) -> str:
                return str(folder)

            @classmethod
            def get_snapshot_name(cls, *, test_location: PyTestLocation,
                                  index: SnapshotIndex = 0) -> str:
                name = str(super().get_snapshot_name(test_location=test_location, index=index))
                return name.replace(f"-{target_id}]", f"-{label}]") if target_id else name

        _EXTENSIONS[key] = GoldenAmberExtension
    return _EXTENSIONS[key]
