"""The staged flow takes its quant recipe and its SeqMSE search from the same place llama.py does:
the model's ``LLMModelConfig`` in executorch's ``SUPPORTED_LLM_MODELS`` (read here from the
installed executorch, not from the project's belief about it)."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.compat import llama_example
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.stages import recipe


@pytest.mark.parametrize("name", sorted(registry.available()))
def test_recipe_and_seq_mse_are_llama_py_s(name: str) -> None:
    case = registry.available()[name]
    config = llama_example.package().SUPPORTED_LLM_MODELS[case.decoder_model]
    assert recipe.recipe_class(case) is config.quant_recipe
    assert recipe.seq_mse_candidates(case) == config.seq_mse_candidates
    assert recipe.dtype_label(recipe.make_recipe(case)) == case.quant_recipe


def test_the_llama3_family_searches_weight_scales_and_stories_does_not() -> None:
    """Measured: without the search the staged llama3_2_toy build missed llama.py's w2 weight
    scales by up to 1.09 quantisation steps and its logits by 27 dB SQNR (parity suite)."""
    cases = registry.available()
    assert recipe.seq_mse_candidates(cases["llama3_2_toy"]) == 50
    assert recipe.seq_mse_candidates(cases["stories260k"]) == 0


def test_an_unknown_decoder_model_is_one_line() -> None:
    from dataclasses import replace

    case = replace(registry.available()["stories260k"], decoder_model="no-such-llm")
    with pytest.raises(recipe.RecipeError, match="is not an executorch static LLM"):
        recipe.seq_mse_candidates(case)


def test_a_kv16_variant_drops_llama_py_s_8_bit_kv_annotation() -> None:
    from executorch.backends.qualcomm.quantizer.custom_annotation import annotate_kv_8bit

    for case in registry.available().values():
        if case.kv_io_bit_width == 16:  # qwen3: no annotate_kv_8bit in its recipe, no kv16 variant
            assert annotate_kv_8bit not in recipe.make_recipe(case).recipe.custom_quant_annotations
            assert "kv16" not in case.variants
            continue
        base, kv16 = recipe.make_recipe(case), recipe.make_recipe(case.variant("kv16"))
        assert annotate_kv_8bit in base.recipe.custom_quant_annotations  # llama.py's 8-bit KV
        assert annotate_kv_8bit not in kv16.recipe.custom_quant_annotations
        assert (base.get_kv_io_bit_width(), kv16.get_kv_io_bit_width()) == (8, 16)
        assert recipe.dtype_label(kv16) == recipe.dtype_label(base)  # weights/activations kept
        others = [f for f in base.recipe.custom_quant_annotations if f is not annotate_kv_8bit]
        assert kv16.recipe.custom_quant_annotations == others


def test_16_bit_kv_io_is_refused_where_llama_py_builds_8(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from executorch.backends.qualcomm.quantizer.quantizer import QuantDtype

    case = registry.available()["stories260k"]
    # a case itself: llama.py builds its recipe's 8-bit KV, the staged flow must not differ
    with pytest.raises(recipe.RecipeError, match="says kv_io_bit_width 16 but .* gives 8"):
        recipe.make_recipe(replace(case, kv_io_bit_width=16))
    # a recipe whose activations are 8-bit has no 16-bit KV IO, variant or not
    eight_bit = type("EightBit", (recipe.recipe_class(case),),
                     {"default_quant_dtype": QuantDtype.use_8a8w})
    monkeypatch.setattr(recipe, "recipe_class", lambda c: eight_bit)
    with pytest.raises(recipe.RecipeError, match="gives 8"):
        recipe.make_recipe(replace(case.variant("kv16"), quant_recipe="8a8w"))
