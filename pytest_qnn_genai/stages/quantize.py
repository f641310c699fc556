"""Stage 2, quantize: PT2E with QnnQuantizer and the case's recipe, written to disk as QDQ graphs.

What the legacy ``HybridTextDecoder`` does, as one function:

1. every graph (calibration, kv_forward, prefill_forward) is exported and ``prepare_pt2e``'d with a
   ``QnnQuantizer`` for the SoC/backend and a fresh instance of the case's recipe;
2. only the calibration graph (AR = max_context_len, empty KV cache) sees the calibration prompts,
   and where the model's ``LLMModelConfig`` asks for it (``seq_mse_candidates``: llama3_2-*), the
   first batch runs once more under ``SeqMSE``, which searches the weights' scales, as llama.py's
   ``PTQStrategy._calibrate`` does; the other two graphs get one forward on their example inputs;
3. ``_encoding_override`` copies the calibration graph's encodings (and its KV-output encodings to
   the KV inputs) into kv_forward, then kv_forward's into prefill_forward, so both lowered graphs
   share one set of encodings;
4. the logits and KV-output quant attributes are read from kv_forward into the constant metadata.

The upstream wrapper methods doing 3 and 4 (and the IO tagging compile needs) are instance methods
tied to argparse state; :class:`DecoderView` is the minimal state they read, so they are called as
they are rather than re-implemented.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import TypedDict

import torch

from pytest_qnn_genai.compat import llama_example
from pytest_qnn_genai.hybrid import CALIBRATION, DECODE, PREFILL
from pytest_qnn_genai.sdk import require_active
from pytest_qnn_genai.stages import recipe as recipes
from pytest_qnn_genai.stages.prepare import Inputs, PreparedModel
from pytest_qnn_genai.targets import UNSUPPORTED_BACKENDS, SocSpec
from pytest_qnn_genai.untyped import Json

QDQ_JSON = "qdq.json"
FORMAT_VERSION = 1
GRAPH_FILES = {PREFILL: "prefill_qdq.pt2", DECODE: "decode_qdq.pt2",
               CALIBRATION: "calibration_qdq.pt2"}
_DTYPES = {"uint8": torch.uint8, "uint16": torch.uint16, "float32": torch.float32,
           "int32": torch.int32, "int64": torch.int64}


class UnsupportedBackendError(NotImplementedError):
    """The staged flow cannot build a static LLM for this QNN backend (names the reason)."""


def check_backend(backend: str) -> None:
    """Raise :class:`UnsupportedBackendError` unless the staged flow can build for ``backend``."""
    if backend != "htp":
        reason = UNSUPPORTED_BACKENDS.get(backend, "unknown QNN backend")
        raise UnsupportedBackendError(f"backend {backend!r} is not supported: {reason}")


def _register_qdq_ops() -> None:
    # registers the quantized_decomposed ops a saved QDQ graph refers to
    import executorch.backends.qualcomm.quantizer.quantizer  # noqa: F401


@dataclass
class DecoderView:
    """The state upstream ``TextDecoder`` methods read: graph metadata, IO shapes, the module."""

    meta: dict[str, Json]
    decoder_model: str
    decoder: torch.fx.GraphModule | None = None

    @property
    def control_args(self) -> SimpleNamespace:
        return SimpleNamespace(decoder_model=self.decoder_model)

    @property
    def io_shape(self) -> set[tuple[int, ...]]:
        m = self.meta
        return {(m["get_max_batch_size"], m["get_ar_len"], m["get_vocab_size"])}

    @property
    def kv_cache_shape(self) -> set[tuple[int, int]]:
        m = self.meta
        hd, ctx, ar = m["get_head_dim"], m["get_max_context_len"], m["get_ar_len"]
        return {(hd, ctx), (ctx, hd), (hd, ar), (ar, hd)}


def quant_io_tagger(meta: dict[str, Json], decoder_model: str, fixed_point_type: dict[str, str],
                    ) -> Callable[[torch.fx.Node], torch.dtype | None]:
    """The ``get_quant_io_dtype_fn`` the legacy flow gives ``TagQuantIO`` for one graph."""
    fpt = {k: _DTYPES[v] for k, v in fixed_point_type.items()}
    view = DecoderView(meta, decoder_model)
    return partial(llama_example.llm_wrappers().TextDecoder._tag_ios, view, fixed_point_type=fpt)


def _encoding_override(source: torch.fx.GraphModule, target: torch.fx.GraphModule,
                       n_layers: int, decoder_model: str) -> None:
    ctx = SimpleNamespace(decode=SimpleNamespace(meta={"get_n_layers": n_layers}),
                          control_args=SimpleNamespace(decoder_model=decoder_model))
    llama_example.llm_wrappers().HybridTextDecoder._encoding_override(
        ctx, quantized_model=source, unquantized_model=target, override_kv_cache=True)


def _io_quant_attrs(view: DecoderView) -> dict[str, float]:
    """Logits scale/zero point and every KV output's quant attrs, read from a converted graph."""
    wrappers = llama_example.llm_wrappers()
    view.meta = dict(view.meta)
    wrappers.TextDecoder._save_logits_quant_attrs(view)
    wrappers.TextDecoder._save_output_kv_cache_quant_attrs(view)
    keys = ("get_logits_scale", "get_logits_zero_point")
    attrs = {k: v for k, v in view.meta.items() if k in keys or k.startswith("get_kv_output_")}
    plain: dict[str, float] = json.loads(json.dumps(attrs))  # scales, zero points, as stored
    return plain


