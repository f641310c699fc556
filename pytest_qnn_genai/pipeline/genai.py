"""genai_pipeline's cached products (declared in :mod:`.products`): upstream's build of a case
(``genai``: preparation, quantization with a recipe of ``flows/genai_recipes.py``, and, for the
case's own build, compilation through the injected ``CompilerAdapter``), and any QDQ graph's
logits on the teacher-forced windows the flows are compared on (``qdq-window-logits``).

Their builders (:mod:`pytest_qnn_genai.flows.genai_run`, :mod:`~pytest_qnn_genai.flows.genai_front`)
write into a folder and know nothing of the cache; these functions give their keys. Hazard: the
genai build reads every file of the case's folder (upstream's loader takes the folder), so each
file's digest is in its key, beside executorch's and transformers' versions (upstream's code it
runs).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai.cache import CacheEntry
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.flows import genai_front, genai_recipes
from pytest_qnn_genai.flows.genai_run import GenAIRun, build
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.core import Pipeline
from pytest_qnn_genai.pipeline.references import folder_sha256
from pytest_qnn_genai.sdk.versions import dist_version

if TYPE_CHECKING:
    from pytest_qnn_genai.checks.qdq_windows import Windows
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.targets import Target


def genai_build(pipeline: Pipeline, case: ModelCase, target: Target,
                prompts: tuple[str, ...] | None = None, recipe: str = genai_recipes.HF_PATH,
                ) -> tuple[CacheEntry, genai_front.GenAIQdq]:
    """genai_pipeline's build of ``case`` for ``target``'s builds with ``recipe`` (``prompts``:
    calibrate on these instead of the case's): the entry and what it holds. Only the case's own
    build (upstream's HF-path recipe, the case's prompts) is compiled: the others are judged as
    QDQ graphs."""
    target = pipeline.build_target(target)
    compiled = prompts is None and recipe == genai_recipes.HF_PATH
    inputs: dict[str, object] = {
        "case": case.build_fingerprint(), "folder_sha256": folder_sha256(case),
        "soc": target.soc.name, "backend": target.backend, "recipe": recipe,
        "prompts": list(prompts) if prompts is not None else None, "compiled": compiled,
        "executorch": dist_version("executorch"), "transformers": dist_version("transformers")}
    run = GenAIRun(case, target, recipe, prompts, compile=compiled)
    entry = pipeline.entry(
        products.GENAI, inputs, lambda out: build(run, out),
        label=f"{case.name} {target.soc.name}-{target.backend}"
              + (f" ({len(prompts)} prompt)" if prompts is not None else "")
              + ("" if recipe == genai_recipes.HF_PATH else f" ({recipe} recipe)"))
    return entry, genai_front.GenAIQdq.load(entry.path)


def window_rows(pipeline: Pipeline, case: ModelCase, graph: Path, reader: str,
                windows: Windows, upstream: tuple[str, ...] = ()) -> list[np.ndarray]:
    """A QDQ graph's continuation rows of every window (``reader``: genai's module or a
    static_llama calibration graph), keyed by the graph's bytes."""
    from pytest_qnn_genai.checks.qdq_windows import load_rows

    def build_rows(out: Path) -> None:
        prepared = pipeline.prepared(case) if reader == genai_front.STATIC_LLAMA else None
        genai_front.build_window_rows(graph, reader, windows, out, prepared)

    entry = pipeline.entry(
        products.QDQ_WINDOW_LOGITS, {"graph_sha256": file_sha256(graph), "reader": reader,
                                     "windows": windows.ids()},
        build_rows, upstream, label=f"{case.name} {reader} {graph.name}")
    return load_rows(entry.path)
