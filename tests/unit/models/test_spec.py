"""A case's gate spec: parsed and checked when ``case.json`` loads (a malformed spec is one line
naming the case and the field), kept out of build cache keys, declared by every packaged case."""
from __future__ import annotations

import json
import shutil
from dataclasses import fields, replace
from pathlib import Path

import pytest

from pytest_qnn_genai.models import registry, spec
from pytest_qnn_genai.models.registry import ModelCaseError, load_cases


def test_every_field_is_documented_and_parsed() -> None:
    assert [f.name for f in fields(spec.GateSpec)] == list(spec.FIELDS)
    parsed = spec.parse({"min_qdq_sqnr_db": 15, "min_qdq_greedy_agreement": 0.9,
                         "max_pte_bytes": 2_020_000, "max_perplexity": {"qdq": 3.5},
                         "max_target_perplexity_ratio": 1.1, "notes": "measured"})
    assert parsed == spec.GateSpec(15.0, 0.9, 2_020_000, {"qdq": 3.5}, 1.1, notes="measured")
    assert spec.parse({}) == spec.GateSpec()
    target = spec.parse({"min_target_sqnr_db": 16, "min_target_row_cosine": 0.93,
                         "min_target_reference_sqnr_db": 11})
    assert (target.min_target_sqnr_db, target.min_target_row_cosine,
            target.min_target_reference_sqnr_db) == (16.0, 0.93, 11.0)
    assert spec.to_json(parsed)["max_perplexity"] == {"qdq": 3.5}
    assert spec.to_json(spec.GateSpec()) == {}


@pytest.mark.parametrize("gate,message", [
    ([], "gate must be an object"),
    ({"max_pte": 1}, "gate.max_pte is not a gate spec field"),
    ({"max_pte_bytes": 2.5}, "gate.max_pte_bytes must be a positive integer, got 2.5"),
    ({"max_pte_bytes": True}, "gate.max_pte_bytes must be a positive integer"),
    ({"min_qdq_sqnr_db": "15"}, "gate.min_qdq_sqnr_db must be a positive number, got '15'"),
    ({"min_qdq_sqnr_db": -1}, "gate.min_qdq_sqnr_db must be a positive number"),
    ({"min_qdq_greedy_agreement": 1.5}, "gate.min_qdq_greedy_agreement must be a positive "
                                        "number ≤ 1"),
    ({"max_perplexity": 3}, "gate.max_perplexity must be an object of phase"),
    ({"max_perplexity": {"device": 3}}, "gate.max_perplexity.device is no phase"),
    ({"max_perplexity": {"qdq": float("nan")}}, "gate.max_perplexity.qdq must be a positive"),
    ({"notes": 3}, "gate.notes must be text"),
    ({"min_target_row_cosine": 1.01}, "gate.min_target_row_cosine must be a positive number ≤ 1"),
    ({"min_target_sqnr_db": 0}, "gate.min_target_sqnr_db must be a positive number, got 0"),
    ({"parity": []}, "gate.parity must be an object"),
    ({"parity": {"legacy-new": {}}}, "gate.parity.legacy-new: a pair is two of"),
    ({"parity": {"legacy:new": {"max_encoding_steps": 1}}}, "gate.parity.legacy:new.reason is "
                                                            "required"),
    ({"parity": {"legacy:new": {"reason": "x"}}}, "gate.parity.legacy:new relaxes nothing"),
    ({"parity": {"legacy:new": {"reason": "x", "max_steps": 1}}},
     "gate.parity.legacy:new.max_steps is not a tolerance field"),
    ({"parity": {"legacy:new": {"reason": "x", "min_row_cosine": 2}}},
     "gate.parity.legacy:new.min_row_cosine must be a positive number ≤ 1"),
])
def test_a_malformed_spec_is_one_line_naming_the_case_and_field(tmp_path: Path, gate: object,
                                                                  message: str) -> None:
    dst = tmp_path / "mine"
    shutil.copytree(registry.MODELS_DIR / "stories260k", dst)
    data = json.loads((dst / "case.json").read_text())
    (dst / "case.json").write_text(json.dumps({**data, "name": "mine", "gate": gate}))
    with pytest.raises(ModelCaseError) as e:
        load_cases([tmp_path])
    text = str(e.value)
    assert "\n" not in text and text.startswith("model case mine (") and message in text


def test_the_spec_judges_builds_and_shapes_none() -> None:
    case = registry.available()["stories260k"]
    other = replace(case, gate=spec.GateSpec(max_pte_bytes=1))
    assert "gate" not in case.build_fingerprint()
    assert other.build_fingerprint() == case.build_fingerprint()
    assert case.variant("ar8").gate == case.gate  # a variant is judged as its case


@pytest.mark.parametrize("name", ["stories260k", "llama3_2_toy", "qwen3_toy"])
def test_every_packaged_case_declares_its_spec(name: str) -> None:
    gate = registry.available()[name].gate
    assert gate.max_pte_bytes and gate.min_qdq_sqnr_db and gate.min_qdq_greedy_agreement
    assert set(gate.max_perplexity) == set(spec.PHASES)
    assert gate.max_target_perplexity_ratio and gate.notes


def test_a_parity_tolerance_is_declared_per_pair_with_its_reason() -> None:
    parsed = spec.parse({"parity": {"legacy:new": {"reason": " SeqMSE skipped ",
                                                   "max_encoding_steps": 1.5,
                                                   "min_logits_sqnr_db": 25}}})
    tolerance = parsed.parity["legacy:new"]
    assert tolerance == spec.ParityTolerance("SeqMSE skipped", 1.5, 25.0, None)
    assert not tolerance.exact and spec.EXACT.exact
    assert spec.to_json(parsed)["parity"] == {"legacy:new": {
        "reason": "SeqMSE skipped", "max_encoding_steps": 1.5, "min_logits_sqnr_db": 25.0}}
    assert spec.parse({}).parity == {}  # no entry: the pair is held to identity
