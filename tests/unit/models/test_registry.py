"""Model cases: the family a case's decoder_model names, and cases from folders outside the
package (``--qnn-cases``) with a one-line error naming the case for each bad input."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from pytest_qnn_genai.models import families, registry
from pytest_qnn_genai.models.registry import ModelCaseError, load_cases


@pytest.mark.parametrize("decoder_model,family", [("stories260k", "llama2c"),
                                                   ("stories110m", "llama2c"),
                                                   ("llama3_2-1b_instruct", "llama3"),
                                                   ("llama3_2-3b_instruct", "llama3"),
                                                   ("qwen3-0_6b", "qwen3")])
def test_family_follows_the_decoder_model(decoder_model: str, family: str) -> None:
    case = replace(registry.available()["stories260k"], decoder_model=decoder_model)
    assert case.family is families.all_families()[family]


def test_the_family_is_not_part_of_the_build_fingerprint_twice() -> None:
    case = registry.available()["stories260k"]
    assert "family" not in case.build_fingerprint()  # decoder_model already keys it
    assert case.build_fingerprint()["decoder_model"] == "stories260k"
    qwen = registry.available()["qwen3_toy"]  # the family's other files are build inputs too
    fingerprint: dict[str, Any] = qwen.build_fingerprint()
    assert set(fingerprint["file_sha256"]) == {
        "checkpoint", "params", "tokenizer_model", "tokenizer_bin", "hf_config", "tokenizer_config"}


def _outside(tmp_path: Path, name: str = "stories260k", new_name: str = "mine",
             folder: str = "mine") -> Path:
    """A copy of a shipped case under ``tmp_path/folder``, renamed ``new_name``."""
    dst = tmp_path / folder
    shutil.copytree(registry.MODELS_DIR / name, dst)
    spec = json.loads((dst / "case.json").read_text())
    (dst / "case.json").write_text(json.dumps({**spec, "name": new_name}))
    return dst


def _edit(folder: Path, **fields: object) -> None:
    spec = json.loads((folder / "case.json").read_text())
    (folder / "case.json").write_text(json.dumps({**spec, **fields}))


def test_cases_below_a_folder_load_with_files_relative_to_their_own(tmp_path: Path) -> None:
    a, b = _outside(tmp_path, new_name="a", folder="a"), _outside(tmp_path, "qwen3_toy", "b", "b")
    cases = load_cases([tmp_path])
    assert list(cases) == ["a", "b"] and not cases["a"].packaged
    assert cases["a"].path("checkpoint") == a / "stories260K.pt"
    assert cases["b"].files()["tokenizer_config"] == b / "tokenizer_config.json"
    both = registry.available([tmp_path])
    assert list(both)[-2:] == ["a", "b"] and "stories260k" in both
    assert registry.select(["b"], [tmp_path])[0].folder == b


def test_an_absolute_checkpoint_path_is_taken_as_it_is(tmp_path: Path) -> None:
    folder = _outside(tmp_path / "cases")
    kept = tmp_path / "weights" / "model.pt"
    kept.parent.mkdir()
    (folder / "stories260K.pt").rename(kept)
    _edit(folder, checkpoint=str(kept))
    assert load_cases([tmp_path / "cases"])["mine"].path("checkpoint") == kept


def test_an_outside_case_keeps_its_golden_files_beside_it(tmp_path: Path) -> None:
    folder = _outside(tmp_path)
    assert load_cases([tmp_path])["mine"].golden_dir is None  # --qnn-golden-dir
    (folder / "golden").mkdir()
    assert load_cases([tmp_path])["mine"].golden_dir == folder / "golden"
    assert registry.available()["stories260k"].golden_dir is None  # shipped: the repo's golden/


def _one_line(folders: list[Path], *needles: str) -> str:
    with pytest.raises(ModelCaseError) as e:
        registry.available(folders)
    msg = str(e.value)
    assert "\n" not in msg, msg
    for needle in needles:
        assert needle in msg, msg
    return msg


def test_a_name_clash_is_one_line(tmp_path: Path) -> None:
    _outside(tmp_path, new_name="twin", folder="a")
    _outside(tmp_path, new_name="twin", folder="b")
    _one_line([tmp_path], "model case twin", "b/case.json", "taken by", "a/case.json")
    shutil.rmtree(tmp_path / "b")
    _outside(tmp_path / "other", new_name="stories260k")
    _one_line([tmp_path / "other"], "model case stories260k", "taken by the package's case")


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    folder = _outside(tmp_path)
    (folder / "tokenizer.bin").unlink()
    _one_line([tmp_path], "model case mine", "tokenizer_bin file", "tokenizer.bin is missing")
    qwen = _outside(tmp_path / "q", "qwen3_toy", "q")
    (qwen / "tokenizer_config.json").unlink()  # a file of the family, not of case.json
    _one_line([tmp_path / "q"], "model case q", "tokenizer_config file")


def test_a_checkpoint_whose_shapes_disagree_with_its_params_is_one_line(tmp_path: Path) -> None:
    folder = _outside(tmp_path)
    params = json.loads((folder / "params.json").read_text())
    (folder / "params.json").write_text(json.dumps({**params, "n_layers": 4}))
    _one_line([tmp_path], "model case mine", "checkpoint keys do not match params",
              "unexpected ['layers.4.")
    (folder / "params.json").write_text(json.dumps(params))
    raw = torch.load(folder / "stories260K.pt", weights_only=True)
    raw["model"]["_orig_mod.layers.1.attention.wk.weight"] = torch.zeros(64, 64)
    torch.save(raw, folder / "stories260K.pt")
    _one_line([tmp_path], "model case mine", "layers.1.attention.wk.weight",
              "expected [32, 64], got [64, 64]")


def test_a_qwen3_checkpoint_whose_shapes_disagree_is_one_line(tmp_path: Path) -> None:
    folder = _outside(tmp_path, "qwen3_toy")
    params = json.loads((folder / "params.json").read_text())
    (folder / "params.json").write_text(json.dumps({**params, "head_dim": 16}))
    _one_line([tmp_path], "model case mine", "self_attn.q_proj.weight", "expected [64, 64]")


def test_a_family_no_module_serves_is_one_line(tmp_path: Path) -> None:
    _edit(_outside(tmp_path), decoder_model="gemma3-1b")
    _one_line([tmp_path], "model case mine", "no model family serves decoder_model 'gemma3-1b'")


def test_a_folder_without_cases_is_one_line(tmp_path: Path) -> None:
    _one_line([tmp_path / "nowhere"], "does not exist")
    _one_line([tmp_path], "holds no */case.json")


def test_where_a_case_keeps_its_files_is_not_part_of_its_build_key(tmp_path: Path) -> None:
    folder = _outside(tmp_path / "a")
    shipped = registry.available()["stories260k"]
    before = load_cases([tmp_path / "a"])["mine"].build_fingerprint()
    assert {**before, "name": "stories260k"} == shipped.build_fingerprint()
    kept = tmp_path / "weights" / "elsewhere.pt"  # an absolute path, another file name
    kept.parent.mkdir()
    (folder / "stories260K.pt").rename(kept)
    _edit(folder, checkpoint=str(kept))
    moved = load_cases([tmp_path / "a"])["mine"].build_fingerprint()
    assert moved["file_sha256"] == before["file_sha256"]
    assert moved["checkpoint"] == "elsewhere.pt"  # the name, never the folder it sits in


def test_judged_prompts_are_named_prompts_and_no_build_input(tmp_path: Path) -> None:
    folder = _outside(tmp_path)
    before = load_cases([tmp_path])["mine"].build_fingerprint()
    _edit(folder, judged_prompts={"capital": "What is the capital of France?"})
    case = load_cases([tmp_path])["mine"]
    assert case.judged_prompts == {"capital": "What is the capital of France?"}
    assert case.build_fingerprint() == before  # judged on the same build, never another
    for bad in (["What is the capital of France?"], {"Capital!": "x"}, {"capital": ""}):
        _edit(folder, judged_prompts=bad)
        _one_line([tmp_path], "model case mine", "judged_prompts must map lower_case names")
