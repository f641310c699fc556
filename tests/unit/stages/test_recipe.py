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
