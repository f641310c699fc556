"""The smoke flow: an attention block quantized (or fp16), lowered to a single-method .pte.

The fastest end-to-end proof that a QNN target works: a seeded rmsnorm + attention block (no
weights to ship) goes through ``QnnQuantizer`` (PT2E) and ``to_edge_transform_and_lower_to_qnn``
with the same compile specs the staged flow uses (:func:`pytest_qnn_genai.stages.compile.compile_specs`),
and the folder keeps its inputs with fp32 and QDQ reference outputs.
"""
from __future__ import annotations

from pathlib import Path

import torch

from pytest_qnn_genai.stages.compile import compile_specs
from pytest_qnn_genai.stages.qnn_refusal import lowering
from pytest_qnn_genai.targets import Target


class RMSNorm(torch.nn.Module):
    """Root-mean-square norm with a learned gain."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class AttentionBlock(torch.nn.Module):
    """rmsnorm → q, k, v → softmax(q kᵀ/√d) v → output projection + residual."""

    def __init__(self, dim: int = 32, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.norm = RMSNorm(dim)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))
        with torch.no_grad():
            self.norm.weight.copy_(torch.rand(dim, generator=gen) + 0.5)
            for lin in (self.q, self.k, self.v, self.o):
                lin.weight.copy_(torch.randn(dim, dim, generator=gen) / dim ** 0.5)
        self.scale = dim ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        attn = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1)
        out: torch.Tensor = x + self.o(torch.matmul(attn, v))
        return out

    @staticmethod
    def example_inputs(seed: int, seq: int = 8, dim: int = 32) -> tuple[torch.Tensor]:
        """A seeded input batch ``[1, seq, dim]``."""
        return (torch.randn(1, seq, dim, generator=torch.Generator().manual_seed(seed)),)


QUANT_DTYPES = ("8a8w", "16a8w", "16a4w", "16a16w")


def quantize_module(module: torch.nn.Module, example: tuple[torch.Tensor, ...],
                    calibration: list[tuple[torch.Tensor, ...]], target: Target,
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
    converted: torch.fx.GraphModule = convert_pt2e(prepared)
    return converted


def lower_to_pte(module: torch.nn.Module, example: tuple[torch.Tensor, ...], target: Target,
                 out: Path, fp16: bool = False) -> Path:
    """Lower ``module`` with the QNN partitioner and write the ExecuTorch program to ``out``."""
    from executorch.backends.qualcomm.utils.utils import to_edge_transform_and_lower_to_qnn

    specs = compile_specs(target, "fp16" if fp16 else "quantized")
    with lowering(f"{type(module).__name__} for {target.soc.name}-{target.backend}"):
        edge = to_edge_transform_and_lower_to_qnn(module, example, specs)
    program = edge.to_executorch()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(program.buffer)
    tmp.replace(out)
    return out


PTE = "block.pte"
REFERENCE = "reference.pt"
CALIBRATION_BATCHES = 16


def spec(target: Target, quant: str) -> dict[str, object]:
    """The cache inputs that determine the artifact (a phone build differs from the emulator's:
    shared buffers and weight sharing, :func:`~pytest_qnn_genai.stages.compile.compile_spec_data`)."""
    return {"block": "attention-d32-s8", "seed": 0, "quant": quant, "soc": target.soc.name,
            "backend": target.backend, "for_emulator": target.is_emulator,
            "calibration_batches": CALIBRATION_BATCHES}


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
        calibration: list[tuple[torch.Tensor, ...]] = [example]
        calibration += [AttentionBlock.example_inputs(seed=s)
                        for s in range(1, CALIBRATION_BATCHES)]
        module = quantize_module(block, example, calibration, target, quant)
        with torch.no_grad():
            qdq = module(*example)
    lower_to_pte(module, example, target, out_dir / PTE, fp16=(quant == "fp16"))
    torch.save({"inputs": example, "fp32": fp32, "qdq": qdq}, out_dir / REFERENCE)