def _quantize_graph(prepared: PreparedModel, name: str, soc: SocSpec, backend: str,
                    batches: list[Inputs] | None) -> torch.fx.GraphModule:
    from executorch.backends.qualcomm._passes import SeqMSE
    from executorch.backends.qualcomm.export_utils import get_backend_type, make_quantizer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    recipe = recipes.make_recipe(prepared.case)
    quantizer = make_quantizer(backend=get_backend_type(backend), soc_model=soc.name)
    quantizer.set_recipe(recipe.recipe)
    inputs = prepared.example_inputs[name]
    candidates = recipes.seq_mse_candidates(prepared.case) if batches is not None else 0
    with torch.no_grad():
        exported = torch.export.export(prepared.graphs[name], inputs, strict=True)
        gm = exported.module(check_guards=False)  # no _guards_fn node: the override walks users
        gm = prepare_pt2e(gm, quantizer)
        for i, batch in enumerate(batches if batches is not None else [inputs]):
            gm(*batch)
            if i == 0 and candidates:  # as PTQStrategy._calibrate: SeqMSE on the first batch
                with SeqMSE(gm, candidates):
                    gm(*batch)
        converted: torch.fx.GraphModule = convert_pt2e(gm)
        return converted


def _spec(inputs: Inputs) -> list[list[object]]:
    return [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in inputs]


class GraphRecord(TypedDict):
    """One graph in ``qdq.json``."""

    file: str
    metadata: dict[str, Json]  # static_llama's get_metadata(): the constant methods
    inputs: list[list[object]]  # [shape, dtype] of each positional input
    lowered: bool


class QdqData(TypedDict):
    """``qdq.json``: what quantize wrote, read back by compile and the flows."""

    format_version: int
    case: str
    decoder_model: str
    soc: str
    htp_arch: str
    backend: str
    recipe: dict[str, object]  # recipe.describe()
    fixed_point_type: dict[str, str]  # kv_type, io_type
    graphs: dict[str, GraphRecord]
    metadata: dict[str, Json]  # the .pte's constant methods
    calibration: dict[str, object]
    seconds: float
    versions: dict[str, str]


