"""checks.recipe_coverage: a recipe's rule whose pattern matches no node of the graph fails naming
the rule (a planted renamed pattern); a linear weight left per-tensor where the recipe declares
per-channel weights fails naming the weight; a recipe whose rules all match passes."""
from __future__ import annotations

import pytest
import torch

from pytest_qnn_genai.checks import recipe_coverage as rc


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x)


@pytest.fixture(scope="module")
def graph() -> torch.export.ExportedProgram:
    return torch.export.export(Model().eval(), (torch.randn(1, 8),), strict=True)


def _recipe(pattern: str) -> object:
    from executorch.backends.qualcomm.quantizer.quant_recipe import QuantGranularity, QuantRecipe
    from executorch.backends.qualcomm.quantizer.quantizer import QuantDtype
    from torchao.quantization.pt2e import MinMaxObserver

    return (QuantRecipe(QuantDtype.use_16a8w, False, act_observer=MinMaxObserver,
                        granularity=QuantGranularity.PER_TENSOR)
            .add_node_target({torch.ops.aten.linear.default}, QuantDtype.use_16a4w, False,
                             act_observer=MinMaxObserver,
                             granularity=QuantGranularity.PER_CHANNEL)
            .add_regex({pattern}, QuantDtype.use_16a8w, False, act_observer=MinMaxObserver,
                       granularity=QuantGranularity.PER_CHANNEL))


def test_every_rule_matching_passes(graph: torch.export.ExportedProgram) -> None:
    cov = rc.coverage(_recipe(r"mlp\.fc2"), graph)
    assert [r.matched for r in cov.rules] == [2, 1]
    rules, fell, table = cov.checks("staged")
    assert rules.ok and fell.ok and table.info
    assert rules.name == "staged_recipe_rules_matched"


def test_a_renamed_pattern_fails_naming_the_rule(graph: torch.export.ExportedProgram) -> None:
    """The pattern of a module since renamed (``fc2`` → ``down_proj``): the rule quantizes
    nothing, the graph still runs, and only the count says so."""
    rules = rc.coverage(_recipe(r"mlp\.down_proj"), graph).checks("staged")[0]
    assert not rules.ok and rules.new == 1
    assert rules.delta == r"/mlp\.down_proj/ → 16a8w per-channel matches no node"


def test_a_linear_left_per_tensor_is_named() -> None:
    weights = (rc.Weight("linear", rc.PER_TENSOR, 4, "dequantize_per_tensor_3"),
               rc.Weight("conv2d", rc.BLOCK, 4, "dequantize_affine_1"),
               rc.Weight("rms_norm", rc.PER_TENSOR, 16, "dequantize_per_tensor_4"))
    declared = rc.Coverage((rc.Rule("aten.conv2d.default → 16a4w_block block", rc.BLOCK, 1),),
                           weights)
    fell = declared.checks("genai")[1]
    assert not fell.ok and fell.new == 1 and fell.delta == "linear ×1"
    assert fell.detail == "dequantize_per_tensor_3"
    per_tensor_recipe = rc.Coverage((rc.Rule("x → 16a8w per-tensor", rc.PER_TENSOR, 1),),
                                    weights)
    assert per_tensor_recipe.checks("genai")[1].ok  # what the recipe asks for is no fault
