"""Every registered family is held to the protocol and to llama.py's own tables: the
``--decoder_model`` names it serves exist in ``SUPPORTED_LLM_MODELS`` with the
``--decoder_model_version`` ``DECODER_MODEL_VERSION`` gives them, its functions have the
protocol's signatures, its transformers class exists, and its toy case is a shipped case."""
from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import pytest

from pytest_qnn_genai.compat import llama_example
from pytest_qnn_genai.models import families, registry
from pytest_qnn_genai.models.families import MEMBERS, Family, FamilyError

FAMILIES = families.all_families()


def test_the_package_registers_four_families() -> None:
    assert sorted(FAMILIES) == ["llama2c", "llama3", "qwen3", "smollm2"]


TOYLESS = {"smollm2": "smollm2_135m"}  # a family without a toy -> its real case


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_has_every_protocol_member_with_its_signature(name: str) -> None:
    family = FAMILIES[name]
    assert isinstance(family, Family)
    for member in MEMBERS:
        want = getattr(Family, member, None)
        if callable(want):
            expected = [p for p in inspect.signature(want).parameters if p != "self"]
            assert list(inspect.signature(getattr(family, member)).parameters) == expected, member
    toy_api = [*families.Toy.__annotations__,
               *(m for m in vars(families.Toy) if not m.startswith("_"))]
    assert (family.TOY is None) == (name in TOYLESS)
    assert family.TOY is None or all(hasattr(family.TOY, m) for m in toy_api), toy_api


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_serves_what_llama_py_builds_with_its_runner_version(name: str) -> None:
    pkg = llama_example.package()
    from executorch.examples.qualcomm.oss_scripts.llama.decoder_constants import (
        DECODER_MODEL_VERSION,
    )

    family = FAMILIES[name]
    assert family.DECODER_MODELS
    for decoder_model, version in family.DECODER_MODELS.items():
        assert decoder_model in pkg.SUPPORTED_LLM_MODELS
        assert DECODER_MODEL_VERSION[decoder_model] == version
        assert pkg.SUPPORTED_LLM_MODELS[decoder_model].decoder_model_version == version
    for decoder_model, repo in getattr(family, "REPO_IDS", {}).items():
        assert pkg.SUPPORTED_LLM_MODELS[decoder_model].repo_id == repo


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_names_a_transformers_class_and_ships_its_toy(name: str) -> None:
    import transformers

    family = FAMILIES[name]
    assert isinstance(getattr(transformers, family.HF_CLASS), type)
    if family.TOY is None:  # a real case, its files imported (tests/integration/models)
        case = registry.available()[TOYLESS[name]]
        assert case.family is family and case.decoder_model in family.DECODER_MODELS
        assert all(p.is_file() for p in case.own_files().values()) and case.gguf_file.is_file()
        return
    case = registry.available()[family.TOY.NAME]
    assert case.family is family
    assert case.decoder_model in family.DECODER_MODELS
    assert case.params_dict == family.TOY.PARAMS
    spec = {k: getattr(case, k) for k in family.TOY.CASE}
    assert spec == family.TOY.CASE
    assert all(p.is_file() for p in case.files().values())


def test_every_decoder_model_finds_its_family_and_an_unknown_one_is_one_line() -> None:
    for family in FAMILIES.values():
        for decoder_model in family.DECODER_MODELS:
            assert families.for_decoder_model(decoder_model) is family
    with pytest.raises(FamilyError, match="no model family serves decoder_model 'gemma3-1b'") as e:
        families.for_decoder_model("gemma3-1b")
    assert "\n" not in str(e.value) and "qwen3-0_6b" in str(e.value)


@pytest.fixture
def extra_family(monkeypatch: pytest.MonkeyPatch):
    """Register a module ``families.zz_extra`` made from qwen3's members (the test edits it)."""
    module: Any = types.ModuleType(f"{families.__name__}.zz_extra")  # attributes set below
    vars(module).update({m: getattr(FAMILIES["qwen3"], m) for m in MEMBERS})
    module.NAME, module.DECODER_MODELS = "zz_extra", {"smollm3-3b": "smollm3"}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    names = families._module_names()
    monkeypatch.setattr(families, "_module_names", lambda: [*names, "zz_extra"])
    families.all_families.cache_clear()
    yield module
    families.all_families.cache_clear()


def test_a_new_family_module_is_found_by_discovery(extra_family) -> None:
    assert families.for_decoder_model("smollm3-3b") is extra_family


def test_a_family_module_missing_a_member_is_refused(extra_family) -> None:
    del extra_family.legacy_inputs
    with pytest.raises(FamilyError, match="zz_extra lacks legacy_inputs"):
        families.all_families()


def test_two_families_serving_one_decoder_model_are_refused(extra_family) -> None:
    extra_family.DECODER_MODELS = {"qwen3-0_6b": "qwen3"}
    with pytest.raises(FamilyError, match="'qwen3-0_6b' is served by both qwen3 and zz_extra"):
        families.all_families()
