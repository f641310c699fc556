"""A model case's Hugging Face files laid out as an offline Hugging Face hub cache of a repo id.

Contract: :func:`offline_hub` makes ``<work_dir>/hf-home/hub/models--<org>--<name>/`` with
``snapshots/<revision>/`` holding the files (hard links, copies across file systems) and
``refs/main`` naming the revision, and returns the environment that makes ``from_pretrained
(repo_id)`` read it without a network: llama.py asks for its model's ``repo_id`` whatever its flags
(its tokenizer comes from ``AutoTokenizer.from_pretrained(repo_id)``), and Hugging Face downloads
are not possible here. The folder is made afresh on every call.

Hazard: the files are linked, not copied, where the file system allows: a writer that edits a
file in place in the hub cache would edit the case's own file (llama.py only reads them).
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

HOME = "hf-home"


def _place(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system: a copy
        shutil.copyfile(src, dst)


def offline_hub(files: Mapping[str, Path], repo_id: str, revision: str,
                work_dir: Path) -> dict[str, str]:
    """``files`` (name in the snapshot -> source) as the hub cache of ``repo_id`` at ``revision``
    under ``work_dir``; the environment variables that point Hugging Face at it, offline."""
    home = Path(work_dir) / HOME
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    shutil.rmtree(home, ignore_errors=True)
    snapshot.mkdir(parents=True)
    for name, path in files.items():
        _place(path, snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return {"HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
