"""The harness's copy of qnn_llama_runner's chat templates agrees with the one the runner
stand-in was written with (both from qnn_llama_runner.cpp ``get_formatted_prompt``); the gate
holds it to the real runner (suites/gate/test_runner_prompt.py)."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.runtime.chat import TEMPLATES, format_prompt
from tests.support.chat_templates import VERSIONS
from tests.support.chat_templates import format_prompt as standin_format


def test_every_version_the_runner_knows_is_here() -> None:
    assert set(TEMPLATES) == set(VERSIONS)


@pytest.mark.parametrize("version", sorted(VERSIONS))
@pytest.mark.parametrize("system", ["", "Be brief."])
def test_the_two_writings_agree(version: str, system: str) -> None:
    flags = {"decoder_model_version": version, "system_prompt": system}
    assert format_prompt(version, "Once upon a time", system) == \
        standin_format(flags, "Once upon a time")


def test_llama3_wraps_the_prompt_in_its_header_turns() -> None:
    assert format_prompt("llama3", "Hi") == (
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert format_prompt(None, "Hi") == "Hi"
