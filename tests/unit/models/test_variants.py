"""Build variants as data: what a case may declare, and the one-line errors for the rest."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from pytest_qnn_genai.models.registry import ModelCaseError, available, load_case


def _case_with(tmp_path: Path, variants: object) -> Path:
    src = available()["stories260k"].folder
    folder = tmp_path / "case"
    shutil.copytree(src, folder)
    spec = json.loads((folder / "case.json").read_text())
    spec["variants"] = variants
    (folder / "case.json").write_text(json.dumps(spec))
    return folder


def test_every_default_case_commits_the_ar8_and_kv16_pairs() -> None:
    # a nightly case (a real model: each variant is another half-hour build) commits none
    for case in (c for c in available().values() if c.tier == "default"):
        if case.kv_io_bit_width == 16:  # qwen3: its recipe's KV IO is 16-bit already
            assert case.variant_names[:3] == ("legacy", "new", "ar8")
            continue
        assert case.variant_names[:4] == ("legacy", "new", "ar8", "kv16")
        assert case.variant("ar8").prefill_ar_len == 8 < case.prefill_ar_len
        assert case.variant("kv16").kv_io_bit_width == 16 != case.kv_io_bit_width
        assert case.variant("kv16").is_variant and not case.is_variant
        assert case.variant("new") is case
    ctx = available()["stories260k"].variant("ctx160")  # past max_seq_len: the runner's context
    assert ctx.max_context_len == 160 > ctx.max_seq_len == 128


def test_every_default_case_commits_a_kv_mode_variant() -> None:
    for case in (c for c in available().values() if c.tier == "default"):
        kv = case.variant("kv")
        assert (kv.model_mode, kv.lowered_graphs, kv.prompt_ar_len) == ("kv", ("kv_forward",), 1)
        assert case.lowered_graphs == ("kv_forward", "prefill_forward")
        assert case.prompt_ar_len == case.prefill_ar_len
    job = available()["smollm2_135m"].variant("upstream-ci")  # upstream's CI job's shape
    assert (job.model_mode, job.max_seq_len, job.max_context_len) == ("kv", 1024, 1024)


@pytest.mark.parametrize("variants,needle", [
    ({"ar8": {"quant_recipe": "8a8w"}}, "got quant_recipe"),
    ({"legacy": {"prefill_ar_len": 8}}, "must be a new name"),
    ({"a:b": {"prefill_ar_len": 8}}, "no ':'"),
    ({"ar0": {"prefill_ar_len": 0}}, "positive integers"),
    ({"arx": {"prefill_ar_len": "8"}}, "positive integers"),
    ({"ary": 8}, "must be a new name"),
    (["ar8"], "variants must be an object"),
    ({"kv4": {"kv_io_bit_width": 4}}, "kv_io_bit_width must be one of 8, 16, got 4"),
    ({"m": {"model_mode": "spec"}}, "model_mode 'spec' is not one of llama.py's kv, hybrid"),
    ({"m": {"model_mode": 2}}, "model_mode 2 is not one of"),
    ({"la": {"model_mode": "lookahead", "ngram": 1}}, r"lookahead \{'ngram': 1\}: needs"),
    # (8 + 8) x (9 - 1) = 128 rows: llama.py asserts max_context_len > next_power_of_two(...)
    ({"la": {"model_mode": "lookahead", "ngram": 9}}, "decode graph of 128 tokens, not below "
                                                      "max_context_len 128"),
    ({"la": {"window": 0}}, "positive integers"),
    # llama.py would build it (decode AR 16), but the runner reads 2 rows past its attention map
    ({"la": {"model_mode": "lookahead", "window": 4, "ngram": 3, "gcap": 3}},
     r"\(window 4 \+ gcap 3\) x \(ngram 3 - 1\) = 14 is not a power of two"),
])
def test_a_bad_variant_is_one_line(tmp_path: Path, variants: dict, needle: str) -> None:
    with pytest.raises(ModelCaseError, match=needle) as info:
        load_case(_case_with(tmp_path, variants))
    assert "\n" not in str(info.value) and "case.json" in str(info.value)


def test_an_undeclared_variant_names_the_declared_ones() -> None:
    with pytest.raises(ModelCaseError, match="variants: legacy, new, ar8, kv16"):
        available()["stories260k"].variant("ar9")


def test_a_case_name_with_the_variant_separator_is_one_line(tmp_path: Path) -> None:
    folder = _case_with(tmp_path, {})
    spec = json.loads((folder / "case.json").read_text())
    (folder / "case.json").write_text(json.dumps({**spec, "name": "stories@ar8"}))
    with pytest.raises(ModelCaseError, match="name 'stories@ar8' must not contain '@'"):
        load_case(folder)


def test_the_lookahead_variant_keys_only_lookahead_builds() -> None:
    """stories260k's lookahead variant: llama.py's decode AR (next_power_of_two((4 + 4) x (3 -
    1)) = 16), the runner's --eval_mode 2; window/ngram/gcap are in a lookahead build's
    fingerprint (its cache keys) and in no hybrid build's, so declaring them rebuilt nothing."""
    case = available()["stories260k"]
    lookahead = case.variant("lookahead")
    assert (lookahead.decode_ar_len, lookahead.eval_mode, lookahead.lookahead) == (16, 2, (4, 3, 4))
    assert (case.decode_ar_len, case.eval_mode, case.lookahead) == (1, 1, None)
    base, la = case.build_fingerprint(), lookahead.build_fingerprint()
    assert set(la) - set(base) == {"window", "ngram", "gcap"}
    assert not {"window", "ngram", "gcap"} & set(base)
    assert la["model_mode"] == "lookahead" and base["model_mode"] == "hybrid"
    wider = dataclasses.replace(lookahead, window=12)
    assert wider.decode_ar_len == 32 and wider.build_fingerprint() != la
    assert dataclasses.replace(case, window=12).build_fingerprint() == base
