"""The quantization genai_pipeline is handed for a case: one recipe per way upstream quantizes a
Hugging Face graph, found by name in :data:`RECIPES`.

Contract. A :class:`GenAIRecipe` gives what upstream's ``ExecuTorchQuantizationStrategy`` takes
through its public seams, and nothing else: the quantization stage's ``extra_options`` (the
strategy pops ``quant_dtype`` and ``quant_recipe`` and forwards every other key to
``make_quantizer``) and the ``QuantizerAdapter`` it is constructed with. It also says what the
recipe declares of the graph's weights (:attr:`GenAIRecipe.declares`), which
``checks/recipe_coverage.py`` holds the quantized graph to.

- :data:`HF_PATH` (the default): upstream's own Hugging Face path,
  ``examples/qualcomm/oss_scripts/llm_utils/qnn_decoder_model_manager.py``
  ``QnnLLMEdgeManager.pt2e_quantize`` (tested upstream by ``test_hf_causal_lm``):
  ``make_quantizer(quant_dtype, per_channel_linear=True, per_channel_conv=True,
  act_observer=MinMaxObserver)`` and, for ``16a4w_block``, a ``(1, 16)`` block-size map on every
  ``aten.linear`` node and its weight. ``quant_dtype`` is llm_utils' one choice (``--ptq``): the
  gate gives it the dtype llama.py's recipe gives the case's linears (:func:`linear_dtype`), so
  both flows quantize the linears at the same bits. The block map needs the exported graph's node names, which
  only the adapter's ``prepare_pt2e`` sees: :class:`BlockMapAdapter` is that one method over
  upstream's ``DefaultQuantizerAdapter``.
- :data:`LLAMA_PY`: the case's ``StaticLLMQuantRecipe`` as llama.py applies it, handed as
  ``quant_recipe``. Its per-channel and block rules key on ``aten.conv2d`` (llama.py rewrites
  linears to convolutions first); on the Hugging Face graph they match nothing and every linear
  falls to the recipe's default, per-tensor. Kept so a strict xfail says so until upstream maps
  its recipes.

Hazard: the HF path's options are upstream's keyword names; a renamed ``make_quantizer`` keyword
is a ``TypeError`` inside upstream's quantization stage (a ``StageError`` naming it), never a
silently dropped option.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_qnn_genai.checks.recipe_coverage import BLOCK, PER_CHANNEL, Declared

if TYPE_CHECKING:
    from enum import Enum

    import torch

    from pytest_qnn_genai.models.registry import ModelCase

HF_PATH, LLAMA_PY = "hf-path", "llama.py"
LLM_UTILS_BLOCK = (1, 16)  # llm_utils' block size for 16a4w_block linears
_ADAPTER = ("executorch.backends.qualcomm.genai_pipeline.strategies.quantization."
            "default_quantizer_adapter", "DefaultQuantizerAdapter")


class _BlockMapQuantizer(Protocol):
    """The one call the adapter makes on upstream's ``QnnQuantizer``."""

    def set_block_size_map(self, block_size_map: dict[str, tuple[int, ...]]) -> None: ...


