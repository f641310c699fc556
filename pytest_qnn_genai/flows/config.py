"""What each flow's build really carries, as data for the parity checks and the snapshots.

Nothing here restates a flow's settings from the harness's own beliefs: the legacy side is read
from the argv ``llama.py`` was actually run with (recorded in the build's ``legacy.json``) and the
calibration samples it was given; the compile options of both sides are read back out of the
built ``.pte`` files (:func:`pytest_qnn_genai.runtime.pte_info.compile_options`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.hybrid import ARTIFACT_KEYS

if TYPE_CHECKING:
    from pytest_qnn_genai.checks.parity import Signature
    from pytest_qnn_genai.flows.base import FlowArtifacts
    from pytest_qnn_genai.flows.legacy import LegacyArtifacts
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.targets import Target

# case/target setting -> the llama.py flag that carries it
LEGACY_FLAGS = {
    "decoder_model": "--decoder_model", "model_mode": "--model_mode",
    "prefill_ar_len": "--prefill_ar_len", "max_seq_len": "--max_seq_len",
    "max_context_len": "--max_context_len", "soc": "--soc_model", "backend": "--backend",
    "temperature": "--temperature", "emulator": "--enable_x86_64",
    "window": "--window", "ngram": "--ngram", "gcap": "--gcap",
}


def argv_flags(argv: tuple[str, ...] | list[str]) -> dict[str, str | bool]:
    """``{flag: value}`` of an argv from its first ``--`` flag on (``True`` for a flag without a
    value); what comes before (interpreter, ``-c``, bootstrap) is skipped."""
    out: dict[str, str | bool] = {}
    args = list(argv)
    i = next((k for k, a in enumerate(args) if a.startswith("--")), len(args))
    while i < len(args):
        flag = args[i]
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[flag], i = args[i + 1], i + 2
        else:
            out[flag], i = True, i + 1
    return out


def new_flow_settings(case: ModelCase, target: Target) -> dict[str, object]:
    """The settings the staged flow builds ``case`` for ``target`` with (lookahead's window,
    ngram and gcap for a lookahead build only)."""
    settings: dict[str, object] = {
        "decoder_model": case.decoder_model, "model_mode": case.model_mode,
        "prefill_ar_len": case.prefill_ar_len, "max_seq_len": case.max_seq_len,
        "max_context_len": case.max_context_len, "soc": target.soc.name,
        "backend": target.backend, "temperature": 0, "emulator": target.is_emulator}
    if case.lookahead is not None:
        settings.update(zip(("window", "ngram", "gcap"), case.lookahead))
    return settings


def _as(value: object, like: object) -> object:
    """A recorded argv string as the type of the setting it carries."""
    if isinstance(like, bool):
        return bool(value)
    if isinstance(like, int) and isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            return value
    return value


def configuration_agreement(case: ModelCase, target: Target,
                            legacy: LegacyArtifacts) -> dict[str, dict[str, object]]:
    """Per setting: the staged flow's value, the llama.py flag, the value llama.py was run with
    (absent flag: ``False`` for a switch, None otherwise), and whether they agree. The calibration
    prompts are compared with the ``--calib_samples`` file llama.py read."""
    flags = argv_flags(legacy.argv)
    out: dict[str, dict[str, object]] = {}
    for key, value in new_flow_settings(case, target).items():
        flag = LEGACY_FLAGS[key]
        raw = flags.get(flag, False if isinstance(value, bool) else None)
        given = _as(raw, value)
        out[key] = {"new": value, "legacy_flag": flag, "legacy": given, "agrees": given == value}
    samples = legacy.pte.parent / "calib_samples.json"
    prompts = ([m["content"] for s in json.loads(samples.read_text()) for m in s["messages"]]
               if samples.is_file() else None)
    out["calibration_prompts"] = {"new": len(case.calibration_prompts),
                                  "legacy_flag": "--calib_samples",
                                  "legacy": None if prompts is None else len(prompts),
                                  "agrees": prompts == list(case.calibration_prompts)}
    return out


def disagreements(agreement: dict[str, dict[str, object]]) -> list[str]:
    """One line per setting the two flows were not given alike."""
    return [f"{k}: new {v['new']!r}, llama.py {v['legacy_flag']} {v['legacy']!r}"
            for k, v in agreement.items() if not v["agrees"]]


def artifact_layout(artifacts: FlowArtifacts, signature: Signature) -> dict[str, object]:
    """A flow's artifact keys, graph methods and metadata (constant) method names."""
    graphs = sorted(signature.io)
    return {"flow": artifacts.flow, "artifact_keys": sorted(artifacts.files),
            "expected_keys": sorted(ARTIFACT_KEYS),
            "pte_name": Path(artifacts.pte).name, "qdq_name": Path(artifacts.qdq_graph).name,
            "graph_methods": graphs,
            "metadata_methods": sorted(m for m in signature.methods if m not in graphs)}
