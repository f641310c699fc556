"""genai_front's guard that needs no executorch: the reason a non-Hugging Face case cannot be
prepared (one line)."""
from __future__ import annotations

import json
from types import SimpleNamespace

from pytest_qnn_genai.flows import genai_front


def test_a_llama2c_case_says_why_in_one_line(tmp_path) -> None:
    (tmp_path / "stories260K.pt").write_bytes(b"")
    case = SimpleNamespace(name="stories260k", folder=tmp_path, hf_folder=tmp_path,
                           checkpoint="stories260K.pt", family=SimpleNamespace(NAME="llama2c"))
    reason = genai_front.not_huggingface_reason(case)
    assert reason is not None and "\n" not in reason
    assert "AutoModelForCausalLM.from_pretrained" in reason and "config.json" in reason
    (tmp_path / "config.json").write_text("{}")
    assert genai_front.not_huggingface_reason(case) is None


def test_a_gguf_case_is_read_from_its_imported_folder(tmp_path) -> None:
    """A GGUF case's folder holds case.json and its held-out text; its Hugging Face files are in
    the import's folder, which genai's loader gets (the fault: the case folder, no config.json)."""
    own, imported = tmp_path / "case", tmp_path / "import"
    own.mkdir()
    imported.mkdir()
    (own / "case.json").write_text("{}")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (imported / name).write_text("{}" if name == "config.json" else "")
    case = SimpleNamespace(name="smollm2_135m", folder=own, hf_folder=imported,
                           checkpoint="model.safetensors", family=SimpleNamespace(NAME="smollm2"))
    assert genai_front.not_huggingface_reason(case) is None
    out = genai_front.model_folder(case, tmp_path / "model")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors",
                                                     "tokenizer.json"]
    assert json.loads((out / "config.json").read_text()) == {"use_cache": False}


def test_the_packaged_llama2c_case_is_not_preparable() -> None:
    from pytest_qnn_genai.models.registry import available

    cases = available()
    assert genai_front.not_huggingface_reason(cases["stories260k"]) is not None
    assert genai_front.not_huggingface_reason(cases["qwen3_toy"]) is None
    assert genai_front.not_huggingface_reason(cases["llama3_2_toy"]) is None
