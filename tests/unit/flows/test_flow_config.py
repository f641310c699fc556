"""Configuration agreement: the staged build, read back out of its artifacts, against what
llama.py was told (its argv as its parser reads it); every setting that differs is named."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pytest_qnn_genai.flows.config import (
    agreement_of,
    disagreements,
    legacy_settings,
    staged_settings,
)
from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.runtime.pte_info import MethodInfo, PteInfo, TensorMeta

RECIPE = "executorch.examples.qualcomm.oss_scripts.llama.static_llm_quant_recipe.StoriesRecipe"
PROMPTS = list(available()["stories260k"].calibration_prompts)


def _args(**changes: object) -> argparse.Namespace:
    """llama.py's namespace for stories260k's emulator build (as its parser returns it: the
    lookahead flags have their defaults even for a hybrid build)."""
    values = {"decoder_model": "stories260k", "model_mode": "hybrid", "prefill_ar_len": 32,
              "max_seq_len": 128, "max_context_len": 128, "soc_model": "SM8650",
              "backend": "htp", "enable_x86_64": True, "window": 8, "ngram": 5, "gcap": 8,
              "calib_samples": ["/tmp/build-123/calib_samples.json"]}
    return argparse.Namespace(**{**values, **changes})


def _samples(folder: Path, prompts: list[str]) -> Path:
    (folder / "calib_samples.json").write_text(json.dumps(
        [{"messages": [{"role": "user", "content": p}]} for p in prompts]))
    return folder


def _method(name: str, ar: int) -> MethodInfo:
    return MethodInfo(name, (TensorMeta("int32", (1, ar)),), (TensorMeta("uint16", (1, ar, 512)),),
                      ("QnnBackend",), ())


def _staged(prefill_ar: int = 32, decode_ar: int = 1, shared_buffer: bool = False,
            soc: str = "SM8650", recipe: str = RECIPE, prompts: list[str] = PROMPTS,
            ) -> dict[str, tuple]:
    info = PteInfo(Path("x.pte"), 1, {"prefill_forward": _method("prefill_forward", prefill_ar),
                                      "kv_forward": _method("kv_forward", decode_ar)},
                   {"get_max_seq_len": 128, "get_max_context_len": 128})
    options = {"soc_info": {"soc_model": soc}, "backend_options": {"backend_type": "kHtpBackend"},
               "shared_buffer": shared_buffer}
    record = {"decoder_model": "stories260k", "recipe": {"class": recipe},
              "calibration": {"prompts": prompts}}
    return staged_settings(info, options, record)


def test_a_build_that_carries_what_llama_py_was_told_agrees(tmp_path: Path) -> None:
    agreement = agreement_of(_staged(), legacy_settings(_args(), _samples(tmp_path, PROMPTS),
                                                        RECIPE))
    assert disagreements(agreement) == []
    assert agreement["x86_64"]["new"] is True and agreement["x86_64"]["legacy_from"] == (
        "--enable_x86_64")
    assert agreement["prefill_ar_len"]["new_from"] == ".pte prefill_forward input 0 shape"
    assert agreement["calibration_prompts"]["new"] == len(PROMPTS)


@pytest.mark.parametrize("staged,args,setting", [
    ({"prefill_ar": 16}, {}, "prefill_ar_len"),  # the staged build's prefill graph is another
    ({}, {"prefill_ar_len": 16}, "prefill_ar_len"),  # llama.py was told another
    ({"shared_buffer": True}, {}, "x86_64"),  # a phone build where llama.py built for x86
    ({}, {"soc_model": "SM8750"}, "soc"),
    ({"recipe": RECIPE + "X"}, {}, "quant_recipe"),  # quantized with another recipe
    ({"prompts": PROMPTS[:1]}, {}, "calibration_prompts"),
    ({"decode_ar": 16}, {}, "decode_ar_len"),  # a lookahead decode graph for a hybrid argv
])
def test_a_setting_the_build_carries_differently_fails_naming_it(tmp_path: Path, staged, args,
                                                                  setting) -> None:
    bad = disagreements(agreement_of(_staged(**staged), legacy_settings(
        _args(**args), _samples(tmp_path, PROMPTS), RECIPE)))
    assert [b.split(":")[0] for b in bad] == [setting] or (
        setting == "decode_ar_len" and {b.split(":")[0] for b in bad} == {"decode_ar_len",
                                                                          "model_mode"}), bad
    assert "the staged build carries" in bad[0] and "but llama.py was given" in bad[0]


def test_a_lookahead_argv_makes_the_decode_graph_its_flags_fill(tmp_path: Path) -> None:
    """stories260k's lookahead variant: window 4, ngram 3, gcap 4 fill (4 + 4) x 2 = 16 rows of
    a 16-token decode graph; other flags disagree with that graph."""
    args = _args(model_mode="lookahead", window=4, ngram=3, gcap=4)
    folder = _samples(tmp_path, PROMPTS)
    assert disagreements(agreement_of(_staged(decode_ar=16), legacy_settings(args, folder,
                                                                             RECIPE))) == []
    bad = disagreements(agreement_of(_staged(decode_ar=16), legacy_settings(
        _args(model_mode="lookahead", window=4, ngram=5, gcap=4), folder, RECIPE)))
    assert [b.split(":")[0] for b in bad] == ["decode_ar_len"]


def test_missing_calibration_samples_disagree(tmp_path: Path) -> None:
    bad = disagreements(agreement_of(_staged(), legacy_settings(_args(), tmp_path, RECIPE)))
    assert [b.split(":")[0] for b in bad] == ["calibration_prompts"]