@dataclass
class QdqArtifacts:
    """Quantize's files: one QDQ ``.pt2`` per graph plus ``qdq.json``."""

    out_dir: Path
    data: QdqData
    _programs: dict[str, torch.export.ExportedProgram] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, out_dir: Path) -> QdqArtifacts:
        """Open a quantize output directory (checks that every graph file is there)."""
        out_dir = Path(out_dir)
        data = json.loads((out_dir / QDQ_JSON).read_text())
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{out_dir / QDQ_JSON}: format {data.get('format_version')}, "
                             f"expected {FORMAT_VERSION}")
        for name, g in data["graphs"].items():
            if not (out_dir / g["file"]).is_file():
                raise FileNotFoundError(f"{out_dir}: {name} graph file {g['file']} is missing")
        return cls(out_dir, data)

    @property
    def metadata(self) -> dict[str, Json]:
        """Constant methods for the .pte (the decode graph's metadata + IO quant attrs)."""
        return self.data["metadata"]

    def path(self, name: str) -> Path:
        return self.out_dir / str(self.data["graphs"][name]["file"])

    def exported(self, name: str) -> torch.export.ExportedProgram:
        """The saved ``ExportedProgram`` of graph ``name``."""
        if name not in self._programs:
            _register_qdq_ops()
            program: torch.export.ExportedProgram = torch.export.load(str(self.path(name)))
            self._programs[name] = program
        return self._programs[name]

    def graph(self, name: str) -> torch.fx.GraphModule:
        """Graph ``name`` as a runnable QDQ ``GraphModule``."""
        return self.exported(name).module(check_guards=False)

    def example_inputs(self, name: str) -> Inputs:
        """Positional inputs of graph ``name`` (those it was exported with)."""
        args, _kwargs = self.exported(name).example_inputs
        return tuple(args)


def quantize(prepared: PreparedModel, soc: SocSpec, out_dir: Path,
             backend: str = "htp") -> QdqArtifacts:
    """Quantize ``prepared`` for ``soc``/``backend`` and write the QDQ graphs + ``qdq.json``.

    Needs an active QNN SDK (:func:`pytest_qnn_genai.sdk.activate`).
    """
    check_backend(backend)
    require_active("quantization (QnnQuantizer)")
    case = prepared.case
    recipe = recipes.make_recipe(case)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / QDQ_JSON).unlink(missing_ok=True)  # written last: its presence marks a complete run
    if not case.calibration_prompts:
        raise ValueError(f"{case.name}: no calibration_prompts in case.json")
    torch.manual_seed(0)
    started = time.monotonic()
    batches = prepared.calibration_batches(case.calibration_prompts)
    converted = {name: _quantize_graph(prepared, name, soc, backend,
                                       batches if name == CALIBRATION else None)
                 for name in (CALIBRATION, *case.lowered_graphs)}
    n_layers = prepared.metadata["get_n_layers"]
    _encoding_override(converted[CALIBRATION], converted[DECODE], n_layers, case.decoder_model)
    metadata = dict(prepared.metadata)
    metadata.update(_io_quant_attrs(DecoderView(prepared.graph_metadata[DECODE],
                                                case.decoder_model, converted[DECODE])))
    if PREFILL in converted:  # hybrid and lookahead: the prefill graph takes decode's encodings
        _encoding_override(converted[DECODE], converted[PREFILL], n_layers, case.decoder_model)

    graphs: dict[str, GraphRecord] = {}
    for name, gm in converted.items():
        inputs = prepared.example_inputs[name]
        exported = torch.export.export(gm, inputs, strict=True)
        torch.export.save(exported, str(out_dir / GRAPH_FILES[name]))
        graphs[name] = {"file": GRAPH_FILES[name], "metadata": prepared.graph_metadata[name],
                        "inputs": _spec(inputs), "lowered": name != CALIBRATION}
    kv_bits = recipe.get_kv_io_bit_width()
    data: QdqData = {
        "format_version": FORMAT_VERSION,
        "case": case.name,
        "decoder_model": case.decoder_model,
        "soc": soc.name,
        "htp_arch": soc.htp_arch,
        "backend": backend,
        "recipe": recipes.describe(recipe),
        "fixed_point_type": {"kv_type": {8: "uint8", 16: "uint16"}[kv_bits],
                             "io_type": {16: "uint16"}[recipe.get_logits_output_bit_width()]},
        "graphs": graphs,
        "metadata": metadata,
        "calibration": {"prompts": list(case.calibration_prompts), "chunks": len(batches),
                        "prompt_tokens": [len(prepared.calibration_ids(p))
                                          for p in case.calibration_prompts]},
        "seconds": round(time.monotonic() - started, 1),
        "versions": _versions(),
    }
    (out_dir / QDQ_JSON).write_text(json.dumps(data, indent=1))
    return QdqArtifacts(out_dir, data)


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "executorch", "torchao")}
