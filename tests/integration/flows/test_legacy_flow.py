"""The legacy flow: executorch's llama.py compiles stories260k for SM8650 on the x86 emulator."""
from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from pytest_qnn_genai.flows.legacy import (
    LegacyArtifacts,
    UnsupportedLegacyConfig,
    build_legacy,
    check_supported,
)
from pytest_qnn_genai.flows.llama_cli import (
    KILL_GRACE_S,
    LegacyFlowError,
    LegacyTimeout,
    legacy_parser,
    legacy_parser_defaults,
)
from pytest_qnn_genai.models.families import FamilyError
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.runtime.pte_info import PteInfo, PteInfoError, inspect_pte
from pytest_qnn_genai.targets import Target, soc

GRAPH_METHODS = ("prefill_forward", "kv_forward")


SM8650_EMULATOR = Target(soc("SM8650"))


@pytest.fixture(scope="module")
def info(legacy: LegacyArtifacts) -> PteInfo:
    return inspect_pte(legacy.pte)


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                members.append(int(entry.name))
    return members


def test_build_writes_the_pte_and_the_qdq_reference(legacy: LegacyArtifacts) -> None:
    assert legacy.pte.is_file() and legacy.pte.stat().st_size > 100_000
    assert legacy.decode_qdq.is_file() and legacy.decode_qdq.stat().st_size > 100_000
    assert "Finish compile_only" in legacy.log.read_text(errors="replace")
    argv = list(legacy.argv)
    assert argv[1] == "-c"  # bootstrap: torchtune stand-in in the subprocess only, no stub dir
    for flag in ("--compile_only", "--enable_x86_64", "--calib_samples"):
        assert flag in argv
    assert argv[argv.index("--soc_model") + 1] == "SM8650"
    assert argv[argv.index("--model_mode") + 1] == "hybrid"
    # the build ran in a temporary folder that the cache renamed into place: same file names
    calib_name = Path(argv[argv.index("--calib_samples") + 1]).name
    calib = json.loads((legacy.pte.parent / calib_name).read_text())
    assert calib and calib[0]["messages"][0]["role"] == "user"
    assert legacy.wall_s > 0
    assert legacy.peak_rss_mb is not None and legacy.peak_rss_mb > 100
    assert "torchtune" not in os.environ.get("PYTHONPATH", "")


def test_pte_methods_and_constants(info: PteInfo, legacy: LegacyArtifacts,
                                   case: ModelCase) -> None:
    params = case.params_dict
    assert set(GRAPH_METHODS) <= set(info.method_names)
    assert info.graph_methods == sorted(GRAPH_METHODS)
    c = info.constants
    expected = {
        "get_max_seq_len": case.max_seq_len, "get_max_context_len": case.max_context_len,
        "get_n_layers": params["n_layers"], "get_n_kv_heads": params["n_kv_heads"],
        "get_head_dim": params["dim"] // params["n_heads"], "get_dim": params["dim"],
        "get_vocab_size": params["vocab_size"], "get_kv_io_bit_width": case.kv_io_bit_width,
        "get_ar_len": 1, "get_max_batch_size": 1, "get_use_kv_cache": True,
        "get_bos_id": 1, "get_eos_id": 2, "get_n_bos": 1, "get_n_eos": 1,
    }
    assert {k: c[k] for k in expected} == expected
    # the notes' stories260k figures
    assert (c["get_max_seq_len"], c["get_n_layers"], c["get_kv_io_bit_width"]) == (128, 5, 8)
    assert c["get_logits_scale"] > 0 and 0 <= c["get_logits_zero_point"] <= 65535
    for i in range(2 * params["n_layers"]):
        scale, zp, qmin, qmax, dtype = c[f"get_kv_output_{i}_quant_attr"]
        assert scale > 0 and (qmin, qmax, dtype) == (0, 255, "torch.uint8") and 0 <= zp <= 255
    assert info.size_bytes == legacy.pte.stat().st_size


def test_pte_io_shapes_follow_the_case(info: PteInfo, case: ModelCase) -> None:
    p = case.params_dict
    layers, heads, hd = p["n_layers"], p["n_kv_heads"], p["dim"] // p["n_heads"]
    ctx, ar = case.max_context_len, case.prefill_ar_len
    for name, n in (("prefill_forward", ar), ("kv_forward", 1)):
        m = info.methods[name]
        ins = [(t.dtype, t.shape) for t in m.inputs]
        assert ins[:3] == [("int32", (1, n)), ("uint16", (1, 1, n, ctx)), ("int32", (1, n))]
        assert ins[3:3 + layers] == [("uint8", (1, heads, hd, ctx - n))] * layers
        assert ins[3 + layers:] == [("uint8", (1, heads, ctx - n, hd))] * layers
        outs = [(t.dtype, t.shape) for t in m.outputs]
        assert outs[0] == ("uint16", (1, n, p["vocab_size"]))
        assert outs[1:1 + layers] == [("uint8", (1, heads, hd, n))] * layers
        assert outs[1 + layers:] == [("uint8", (1, heads, n, hd))] * layers


def test_everything_is_delegated_to_qnn(info: PteInfo) -> None:
    assert info.delegates == {"QnnBackend"}
    for name in GRAPH_METHODS:
        assert info.methods[name].delegates == ("QnnBackend",)
        assert info.methods[name].cpu_operators == ()
    for name in set(info.method_names) - set(GRAPH_METHODS):
        assert info.methods[name].is_constant and info.methods[name].delegates == ()


