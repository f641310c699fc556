"""checks.recipe_coverage: a recipe's rule whose pattern matches no node of the graph fails naming
the rule (a planted renamed pattern); a linear weight left per-tensor where the recipe declares
per-channel weights fails naming the weight; a recipe whose rules all match passes. A quantizer's
declarations (upstream's HF path) fail on a weight of another bit width or scheme, and when they
reach no weight."""
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
    assert fell.detail == "dequantize_per_tensor_3: 4-bit per-tensor"
    per_tensor_recipe = rc.Coverage((rc.Rule("x → 16a8w per-tensor", rc.PER_TENSOR, 1),),
                                    weights)
    assert per_tensor_recipe.checks("genai")[1].ok  # what the recipe asks for is no fault


HF_LINEARS = (rc.Declared("linear", rc.PER_CHANNEL, 4, "per_channel_linear=True"),)


def _declared(monkeypatch, found: list[rc.Weight]) -> rc.Coverage:
    monkeypatch.setattr(rc, "weights", lambda _ep: found)
    return rc.declared_coverage(HF_LINEARS, object())


def test_declared_weights_pass_as_declared(monkeypatch) -> None:
    rules, fell, _ = _declared(monkeypatch, [
        rc.Weight("linear", rc.PER_CHANNEL, 4, "dq_1"), rc.Weight("linear", rc.PER_CHANNEL, 4, "dq_2"),
        rc.Weight("embedding", rc.PER_TENSOR, 16, "dq_3")]).checks("genai")
    assert rules.ok and rules.detail.startswith("linear weights → 4-bit per-channel") and fell.ok
    assert fell.check == "genai linear/conv weights not as declared"


def test_a_linear_of_another_width_or_scheme_is_named(monkeypatch) -> None:
    """One linear 8-bit, one per-tensor, beside a correct one: both named, with what they are."""
    fell = _declared(monkeypatch, [
        rc.Weight("linear", rc.PER_CHANNEL, 4, "dq_1"), rc.Weight("linear", rc.PER_CHANNEL, 8, "dq_2"),
        rc.Weight("linear", rc.PER_TENSOR, 4, "dq_3")]).checks("genai")[1]
    assert not fell.ok and fell.new == 2 and fell.delta == "linear ×2"
    assert fell.detail == "dq_2: 8-bit per-channel\ndq_3: 4-bit per-tensor"


def test_a_declaration_that_reaches_no_weight_fails(monkeypatch) -> None:
    """A block map keyed on names the graph does not have: every linear per-tensor, the
    declaration matches nothing and both rows fail."""
    rules, fell, _ = _declared(monkeypatch, [
        rc.Weight("linear", rc.PER_TENSOR, 4, "dq_1")]).checks("genai")
    assert not rules.ok and "matches no node" in str(rules.delta) and not fell.ok
