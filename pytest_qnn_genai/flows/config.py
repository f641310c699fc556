"""What each flow's build really carries, as data for the parity checks and the snapshots.

Nothing here restates a flow's settings from the harness's own beliefs: the legacy side is the
argv ``llama.py`` was actually run with (recorded in the build's ``legacy.json``), parsed by
``llama.py``'s own parser, and the calibration samples it was given; the staged side is read back
out of what the staged build made (:func:`staged_settings`: the ``.pte``'s methods, IO shapes,
constant methods and QNN compile options, and the quantize stage's record of the recipe and the
prompts it calibrated on). Hazard: comparing the case with an argv built from the same case
fields can never fail; only the artifacts say what was built.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.hybrid import ARTIFACT_KEYS, DECODE, KV_MODE, PREFILL

if TYPE_CHECKING:
    from pytest_qnn_genai.checks.parity import Signature
    from pytest_qnn_genai.flows.base import FlowArtifacts
    from pytest_qnn_genai.runtime.pte_info import PteInfo

# QNN's backend type (compile options) -> llama.py's --backend
BACKEND_TYPES = {"kHtpBackend": "htp", "kGpuBackend": "gpu", "kLpaiBackend": "lpai"}

Setting = tuple[object, str]  # a value and where it was read


def parse_legacy_argv(argv: tuple[str, ...] | list[str]) -> argparse.Namespace:
    """The argv ``llama.py`` was run with (from its first ``--`` flag on), parsed by the installed
    ``llama.py``'s own ``_build_parser()``: its defaults and types, not the harness's reading."""
    from pytest_qnn_genai.compat import llama_example

    args = list(argv)
    first = next((k for k, a in enumerate(args) if a.startswith("--")), len(args))
    parsed: argparse.Namespace = llama_example.llama_script()._build_parser().parse_args(
        args[first:])
    return parsed


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def llama_recipe(decoder_model: str) -> str:
    """The quant recipe class ``llama.py`` builds ``decoder_model`` with (its
    ``SUPPORTED_LLM_MODELS`` config), by qualified name."""
    from pytest_qnn_genai.compat import llama_example

    recipe = llama_example.package().SUPPORTED_LLM_MODELS[decoder_model].quant_recipe
    return f"{recipe.__module__}.{recipe.__qualname__}"


def legacy_settings(args: argparse.Namespace, artifact_dir: Path, recipe: str,
                    ) -> dict[str, Setting]:
    """What ``llama.py`` was told to build (``args``: :func:`parse_legacy_argv`), in the terms
    :func:`staged_settings` reads a build in: the recipe its ``--decoder_model`` selects
    (``recipe``: :func:`llama_recipe`), the decode graph's tokens per call its ``--model_mode``
    (and lookahead flags) make, the prompts of the ``--calib_samples`` file it read (kept in
    ``artifact_dir``)."""
    lookahead = args.model_mode == "lookahead"
    decode_ar = (_next_power_of_two((args.window + args.gcap) * (args.ngram - 1)) if lookahead
                 else 1)
    samples = artifact_dir / Path(args.calib_samples[0]).name
    prompts: object = ([m["content"] for s in json.loads(samples.read_text()) for m in s["messages"]]
                     if samples.is_file() else None)
    settings: dict[str, Setting] = {
        "decoder_model": (args.decoder_model, "--decoder_model"),
        "quant_recipe": (recipe, f"SUPPORTED_LLM_MODELS[{args.decoder_model!r}].quant_recipe"),
        "model_mode": (args.model_mode, "--model_mode"),
        "decode_ar_len": (decode_ar, "--window/--ngram/--gcap (lookahead), else 1"
                          if lookahead else "--model_mode (1 token per decode call)"),
        "prefill_ar_len": (args.prefill_ar_len, "--prefill_ar_len"),
        "max_seq_len": (args.max_seq_len, "--max_seq_len"),
        "max_context_len": (args.max_context_len, "--max_context_len"),
        "soc": (args.soc_model, "--soc_model"),
        "backend": (args.backend, "--backend"),
        "x86_64": (bool(args.enable_x86_64), "--enable_x86_64"),
        "calibration_prompts": (prompts, f"--calib_samples ({samples.name})"),
    }
    if args.model_mode == KV_MODE:  # llama.py builds no prefill graph: --prefill_ar_len is unread
        del settings["prefill_ar_len"]
    return settings


def staged_settings(info: PteInfo, options: dict[str, object],
                    qdq_record: dict[str, object]) -> dict[str, Setting]:
    """What the staged build is, read back out of it: ``info`` (its ``.pte``: methods, IO,
    constant methods), ``options`` (the QNN compile options its delegates carry) and
    ``qdq_record`` (the quantize stage's ``qdq.json``: the recipe and calibration it ran)."""
    prefill, decode = info.methods.get(PREFILL), info.methods.get(DECODE)
    decode_ar = decode.inputs[0].shape[-1] if decode is not None else None
    mode = (KV_MODE if prefill is None else "hybrid" if decode_ar == 1 else "lookahead"
            ) if decode is not None else None
    soc_info = options.get("soc_info") or {}
    backend = options.get("backend_options") or {}
    recipe = qdq_record.get("recipe") or {}
    calibration = qdq_record.get("calibration") or {}
    assert isinstance(soc_info, dict) and isinstance(backend, dict)
    assert isinstance(recipe, dict) and isinstance(calibration, dict)
    const = info.constants
    settings: dict[str, Setting] = {
        "decoder_model": (qdq_record.get("decoder_model"), "qdq.json decoder_model"),
        "quant_recipe": (recipe.get("class"), "qdq.json recipe.class"),
        "model_mode": (mode, f".pte methods {sorted(m for m in (PREFILL, DECODE) if m in info.methods)}"
                             f" and {DECODE}'s tokens per call"),
        "decode_ar_len": (decode_ar, f".pte {DECODE} input 0 shape"),
        "prefill_ar_len": (prefill.inputs[0].shape[-1] if prefill is not None else None,
                           f".pte {PREFILL} input 0 shape"),
        "max_seq_len": (const.get("get_max_seq_len"), ".pte get_max_seq_len"),
        "max_context_len": (const.get("get_max_context_len"), ".pte get_max_context_len"),
        "soc": (soc_info.get("soc_model"), ".pte compile options soc_info.soc_model"),
        "backend": (BACKEND_TYPES.get(str(backend.get("backend_type")), backend.get("backend_type")),
                    ".pte compile options backend_type"),
        "x86_64": (options.get("shared_buffer") is False,
                   ".pte compile options: no shared buffer (llama.py shares buffers unless "
                   "--enable_x86_64)"),
        "calibration_prompts": (calibration.get("prompts"), "qdq.json calibration.prompts"),
    }
    if mode == KV_MODE:  # no prefill graph to read a length from
        del settings["prefill_ar_len"]
    return settings


def agreement_of(staged: dict[str, Setting], legacy: dict[str, Setting],
                 ) -> dict[str, dict[str, object]]:
    """Per setting: the staged build's value and where it was read, llama.py's and where, and
    whether they agree (a setting only one side names disagrees). The calibration prompts show
    as their count."""
    out: dict[str, dict[str, object]] = {}
    for key in sorted(staged.keys() | legacy.keys()):
        (new, new_from), (old, old_from) = (staged.get(key, (None, "<absent>")),
                                            legacy.get(key, (None, "<absent>")))
        agrees = new is not None and new == old
        if isinstance(new, list) or isinstance(old, list):
            new = len(new) if isinstance(new, list) else None
            old = len(old) if isinstance(old, list) else None
        out[key] = {"new": new, "new_from": new_from, "legacy": old, "legacy_from": old_from,
                    "agrees": agrees}
    return out


def disagreements(agreement: dict[str, dict[str, object]]) -> list[str]:
    """One line per setting the staged build does not carry as llama.py was told it."""
    return [f"{k}: the staged build carries {v['new']!r} ({v['new_from']}) but llama.py was "
            f"given {v['legacy']!r} ({v['legacy_from']})"
            for k, v in agreement.items() if not v["agrees"]]


def artifact_layout(artifacts: FlowArtifacts, signature: Signature) -> dict[str, object]:
    """A flow's artifact keys, graph methods and metadata (constant) method names."""
    graphs = sorted(signature.io)
    return {"flow": artifacts.flow, "artifact_keys": sorted(artifacts.files),
            "expected_keys": sorted(ARTIFACT_KEYS),
            "pte_name": Path(artifacts.pte).name, "qdq_name": Path(artifacts.qdq_graph).name,
            "graph_methods": graphs,
            "metadata_methods": sorted(m for m in signature.methods if m not in graphs)}
