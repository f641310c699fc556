"""Configuration agreement is read from the argv llama.py was run with, and it fails when the two
flows were given different settings."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_qnn_genai.flows.config import argv_flags, configuration_agreement, disagreements
from pytest_qnn_genai.flows.legacy import LegacyArtifacts, calibration_samples, legacy_argv
from pytest_qnn_genai.flows.llama_cli import LegacyOption, LegacyParser
from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.targets import Target, soc

EMULATOR = Target(soc("SM8650"))


def _parser() -> LegacyParser:
    """Every flag legacy_argv passes, accepting any value (no llama.py import needed)."""
    flags = ["--decoder_model", "--model_mode", "--prefill_ar_len", "--max_seq_len",
             "--max_context_len", "--temperature", "--prompt", "--checkpoint", "--params",
             "--tokenizer_model", "--tokenizer_bin", "--soc_model", "--compile_only",
             "--build_folder", "--artifact", "--calib_samples", "--backend", "--enable_x86_64",
             "--window", "--ngram", "--gcap"]
    return LegacyParser({f: LegacyOption((f,), f[2:], None, None, False) for f in flags}, None)


def _legacy(tmp_path: Path, argv: list[str], prompts: list[str]) -> LegacyArtifacts:
    pte = tmp_path / "stories260k_hybrid_llama_qnn.pte"
    pte.write_bytes(b"")
    (tmp_path / "calib_samples.json").write_text(json.dumps(
        [{"messages": [{"role": "user", "content": p}]} for p in prompts]))
    return LegacyArtifacts(pte, tmp_path / "decode_qdq.pt2", tmp_path / "log", 1.0,
                           ("python", "-c", "bootstrap", *argv))


def _argv(tmp_path: Path, target: Target = EMULATOR, variant: str = "") -> list[str]:
    case = available()["stories260k"]
    case = case.variant(variant) if variant else case
    return legacy_argv(case, target, tmp_path, tmp_path / "calib_samples.json", _parser())


def test_argv_flags_reads_values_and_switches() -> None:
    flags = argv_flags(["python", "-c", "x", "--soc_model", "SM8650", "--compile_only",
                        "--prefill_ar_len", "32", "--enable_x86_64"])
    assert flags == {"--soc_model": "SM8650", "--compile_only": True, "--prefill_ar_len": "32",
                     "--enable_x86_64": True}


def test_the_argv_the_legacy_flow_builds_agrees(tmp_path: Path) -> None:
    case = available()["stories260k"]
    legacy = _legacy(tmp_path, _argv(tmp_path), list(case.calibration_prompts))
    agreement = configuration_agreement(case, EMULATOR, legacy)
    assert disagreements(agreement) == []
    assert agreement["emulator"] == {"new": True, "legacy_flag": "--enable_x86_64",
                                     "legacy": True, "agrees": True}
    assert [s["messages"][0]["content"] for s in calibration_samples(case)] == list(
        case.calibration_prompts)


@pytest.mark.parametrize("edit,setting", [
    (lambda a: a[:a.index("--prefill_ar_len") + 1] + ["16"] + a[a.index("--prefill_ar_len") + 2:],
     "prefill_ar_len"),
    (lambda a: [x for x in a if x != "--enable_x86_64"], "emulator"),
    (lambda a: a[:a.index("--soc_model") + 1] + ["SM8750"] + a[a.index("--soc_model") + 2:],
     "soc"),
])
def test_a_setting_llama_py_was_given_differently_fails(tmp_path: Path, edit, setting) -> None:
    case = available()["stories260k"]
    legacy = _legacy(tmp_path, edit(_argv(tmp_path)), list(case.calibration_prompts))
    bad = disagreements(configuration_agreement(case, EMULATOR, legacy))
    assert len(bad) == 1 and bad[0].startswith(f"{setting}: ")


def test_other_calibration_data_fails(tmp_path: Path) -> None:
    case = available()["stories260k"]
    legacy = _legacy(tmp_path, _argv(tmp_path), list(case.calibration_prompts[:1]))
    assert [d.split(":")[0] for d in disagreements(
        configuration_agreement(case, EMULATOR, legacy))] == ["calibration_prompts"]


def test_a_lookahead_build_gives_llama_py_its_window_ngram_and_gcap(tmp_path: Path) -> None:
    """The lookahead variant's settings reach llama.py as its flags (and only a lookahead build's:
    a hybrid argv carries none), and a build given other ones disagrees."""
    case = available()["stories260k"].variant("lookahead")
    argv = _argv(tmp_path, variant="lookahead")
    flags = argv_flags(argv)
    assert (flags["--model_mode"], flags["--window"], flags["--ngram"], flags["--gcap"]) == (
        "lookahead", "4", "3", "4")
    assert not {"--window", "--ngram", "--gcap"} & set(_argv(tmp_path))
    agreement = configuration_agreement(case, EMULATOR, _legacy(tmp_path, argv,
                                                                list(case.calibration_prompts)))
    assert disagreements(agreement) == []
    other = argv[:argv.index("--ngram") + 1] + ["5"] + argv[argv.index("--ngram") + 2:]
    bad = disagreements(configuration_agreement(
        case, EMULATOR, _legacy(tmp_path, other, list(case.calibration_prompts))))
    assert bad == ["ngram: new 3, llama.py --ngram 5"]
