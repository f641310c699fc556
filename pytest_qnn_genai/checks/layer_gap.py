"""Where a program leaves its QDQ graph, layer by layer: one decode call's RMSNorm outputs and
logits as the target computed them (QNN's tensor dump, :mod:`pytest_qnn_genai.runtime.
intermediates`) against the deployed decode QDQ graph's (``kv_forward``, the graph the program
was compiled from, not the calibration graph) on the very same inputs.

Contract: :func:`qdq_inputs` turns the program's quantized inputs into the QDQ graph's (each
integer input dequantized by the encoding of the QDQ graph's own quantize node on it, so the
QDQ graph quantizes it back to the same integers); :func:`compare_call` runs the graph, takes the
integer output of the quantize node after each ``rms_norm`` (the encoding QNN's tensor carries
too) and holds the dumped tensor of the same name to it (``rms_norm_<k>`` ↔
``aten_rms_norm_default_<k>``: the k-th RMSNorm in both graphs' order), dequantized alike. Norm
2i normalizes the residual stream after layer i - 1, 2i + 1 the stream after layer i's
attention, the last one the stream into the output head: the row whose SQNR falls most from the
row before names the sublayer (between the two) where the target leaves the graph most. Hazard:
the pairing is by order; graphs whose RMSNorm counts differ, or a tensor of another size, are a
:class:`LayerGapError`, never a row.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from pytest_qnn_genai.checks import numerics
from pytest_qnn_genai.runtime.intermediates import module_of

RMS_NORM = "rms_norm"
DUMPED_RMS_NORM = "aten_rms_norm_default"


class LayerGapError(ValueError):
    """The dump and the QDQ graph cannot be paired (one line)."""


@dataclass(frozen=True)
class Row:
    """One RMSNorm output (or the logits) of one call: target vs QDQ graph."""

    name: str  # the QDQ graph's node
    where: str  # "after layer 3 attention", "after layer 3", "logits"
    sqnr_db: float
    cosine: float


def _is_quantize(node: torch.fx.Node) -> bool:
    return "quantize_per_tensor" in str(node.target) and "dequantize" not in str(node.target)


def _const(graph: torch.fx.GraphModule, arg: object) -> float:
    if not isinstance(arg, torch.fx.Node):
        return float(arg)  # type: ignore[arg-type]
    if arg.op != "get_attr":
        raise LayerGapError(f"a quantize node's encoding is computed ({arg.name}), not constant")
    value: object = graph
    for part in str(arg.target).split("."):
        value = getattr(value, part)
    return float(torch.as_tensor(value).item())


def _encoding(graph: torch.fx.GraphModule, quantize: torch.fx.Node) -> tuple[float, float]:
    return _const(graph, quantize.args[1]), _const(graph, quantize.args[2])


def _quantize_of(node: torch.fx.Node) -> torch.fx.Node | None:
    return next((u for u in node.users if _is_quantize(u)), None)


def qdq_inputs(graph: torch.fx.GraphModule,
               program_inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The QDQ graph's inputs for one call the program made with ``program_inputs``."""
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(program_inputs):
        raise LayerGapError(f"the QDQ graph takes {len(placeholders)} inputs, the program "
                            f"{len(program_inputs)}")
    out = []
    for node, value in zip(placeholders, program_inputs):
        quantize = _quantize_of(node)
        if quantize is None or value.dtype.is_floating_point:
            out.append(value)
            continue
        scale, zero_point = _encoding(graph, quantize)
        out.append(((value.to(torch.float64) - zero_point) * scale).to(torch.float32))
    return out


class _Recorder(torch.fx.Interpreter):
    def __init__(self, graph: torch.fx.GraphModule, keep: set[str]) -> None:
        super().__init__(graph)
        self.keep = keep
        self.kept: dict[str, object] = {}

    def run_node(self, n: torch.fx.Node) -> object:
        value = super().run_node(n)
        if n.name in self.keep:
            self.kept[n.name] = value
        return value


