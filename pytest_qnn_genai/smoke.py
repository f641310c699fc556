"""The smoke check's artifact: an attention block quantized (or fp16), lowered, with references."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_qnn_genai.blocks import AttentionBlock
from pytest_qnn_genai.lowering import lower_to_pte, quantize_module
from pytest_qnn_genai.targets import Target

PTE = "block.pte"
REFERENCE = "reference.pt"
CALIBRATION_BATCHES = 16


def spec(target: Target, quant: str) -> dict[str, Any]:
    """The cache inputs that determine the artifact."""
    return {"block": "attention-d32-s8", "seed": 0, "quant": quant, "soc": target.soc.name,
            "backend": target.backend, "calibration_batches": CALIBRATION_BATCHES}


def build(target: Target, quant: str, out_dir: Path) -> None:
    """Write ``block.pte`` and ``reference.pt`` (inputs, fp32 output, QDQ output) to ``out_dir``.

    ``quant`` is a QnnQuantizer dtype such as ``"16a8w"``, or ``"fp16"`` for an unquantized
    fp16 lowering (then the QDQ output is the fp32 output).
    """
    block = AttentionBlock().eval()
    example = AttentionBlock.example_inputs(seed=0)
    with torch.no_grad():
        fp32 = block(*example)
    if quant == "fp16":
        module: torch.nn.Module = block
        qdq = fp32
    else:
        calibration = [example] + [AttentionBlock.example_inputs(seed=s)
                                   for s in range(1, CALIBRATION_BATCHES)]
        module = quantize_module(block, example, calibration, target, quant)
        with torch.no_grad():
            qdq = module(*example)
    lower_to_pte(module, example, target, out_dir / PTE, fp16=(quant == "fp16"))
    torch.save({"inputs": example, "fp32": fp32, "qdq": qdq}, out_dir / REFERENCE)
