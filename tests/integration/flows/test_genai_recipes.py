"""flows.genai_recipes against the installed executorch: upstream's HF-path recipe, through
upstream's DefaultQuantizerAdapter, gives block-quantized linears for 16a4w_block and per-channel
ones for 16a4w, on a real exported graph (its linears' names keyed as llm_utils keys them)."""
from __future__ import annotations

from enum import Enum

import pytest
import torch

from pytest_qnn_genai.checks import recipe_coverage as rc
from pytest_qnn_genai.flows import genai_recipes
from pytest_qnn_genai.untyped import Upstream


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def _dtype(label: str) -> Enum:
    from executorch.backends.qualcomm.quantizer.quantizer import QuantDtype

    return getattr(QuantDtype, f"use_{label}")


def _quantized(label: str) -> tuple[torch.export.ExportedProgram, Upstream]:
    options = genai_recipes.hf_path_options(_dtype(label))
    adapter: Upstream = genai_recipes.get(genai_recipes.HF_PATH).adapter()  # upstream's protocol
    x = (torch.randn(2, 32),)
    model = adapter.export_model(Mlp().eval(), x)
    from executorch.backends.qualcomm.export_utils import get_backend_type

    quantizer = adapter.make_quantizer(backend=get_backend_type("htp"), soc_model="SM8650",
                                       **options)
    model = adapter.convert_pt2e(adapter.calibrate(adapter.prepare_pt2e(model, quantizer), [x]))
    return torch.export.export(model, x, strict=False), adapter


@pytest.mark.parametrize(("label", "scheme", "keys"), [("16a4w_block", rc.BLOCK, 4),
                                                       ("16a4w", rc.PER_CHANNEL, 0)])
def test_hf_path_quantizes_linears_as_declared(label, scheme, keys) -> None:
    ep, adapter = _quantized(label)
    assert adapter.keys == keys  # two linears and their weights in the block map, or no map
    declared = genai_recipes.hf_path_declares(_dtype(label))
    rules, fell, _ = rc.declared_coverage(declared, ep).checks("genai")
    assert declared[0].scheme == scheme and rules.ok and fell.ok, (rules, fell)
    assert {(w.op, w.scheme, w.bits) for w in rc.weights(ep)} == {("linear", scheme, 4)}