def _held(ref: np.ndarray, got: np.ndarray, scale: float,
          zero_point: float) -> tuple[float, float]:
    """SQNR dB and cosine of the dumped integers ``got`` against the QDQ graph's ``ref``, both
    dequantized by the encoding they share."""
    want = (ref.reshape(-1) - zero_point) * scale
    have = (got.reshape(-1) - zero_point) * scale
    return numerics.sqnr_db(want, have), numerics.cosine(want, have)


def _where(k: int, count: int) -> str:
    """Which residual stream RMSNorm ``k`` of ``count`` normalizes (2i: after layer i - 1, 2i + 1:
    after layer i's attention, the last: after the last layer, into the output head)."""
    if k == count - 1:
        return f"after layer {k // 2 - 1} (into the output head)"
    if k % 2:
        return f"after layer {k // 2} attention"
    return "after the embedding" if k == 0 else f"after layer {k // 2 - 1}"


def compare_call(graph: torch.fx.GraphModule, program_inputs: Sequence[torch.Tensor],
                 dumped: Mapping[str, np.ndarray], logits: np.ndarray) -> list[Row]:
    """One call's rows: every RMSNorm output, then the logits (``logits``: the program's
    dequantized output of this call), target vs the QDQ graph on the same inputs."""
    norms = [n for n in graph.graph.nodes if n.op == "call_function" and RMS_NORM in str(n.target)]
    names = [DUMPED_RMS_NORM + (f"_{k}" if k else "") for k in range(len(norms))]
    missing = [n for n in names if n not in dumped]
    extra = [n for n in dumped if n.startswith(DUMPED_RMS_NORM) and n not in names]
    if missing or extra:
        raise LayerGapError(f"the QDQ graph has {len(norms)} RMSNorms; the dump lacks "
                            f"{missing[:3]} and has {extra[:3]} more")
    quantizes = [_quantize_of(n) for n in norms]
    if any(q is None for q in quantizes):
        raise LayerGapError("an RMSNorm of the QDQ graph has no quantize node on its output")
    keep = {q.name for q in quantizes if q is not None}
    recorder = _Recorder(graph, keep)
    with torch.no_grad():
        result = recorder.run(*qdq_inputs(graph, program_inputs))
    rows = []
    for k, (norm, quantize, name) in enumerate(zip(norms, quantizes, names)):
        assert quantize is not None
        scale, zero_point = _encoding(graph, quantize)
        ref = np.asarray(recorder.kept[quantize.name], dtype=np.float64)
        got = np.asarray(dumped[name], dtype=np.float64)
        if ref.size != got.size:
            raise LayerGapError(f"{name}: {got.size} values dumped, {ref.size} in the QDQ graph")
        rows.append(Row(norm.name, _where(k, len(norms)), *_held(ref, got, scale, zero_point)))
    ref_logits = np.asarray(result[0] if isinstance(result, (tuple, list)) else result,
                            dtype=np.float64).reshape(-1)
    got_logits = np.asarray(logits, dtype=np.float64).reshape(-1)
    rows.append(Row("logits", "logits", numerics.sqnr_db(ref_logits, got_logits),
                    numerics.cosine(ref_logits, got_logits)))
    return rows


T = TypeVar("T")
_OP = re.compile(r"aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+")


@dataclass(frozen=True)
class OpRow:
    """One op's output of one call: target (the dumped tensor) vs the QDQ graph."""

    module: str  # the module both came from: "layers.11.feed_forward.w1_conv"
    op: str  # "aten.conv2d.default"
    node: str  # the QDQ graph's node
    dumped: str  # the dumped tensor's name (the node of the graph QNN was given)
    sqnr_db: float
    cosine: float


# ops the edge dialect names otherwise than the QDQ graph (to_edge decomposes conv2d)
_EDGE_NAME = {"aten.conv2d.default": "aten.convolution.default"}


