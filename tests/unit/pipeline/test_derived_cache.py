"""The encodings table of a QDQ graph is cached with it: a warm session does not load the .pt2
(loading one costs seconds), and the cached table is the one derived from the graph itself, even
after the graph changes. The graph is a real saved ExportedProgram with quantize/dequantize nodes."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.checks import encodings
from pytest_qnn_genai.pipeline import Pipeline

VERSIONS = {"torch": "t", "executorch": "e"}


def quiet(_line: str) -> None:
    pass


class Tiny(torch.nn.Module):
    """An input quantised with ``scale``, a linear layer, its output quantised to int8."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4, bias=False)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.ops.quantized_decomposed
        x = q.dequantize_per_tensor(q.quantize_per_tensor(x, self.scale, 3, 0, 255, torch.uint8),
                                    self.scale, 3, 0, 255, torch.uint8)
        y = self.lin(x)
        return q.dequantize_per_tensor(q.quantize_per_tensor(y, 0.1, 0, -128, 127, torch.int8),
                                       0.1, 0, -128, 127, torch.int8)


def _save_graph(path: Path, scale: float) -> Path:
    from torch.ao.quantization.fx import _decomposed  # noqa: F401 - registers the qdq ops

    torch.export.save(torch.export.export(Tiny(scale), (torch.randn(1, 2, 4),)), str(path))
    return path


def test_a_warm_session_reads_the_table_without_loading_the_graph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _save_graph(tmp_path / "decode_qdq.pt2", 0.05)
    direct = encodings.graph_encodings(graph)
    cold = Pipeline(ArtifactCache(tmp_path / "cache", VERSIONS, progress=quiet))
    assert cold.qdq_encodings(graph) == direct
    assert direct.input_shapes == ((1, 2, 4),)
    assert direct.encodings["input/0"].scale == (0.05,)

    def no_loading(path: object) -> None:
        raise AssertionError("a warm session loaded the .pt2 graph")

    monkeypatch.setattr(encodings, "load_qdq", no_loading)
    warm = Pipeline(ArtifactCache(tmp_path / "cache", VERSIONS, progress=quiet))
    assert warm.qdq_encodings(graph) == direct
    assert (warm.cache.stats.hits, warm.cache.stats.builds) == (1, 0)


def test_a_changed_graph_gets_its_own_table(tmp_path: Path) -> None:
    graph = _save_graph(tmp_path / "decode_qdq.pt2", 0.05)
    pipeline = Pipeline(ArtifactCache(tmp_path / "cache", VERSIONS, progress=quiet))
    assert pipeline.qdq_encodings(graph).encodings["input/0"].scale == (0.05,)
    _save_graph(graph, 0.07)  # rebuilt in place with another calibration
    assert pipeline.qdq_encodings(graph).encodings["input/0"].scale == (0.07,)
    assert pipeline.cache.stats.builds == 2


WARM_PROBE = """
import sys
from pathlib import Path
from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.pipeline import Pipeline
pipeline = Pipeline(ArtifactCache(Path(sys.argv[1]), {"torch": "t", "executorch": "e"}))
case = available()[sys.argv[2]]
print(pipeline.decoder_model_version(case))
print(pipeline.transformers_logits(case, [1, 5, 9]).shape)
heavy = ("executorch.examples.qualcomm.oss_scripts.llama", "transformers.models.llama")
print([m for m in heavy if m in sys.modules])
print(pipeline.cache.stats.builds)
"""


@pytest.mark.parametrize("name,version", [("stories260k", "llama2"), ("llama3_2_toy", "llama3")])
def test_what_runs_need_of_executorch_and_transformers_is_cached(tmp_path: Path, name: str,
                                                                 version: str) -> None:
    """The runner's --decoder_model_version (llama.py's model config) and transformers' logits
    are held against their sources, then a warm session (a new process) gets both without
    importing executorch's LLM example package or transformers' Llama."""
    import subprocess
    import sys

    import numpy as np

    from pytest_qnn_genai.models import hf
    from pytest_qnn_genai.models.registry import available
    from pytest_qnn_genai.stages.recipe import decoder_model_version

    case = available()[name]
    cold = Pipeline(ArtifactCache(tmp_path / "cache", VERSIONS, progress=quiet))
    assert cold.decoder_model_version(case) == decoder_model_version(case) == version
    tokens = [1, 5, 9]
    want = hf.logits(hf.reference_model(case), tokens)
    assert np.array_equal(cold.transformers_logits(case, tokens), want)
    assert cold.cache.stats.builds == 2

    root = Path(__file__).resolve().parents[3]
    probe = subprocess.run([sys.executable, "-c", WARM_PROBE, str(tmp_path / "cache"), name],
                           capture_output=True, text=True, timeout=300, cwd=root,
                           env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert probe.stdout.split("\n")[:4] == [version, f"({len(tokens)}, {want.shape[1]})", "[]",
                                            "0"]
