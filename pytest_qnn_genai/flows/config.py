"""Readable configuration data of the flows, for snapshots: what the new flow builds with, next to
the legacy ``llama.py`` parser's defaults, and each flow's artifact layout."""
from __future__ import annotations

from typing import Any

from pytest_qnn_genai.hybrid import ARTIFACT_KEYS

# new-flow setting -> the llama.py flag that sets the same thing
LEGACY_FLAGS = {
    "model_mode": "--model_mode", "prefill_ar_len": "--prefill_ar_len",
    "max_seq_len": "--max_seq_len", "max_context_len": "--max_context_len",
    "soc": "--soc_model", "backend": "--backend", "online_prepare": "--online_prepare",
    "shared_buffer": "--shared_buffer", "htp_performance_mode": "--htp_performance_mode",
    "use_fp16": "--use_fp16", "temperature": "--temperature", "x86_64": "--enable_x86_64",
    "kv_io_bit_width": None, "quant_recipe": None,  # llama.py takes these from its recipe class
}


def _perf_mode_value(name: str) -> Any:
    from executorch.backends.qualcomm.serialization.qc_schema import (
        QnnExecuTorchHtpPerformanceMode,
    )

    return int(QnnExecuTorchHtpPerformanceMode[name])


def new_flow_configuration(case: Any, target: Any) -> dict[str, Any]:
    """The settings the new flow builds ``case`` for ``target`` with (case + compile spec)."""
    from pytest_qnn_genai.stages.compile import compile_spec_data

    spec = compile_spec_data(target)
    return {
        "model_mode": case.model_mode, "prefill_ar_len": case.prefill_ar_len,
        "max_seq_len": case.max_seq_len, "max_context_len": case.max_context_len,
        "soc": spec["soc"], "backend": spec["backend"], "online_prepare": spec["online_prepare"],
        "shared_buffer": spec["shared_buffer"],
        "htp_performance_mode": _perf_mode_value(spec["backend_options"]["performance_mode"]),
        "use_fp16": spec["backend_options"]["precision"] == "fp16",
        "temperature": 0,  # greedy: the runner and the legacy build both use argmax
        "x86_64": spec["for_emulator"],
        "kv_io_bit_width": case.kv_io_bit_width, "quant_recipe": case.quant_recipe,
    }


def configuration_agreement(case: Any, target: Any,
                            legacy_defaults: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per setting: the new flow's value, the llama.py flag and its default, and whether the
    default already agrees (if not, the legacy flow must pass the flag, as ``legacy_argv`` does)."""
    out = {}
    for key, value in new_flow_configuration(case, target).items():
        flag = LEGACY_FLAGS[key]
        default = legacy_defaults.get(flag) if flag else None
        out[key] = {"new": value, "legacy_flag": flag, "legacy_default": default,
                    "default_agrees": None if flag is None else default == value}
    return out


def artifact_layout(artifacts: Any, signature: Any) -> dict[str, Any]:
    """A flow's artifact keys, graph methods and metadata (constant) method names."""
    graphs = sorted(signature.io)
    return {"flow": artifacts.flow, "artifact_keys": sorted(artifacts.files),
            "expected_keys": sorted(ARTIFACT_KEYS),
            "pte_name": artifacts.pte.name, "qdq_name": artifacts.qdq_graph.name,
            "graph_methods": graphs,
            "metadata_methods": sorted(m for m in signature.methods if m not in graphs)}
