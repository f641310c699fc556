"""A session loads each QDQ graph once: every QDQ reference product (eval-prompt logits, held-out
windows, encodings) asks the pipeline for the quantize entry's artifacts, and each used to load
its ``.pt2`` again (0.9 GB and tens of seconds at 135M parameters)."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.pipeline.core import Pipeline
from pytest_qnn_genai.stages import quantize


def test_the_same_quantize_entry_gives_the_same_loaded_artifacts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case, sm8650_emulator) -> None:
    loads: list[Path] = []

    def load(cls: type, out_dir: Path) -> object:
        loads.append(out_dir)
        return object()

    monkeypatch.setattr(quantize.QdqArtifacts, "load", classmethod(load))
    pipeline = Pipeline(ArtifactCache(tmp_path, {}, progress=lambda _: None))
    built: list[int] = []

    def fake_quantize(prepared, soc, out, backend="htp") -> None:
        built.append(1)
        (out / "qdq.json").write_text("{}")

    monkeypatch.setattr(quantize, "quantize", fake_quantize)
    monkeypatch.setattr(Pipeline, "prepared", lambda self, c: None)
    first = pipeline.qdq(case, sm8650_emulator)
    assert pipeline.qdq(case, sm8650_emulator) is first
    assert len(loads) == 1 and built == [1]
    # another session (a new pipeline) loads it for itself, from the cache, without building
    Pipeline(ArtifactCache(tmp_path, {}, progress=lambda _: None)).qdq(case, sm8650_emulator)
    assert len(loads) == 2 and built == [1]
