"""A perturbed quantize stage for the tests that show a check failing when calibration breaks.

Only ``case``'s calibration graph is quantized (no decode/prefill graphs, no compile), through
the cache under its own key, so the cost is one export + calibrate + convert, shared by every
test that asks for the same perturbation.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.pipeline import Pipeline
    from pytest_qnn_genai.targets import Target

PERTURBED = "calibration_qdq.pt2"


def perturbed_calibration_graph(pipeline: Pipeline, case: ModelCase, target: Target,
                                prompts: tuple[str, ...], perturbation: dict, label: str,
                                patched: contextlib.AbstractContextManager | None = None,
                                ) -> Path:
    """``case``'s calibration graph quantized on ``prompts`` (under ``patched``), through the
    cache keyed by ``perturbation``."""
    from pytest_qnn_genai.hybrid import CALIBRATION
    from pytest_qnn_genai.stages.quantize import _quantize_graph

    def build(out: Path) -> None:
        import torch

        from pytest_qnn_genai.stages.prepare import prepare

        with patched or contextlib.nullcontext():
            prepared = prepare(case) if "prepare" in perturbation else pipeline.prepared(case)
            torch.manual_seed(0)
            batches = prepared.calibration_batches(list(prompts))
            gm = _quantize_graph(prepared, CALIBRATION, target.soc, "htp", batches)
        exported = torch.export.export(gm, prepared.example_inputs[CALIBRATION], strict=True)
        torch.export.save(exported, str(out / PERTURBED))

    entry = pipeline.cache.get_or_build(
        "parity-perturbed-quantize", {"case": case.build_fingerprint(), "soc": target.soc.name,
                                      "backend": "htp", **perturbation},
        build, label=f"{case.name} {label}")
    return entry.file(PERTURBED)


def one_prompt_calibration_module(pipeline: Pipeline, case: ModelCase,
                                  target: Target) -> torch.fx.GraphModule:
    """``case``'s calibration graph calibrated on its first prompt only (cached), loaded: the
    negative control of the accuracy checks."""
    from pytest_qnn_genai.checks import encodings

    path = perturbed_calibration_graph(pipeline, case, target, case.calibration_prompts[:1],
                                       {"calibration_prompts": 1}, "one calibration prompt")
    return encodings.load_qdq(path).module(check_guards=False)
