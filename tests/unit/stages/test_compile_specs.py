"""The staged flow's compile spec, decoded back from the bytes executorch serializes into a .pte,
says what llama.py's spec says for every SoC, on the emulator and on a phone (no build needed).
The built programs themselves are compared in suites/parity (test_parity_snapshots)."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks.parity import compare_compile_options
from pytest_qnn_genai.runtime.pte_info import _enum_names
from pytest_qnn_genai.stages.compile import compile_specs
from pytest_qnn_genai.targets import SOCS, Target


def _decoded(specs: list) -> dict:
    from executorch.backends.qualcomm.serialization.qc_schema_serialize import (
        flatbuffer_to_option,
    )

    (spec,) = [s for s in specs if s.key == "qnn_compile_spec"]
    return _enum_names(flatbuffer_to_option(spec.value))


def _llama_py_spec(target: Target) -> dict:
    """What executorch's llama.py passes for the text decoder (examples/qualcomm/oss_scripts/llama/
    llama.py: use_weight_sharing and shared_buffer = not --enable_x86_64, use_mha2sha=True)."""
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
    )

    x86 = target.is_emulator
    return _decoded(generate_qnn_executorch_compiler_spec(
        soc_model=target.soc.chipset,
        backend_options=generate_htp_compiler_spec(use_fp16=False, use_multi_contexts=False,
                                                   use_weight_sharing=not x86),
        shared_buffer=not x86, use_mha2sha=True, online_prepare=False))


@pytest.mark.parametrize("device", ["x86-emulator", "R5CX1234ABC"])
@pytest.mark.parametrize("soc_name", ["SM8450", "SM8550", "SM8650", "SM8750", "SM8850"])
def test_staged_spec_is_llama_py_spec(soc_name: str, device: str) -> None:
    target = Target(SOCS[soc_name], "htp", device)
    ours = _decoded(compile_specs(target))
    checks = compare_compile_options(_llama_py_spec(target), ours)
    assert all(c.ok for c in checks), checks[0].detail
    assert ours["soc_info"]["soc_model"] == soc_name
    assert ours["shared_buffer"] is (device != "x86-emulator")


def test_a_differing_option_fails() -> None:
    target = Target(SOCS["SM8650"])
    ours = _decoded(compile_specs(target))
    other = {**ours, "shared_buffer": not ours["shared_buffer"]}
    (check,) = compare_compile_options(ours, other)
    assert not check.ok and "shared_buffer" in check.detail
    (empty,) = compare_compile_options({}, {})
    assert not empty.ok
