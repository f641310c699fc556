"""Quantize a module with QnnQuantizer (PT2E) and lower it to a QnnBackend .pte for a target."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch

from pytest_qnn_genai.targets import Target

QUANT_DTYPES = ("8a8w", "16a8w", "16a4w", "16a16w")


def quantize_module(module: torch.nn.Module, example: tuple[Any, ...],
                    calibration: Sequence[tuple[Any, ...]], target: Target,
                    quant: str = "16a8w") -> torch.fx.GraphModule:
    """Export, annotate with ``QnnQuantizer`` for the target SoC, calibrate, convert (QDQ graph)."""
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    if quant not in QUANT_DTYPES:
        raise ValueError(f"unknown quant dtype {quant!r}; choose from {', '.join(QUANT_DTYPES)}")
    exported = torch.export.export(module.eval(), example, strict=True).module()
    quantizer = QnnQuantizer(soc_model=target.soc.chipset)
    quantizer.set_default_quant_config(getattr(QuantDtype, f"use_{quant}"),
                                       is_linear_per_channel=True)
    prepared = prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for batch in calibration:
            prepared(*batch)
    return convert_pt2e(prepared)


def compile_specs(target: Target, fp16: bool = False) -> list[Any]:
    """executorch compile specs for the target's SoC and backend."""
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
    )

    if target.backend != "htp":
        raise NotImplementedError(f"backend {target.backend!r}: only htp is wired for lowering")
    backend_options = generate_htp_compiler_spec(use_fp16=fp16)
    return generate_qnn_executorch_compiler_spec(soc_model=target.soc.chipset,
                                                 backend_options=backend_options)


def lower_to_pte(module: torch.nn.Module, example: tuple[Any, ...], target: Target,
                 out: Path, fp16: bool = False) -> Path:
    """Lower ``module`` with the QNN partitioner and write the ExecuTorch program to ``out``."""
    from executorch.backends.qualcomm.utils.utils import to_edge_transform_and_lower_to_qnn

    edge = to_edge_transform_and_lower_to_qnn(module, example, compile_specs(target, fp16))
    program = edge.to_executorch()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(program.buffer)
    tmp.replace(out)
    return out


def run_method(pte: Path, inputs: Sequence[torch.Tensor], method: str = "forward") -> list[Any]:
    """Execute one method of a .pte with ``executorch.runtime`` (the x86 HTP emulator for QNN)."""
    from pytest_qnn_genai.runtime import programs

    return list(programs.method(pte, method).execute(list(inputs)))
