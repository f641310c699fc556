"""genai_front's guard that needs no executorch: the reason a non-Hugging Face case cannot be
prepared (one line)."""
from __future__ import annotations

from types import SimpleNamespace

from pytest_qnn_genai.flows import genai_front


def test_a_llama2c_case_says_why_in_one_line(tmp_path) -> None:
    (tmp_path / "stories260K.pt").write_bytes(b"")
    case = SimpleNamespace(name="stories260k", folder=tmp_path, checkpoint="stories260K.pt",
                           family=SimpleNamespace(NAME="llama2c"))
    reason = genai_front.not_huggingface_reason(case)
    assert reason is not None and "\n" not in reason
    assert "AutoModelForCausalLM.from_pretrained" in reason and "config.json" in reason
    (tmp_path / "config.json").write_text("{}")
    assert genai_front.not_huggingface_reason(case) is None


def test_the_packaged_llama2c_case_is_not_preparable() -> None:
    from pytest_qnn_genai.models.registry import available

    cases = available()
    assert genai_front.not_huggingface_reason(cases["stories260k"]) is not None
    assert genai_front.not_huggingface_reason(cases["qwen3_toy"]) is None
    assert genai_front.not_huggingface_reason(cases["llama3_2_toy"]) is None