def test_decode_qdq_reference_loads_and_runs(legacy: LegacyArtifacts, case: ModelCase) -> None:
    import executorch.backends.qualcomm.quantizer.quantizer  # noqa: F401  (quantized ops)
    import torch

    ep = torch.export.load(str(legacy.decode_qdq))
    example = ep.example_inputs[0]
    with torch.no_grad():
        logits = ep.module()(*example)[0]
    assert tuple(logits.shape) == (1, case.max_context_len, case.params_dict["vocab_size"])
    assert torch.isfinite(logits).all() and logits.abs().max() > 0


def test_parser_defaults_snapshot_material() -> None:
    defaults = legacy_parser_defaults()
    assert defaults["--max_seq_len"] == 512 and defaults["--prefill_ar_len"] == 32
    assert defaults["--temperature"] == 0.8 and defaults["--compile_only"] is False
    assert "--help" not in defaults
    text = json.dumps(defaults)  # plain JSON, and machine-independent
    assert "site-packages" not in text and "<executorch>/" in text


@pytest.mark.parametrize("change, error, message", [
    (dict(target=Target(soc("SM8650"), backend="gpu")), UnsupportedLegacyConfig,
     "only simulates the HTP backend"),
    (dict(target=Target(soc("SM8650"), backend="lpai", device="SERIAL1")),
     UnsupportedLegacyConfig, "backends only"),
    # before llama.py's own --decoder_model choices: no family module lays out its inputs
    (dict(decoder_model="no-such-model"), FamilyError,
     "no model family serves decoder_model 'no-such-model'"),
    (dict(prefill_ar_len=256), UnsupportedLegacyConfig, "max_context_len 128 < prefill_ar_len 256"),
    (dict(calibration_prompts=()), UnsupportedLegacyConfig, "no calibration_prompts"),
])
def test_unsupported_combinations_fail_before_running(case: ModelCase, tmp_path: Path,
                                                      emulator_sdk_root: Path, change: dict,
                                                      error: type[Exception],
                                                      message: str) -> None:
    legacy_parser()  # read once (a subprocess); the checks themselves are instant
    target = change.pop("target", SM8650_EMULATOR)
    bad = dataclasses.replace(case, **change)
    with pytest.raises(error, match=message.replace("(", r"\(")):
        build_legacy(bad, target, tmp_path / "out", sdk_root=emulator_sdk_root)
    assert not (tmp_path / "out" / "legacy_llama.log").exists()  # llama.py never started


def test_a_decoder_model_the_installed_llama_py_lacks_is_one_line(case: ModelCase,
                                                                 tmp_path: Path) -> None:
    """The installed llama.py's own ``--decoder_model`` choices, less the case's (an older
    executorch): refused before llama.py runs."""
    parser = legacy_parser()
    option = parser.options["--decoder_model"]
    assert option.choices is not None and case.decoder_model in option.choices
    older = dataclasses.replace(parser, options={**parser.options, "--decoder_model": (
        dataclasses.replace(option, choices=tuple(c for c in option.choices
                                                  if c != case.decoder_model)))})
    inputs = case.family.legacy_inputs(case, tmp_path / "inputs")
    check_supported(case, SM8650_EMULATOR, parser, inputs)  # the real parser accepts it
    with pytest.raises(UnsupportedLegacyConfig,
                       match=f"--decoder_model does not accept '{case.decoder_model}'"):
        check_supported(case, SM8650_EMULATOR, older, inputs)


def test_timeout_kills_the_process_group(case: ModelCase, tmp_path: Path,
                                         emulator_sdk_root: Path) -> None:
    legacy_parser()
    timeout = 4.0
    start = time.monotonic()
    with pytest.raises(LegacyTimeout, match="timed out after 4s") as err:
        build_legacy(case, SM8650_EMULATOR, tmp_path / "out", timeout_s=timeout,
                     sdk_root=emulator_sdk_root)
    assert time.monotonic() - start < timeout + KILL_GRACE_S + 3
    assert err.value.pid > 0 and _group_members(err.value.pid) == []
    assert (tmp_path / "out" / "legacy_llama.log").is_file()


def test_failure_names_exit_code_and_log_tail(case: ModelCase, tmp_path: Path,
                                              emulator_sdk_root: Path) -> None:
    folder = tmp_path / "broken-case"
    folder.mkdir()
    for role, path in case.files().items():
        (folder / path.name).write_bytes(b"not a checkpoint" if role == "checkpoint"
                                         else path.read_bytes())
    broken = dataclasses.replace(case, folder=folder)
    with pytest.raises(LegacyFlowError, match=r"failed with exit code 1 ") as err:
        build_legacy(broken, SM8650_EMULATOR, tmp_path / "out", timeout_s=600,
                     sdk_root=emulator_sdk_root)
    assert "Last lines of" in str(err.value) and "Error" in str(err.value)
    assert not isinstance(err.value, (UnsupportedLegacyConfig, LegacyTimeout))


def test_inspect_rejects_a_file_that_is_not_a_program(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pte"
    junk.write_bytes(b"\0" * 64)
    with pytest.raises(PteInfoError, match="not an ExecuTorch program"):
        inspect_pte(junk)