def linear_nodes(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """Every ``aten.linear`` node and its weight argument, as llm_utils'
    ``extract_linear_nodes`` lists them (the block map's keys)."""
    import torch

    out = []
    for node in graph.nodes:
        if node.target == torch.ops.aten.linear.default:
            out += [node, node.args[1]]
    return out


def block_map_adapter() -> object:
    """A ``DefaultQuantizerAdapter`` whose ``prepare_pt2e`` first sets llm_utils' block-size map
    on the quantizer when the quantizer was made for ``16a4w_block`` (see the module docstring);
    ``keys`` counts the map's entries (0: no linear, or not a block dtype)."""
    module, name = _ADAPTER
    base = getattr(importlib.import_module(module), name)

    class BlockMapAdapter(base):  # type: ignore[misc, valid-type]  # upstream's untyped class
        keys = 0

        def make_quantizer(self, quant_dtype: Enum | None = None, **kwargs: object) -> object:
            self._dtype = quant_dtype
            return super().make_quantizer(quant_dtype=quant_dtype, **kwargs)

        def prepare_pt2e(self, model: torch.fx.GraphModule, quantizer: _BlockMapQuantizer
                         ) -> torch.fx.GraphModule:
            if getattr(self._dtype, "name", "") == "use_16a4w_block":
                nodes = linear_nodes(model.graph)
                quantizer.set_block_size_map({n.name: LLM_UTILS_BLOCK for n in nodes})
                self.keys = len(nodes)
            prepared: torch.fx.GraphModule = super().prepare_pt2e(model, quantizer)
            return prepared

    return BlockMapAdapter()


def _weight_bits(label: str) -> int:
    """``16a4w_block`` → 4, ``16a8w`` → 8."""
    return int(label.split("a", 1)[1].split("w", 1)[0])


@dataclass(frozen=True)
class GenAIRecipe:
    """One way to quantize the Hugging Face graph (see the module docstring)."""

    name: str
    about: str
    options: Callable[[ModelCase], dict[str, object]]  # the quantization stage's extra_options
    adapter: Callable[[], object | None]  # the QuantizerAdapter (None: upstream's default)
    declares: Callable[[ModelCase], tuple[Declared, ...]]  # what its weights must be


def linear_dtype(case: ModelCase) -> Enum:
    """The ``QuantDtype`` llama.py's recipe gives the case's linears: its ``aten.conv2d`` rule's
    (llama.py's linears are convolutions), else the recipe's default."""
    import torch

    from pytest_qnn_genai.stages.recipe import make_recipe

    recipe = make_recipe(case)
    for strategy in getattr(recipe.recipe, "_strategies", ()):
        if torch.ops.aten.conv2d.default in getattr(strategy, "targets", ()):
            rule: Enum = strategy.quant_dtype
            return rule
    default: Enum = recipe.default_quant_dtype
    return default


def hf_path_options(dtype: Enum) -> dict[str, object]:
    """The quantization stage's options of upstream's HF path for ``dtype``."""
    from torchao.quantization.pt2e import MinMaxObserver

    return {"quant_dtype": dtype, "per_channel_linear": True, "per_channel_conv": True,
            "act_observer": MinMaxObserver}


def hf_path_declares(dtype: Enum) -> tuple[Declared, ...]:
    """What upstream's HF path declares for linears under ``dtype``."""
    label = str(dtype.name).removeprefix("use_")
    block = label.endswith("_block")
    return (Declared("linear", BLOCK if block else PER_CHANNEL, _weight_bits(label),
                     "llm_utils: make_quantizer(per_channel_linear=True)"
                     + (f", block map {LLM_UTILS_BLOCK} on aten.linear" if block else "")),)


def _llama_py_options(case: ModelCase) -> dict[str, object]:
    from pytest_qnn_genai.stages.recipe import make_recipe

    return {"quant_recipe": make_recipe(case).recipe}


def _llama_py_declares(case: ModelCase) -> tuple[Declared, ...]:
    return ()  # its rules are the declaration (checks.recipe_coverage.coverage reads them)


RECIPES = {r.name: r for r in (
    GenAIRecipe(HF_PATH, "upstream's Hugging Face path (llm_utils): per-channel linears, "
                "llm_utils' (1, 16) block map for 16a4w_block",
                lambda case: hf_path_options(linear_dtype(case)), block_map_adapter,
                lambda case: hf_path_declares(linear_dtype(case))),
    GenAIRecipe(LLAMA_PY, "llama.py's StaticLLMQuantRecipe for the case (rules on aten.conv2d)",
                _llama_py_options, lambda: None, _llama_py_declares),
)}


def get(name: str) -> GenAIRecipe:
    """The recipe called ``name``; a ``KeyError`` line listing them otherwise."""
    if name not in RECIPES:
        raise KeyError(f"unknown genai recipe {name!r}; recipes: {', '.join(RECIPES)}")
    return RECIPES[name]
