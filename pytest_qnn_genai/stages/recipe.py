"""What llama.py's model config (``SUPPORTED_LLM_MODELS[decoder_model]``) says about a case: its
quant recipe, its SeqMSE weight-scale search, the runner's ``--decoder_model_version``.

The legacy flow picks the recipe by ``--decoder_model``
(``SUPPORTED_LLM_MODELS[name].quant_recipe``, e.g. ``LlamaStories260KQuantRecipe`` for stories260k:
16a4w per-channel convs, 16a8w ``output.conv``, 8-bit KV IO through ``annotate_kv_8bit``).
A case's ``quant_recipe`` label ("16a4w") and ``kv_io_bit_width`` must agree with that recipe, so a
case file cannot silently describe a quantization the pipeline does not apply. The one departure
is a case's declared variant with ``kv_io_bit_width`` 16: llama.py's recipes make the KV cache IO
8-bit by appending ``annotate_kv_8bit`` to their custom annotations (``get_kv_io_bit_width`` reads
exactly that), so the variant's recipe is the case's without it, and its KV IO takes the recipe's
16-bit activation dtype (upstream ``llm_wrappers`` tags 16-bit KV IO as ``uint16``). A recipe
whose activations are 8-bit (8a8w) has no 16-bit KV IO: one line.
"""
from __future__ import annotations

from pytest_qnn_genai.compat import llama_example
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.untyped import Upstream


class RecipeError(ValueError):
    """A model case's quant recipe label does not match what the pipeline would apply."""


def _llm_config(case: ModelCase) -> Upstream:
    """llama.py's ``LLMModelConfig`` for ``case.decoder_model`` (``SUPPORTED_LLM_MODELS``)."""
    configs = llama_example.package().SUPPORTED_LLM_MODELS
    if case.decoder_model not in configs:
        raise RecipeError(f"{case.name}: decoder_model {case.decoder_model!r} is not an executorch "
                          f"static LLM (known: {', '.join(sorted(configs))})")
    return configs[case.decoder_model]


def decoder_model_version(case: ModelCase) -> str:
    """The ``--decoder_model_version`` qnn_llama_runner is run with for ``case``
    (``LLMModelConfig.decoder_model_version``, from ``DECODER_MODEL_VERSION``: ``llama2`` for
    stories260k, ``llama3`` for llama3_2-*), as upstream's device evaluator passes it."""
    return str(_llm_config(case).decoder_model_version)


def seq_mse_candidates(case: ModelCase) -> int:
    """How many SeqMSE scale candidates llama.py searches for ``case``'s quantized weights on the
    first calibration batch (``LLMModelConfig.seq_mse_candidates``: 50 for llama3_2-1b_instruct,
    0 for stories260k; ``quantize/ptq.py`` ``PTQStrategy._calibrate``)."""
    return int(getattr(_llm_config(case), "seq_mse_candidates", 0) or 0)


def recipe_class(case: ModelCase) -> type:
    """The executorch ``StaticLLMQuantRecipe`` subclass the legacy flow uses for ``case``."""
    cls = _llm_config(case).quant_recipe
    if not isinstance(cls, type):
        raise RecipeError(f"{case.name}: executorch has no quant recipe for {case.decoder_model!r}")
    return cls


def dtype_label(recipe: Upstream) -> str:
    """``QuantDtype.use_16a4w`` → ``"16a4w"``."""
    return str(recipe.default_quant_dtype.name).removeprefix("use_")


def make_recipe(case: ModelCase, verbose: bool = False) -> Upstream:
    """A fresh recipe instance for ``case`` (one per graph, as the legacy flow does), checked;
    a variant asking for 16-bit KV IO gets it (see the module docstring)."""
    recipe = recipe_class(case)(verbose)
    if case.is_variant and case.kv_io_bit_width == 16:
        from executorch.backends.qualcomm.quantizer.custom_annotation import annotate_kv_8bit

        annotations = recipe.recipe.custom_quant_annotations
        annotations[:] = [f for f in annotations if f is not annotate_kv_8bit]
    label = dtype_label(recipe)
    if label != case.quant_recipe:
        raise RecipeError(f"{case.name}: case.json says quant_recipe {case.quant_recipe!r} but "
                          f"{type(recipe).__name__} quantizes {label!r}")
    if recipe.get_kv_io_bit_width() != case.kv_io_bit_width:
        raise RecipeError(f"{case.name}: case.json says kv_io_bit_width {case.kv_io_bit_width} but "
                          f"{type(recipe).__name__} gives {recipe.get_kv_io_bit_width()}")
    return recipe


def describe(recipe: Upstream) -> dict[str, object]:
    """The recipe as readable data (for ``qdq.json``)."""
    return {
        "class": f"{type(recipe).__module__}.{type(recipe).__qualname__}",
        "default_quant_dtype": dtype_label(recipe),
        "kv_io_bit_width": recipe.get_kv_io_bit_width(),
        "logits_output_bit_width": recipe.get_logits_output_bit_width(),
        "custom_quant_annotations": [getattr(f, "__name__", repr(f))
                                     for f in recipe.recipe.custom_quant_annotations],
    }
