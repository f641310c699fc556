"""A case's Hugging Face files laid out as an offline hub cache, for llama.py.

llama.py loads a Hugging Face family's tokenizer (and converts its weights) from the decoder
model's ``repo_id`` through the hub cache; no hub is reachable here, so a legacy build gets the
case's own files as that repo's snapshot (``models--<org>--<name>/{refs/main,snapshots/<rev>/}``)
and an environment that keeps transformers and the hub offline. Hazard: a snapshot from an earlier
build of other files must never be read, so the folder is laid anew each time under a revision
the caller derives from the files.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path


def hf_files(config: Path, weights: Path, tokenizer: Path, tokenizer_config: Path
             ) -> dict[str, Path]:
    """The snapshot's file names for a case's Hugging Face files."""
    return {"config.json": config, "model.safetensors": weights, "tokenizer.json": tokenizer,
            "tokenizer_config.json": tokenizer_config}


def offline_snapshot(files: Mapping[str, Path], repo_id: str, revision: str,
                     work_dir: Path) -> dict[str, str]:
    """Lay ``files`` out as ``repo_id``'s snapshot ``revision`` in a fresh ``work_dir/hf-home``
    (hard links where the file system allows, else copies); the environment llama.py runs in."""
    home = Path(work_dir) / "hf-home"
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    shutil.rmtree(home, ignore_errors=True)
    snapshot.mkdir(parents=True)
    for name, path in files.items():
        try:
            os.link(path, snapshot / name)
        except OSError:  # another file system: a copy
            shutil.copyfile(path, snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return {"HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1"}
