"""Model cases: the family a case's decoder_model names (as llama.py picks checkpoint loader and
tokenizer), and the module that loads it."""
from __future__ import annotations

import importlib
from dataclasses import replace

import pytest

from pytest_qnn_genai.models import registry


@pytest.mark.parametrize("decoder_model,family", [("stories260k", "llama2c"),
                                                   ("stories110m", "llama2c"),
                                                   ("llama3_2-1b_instruct", "llama3"),
                                                   ("llama3_2-3b_instruct", "llama3")])
def test_family_follows_the_decoder_model(decoder_model: str, family: str) -> None:
    case = replace(registry.available()["stories260k"], decoder_model=decoder_model)
    assert case.family == family
    module = importlib.import_module(f"pytest_qnn_genai.models.{case.family}")
    assert callable(module.load_checkpoint) and callable(module.to_static_llama_state_dict)


def test_the_family_is_not_part_of_the_build_fingerprint_twice() -> None:
    case = registry.available()["stories260k"]
    assert "family" not in case.build_fingerprint()  # decoder_model already keys it
    assert case.build_fingerprint()["decoder_model"] == "stories260k"