def _op(target: object) -> str:
    found = _OP.search(str(target))
    op = found.group(0) if found else str(target)
    return _EDGE_NAME.get(op, op)


def _by_module_and_op(items: Iterable[tuple[str, str, T]]) -> dict[tuple[str, str], list[T]]:
    groups: dict[tuple[str, str], list[T]] = defaultdict(list)
    for module, op, item in items:
        groups[(module, op)].append(item)
    return groups


def _under(module: str, within: str) -> bool:
    return module == within or module.startswith(within + ".")


def compare_ops(graph: torch.fx.GraphModule, program_inputs: Sequence[torch.Tensor],
                dumped: Mapping[str, np.ndarray], nodes: Sequence[Mapping[str, object]],
                within: str) -> list[OpRow]:
    """One call's rows for every op of the QDQ graph in module ``within`` or under it
    (``"layers.11"``: its norms, attention, feed-forward and residual adds) whose output the
    graph quantizes, each paired with the dumped tensor of the op of the same module, op and
    rank among that module's ops of that kind (``nodes``: the graph QNN was given,
    ``stages/compile_dumping.DUMPING_NODES``), the reference put in the axis order QNN holds
    that tensor in. Hazard: an op QNN's passes split or decomposed (mha2sha's per-head
    convolutions) has a count of its kind in its module that differs from the QDQ graph's and
    no row (never a row paired by a guess); no pair at all is a :class:`LayerGapError`."""
    mine = _by_module_and_op(
        (module_of(n), _op(n.target), n) for n in graph.graph.nodes
        if n.op == "call_function" and _under(module_of(n), within)
        and "quantize" not in str(n.target))
    theirs = _by_module_and_op((str(e["module"]), _op(e["op"]), e) for e in nodes
                               if _under(str(e["module"]), within))
    pairs = []
    for key, qs in mine.items():
        if len(theirs.get(key, ())) != len(qs):
            continue
        for node, edge in zip(qs, theirs[key]):
            quantize = _quantize_of(node)
            if quantize is not None and str(edge["name"]) in dumped:
                pairs.append((node, quantize, edge))
    if not pairs:
        raise LayerGapError(f"no op under {within!r} pairs with a dumped tensor "
                            f"({len(mine)} kinds in the QDQ graph, {len(theirs)} dumped)")
    recorder = _Recorder(graph, {q.name for _, q, _ in pairs})
    with torch.no_grad():
        recorder.run(*qdq_inputs(graph, program_inputs))
    rows = []
    for node, quantize, edge in pairs:
        ref = torch.as_tensor(recorder.kept[quantize.name])
        axes = edge.get("axis_order")
        order = [int(a) for a in axes] if isinstance(axes, list) else []
        if order and ref.dim() == len(order):
            ref = ref.permute(order)
        got = np.asarray(dumped[str(edge["name"])], dtype=np.float64).reshape(-1)
        if got.size != ref.numel():
            raise LayerGapError(f"{edge['name']}: {got.size} values dumped, {ref.numel()} in "
                                f"the QDQ graph's {node.name}")
        want = ref.contiguous().to(torch.float64).numpy()
        rows.append(OpRow(module_of(node), _op(node.target), node.name, str(edge["name"]),
                          *_held(want, got, *_encoding(graph, quantize))))
    order_of = {n.name: i for i, n in enumerate(graph.graph.nodes)}
    return sorted(rows, key=lambda r: order_of[r.node])


def steepest_fall(rows: Sequence[Row]) -> tuple[Row, Row]:
    """The row with the largest fall of SQNR from the row before it, with that row: the sublayer
    between them is where the target leaves the graph most."""
    if len(rows) < 2:
        raise LayerGapError("a fall needs two rows")
    return max(zip(rows, rows[1:]), key=lambda pair: pair[0].sqnr_db - pair[1].sqnr_db)
