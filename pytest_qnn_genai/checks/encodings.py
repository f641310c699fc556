"""QDQ encodings of two flows' graphs, matched by what they quantise.

Node names differ between flows, so a tensor is matched by its meaning: an activation by its
producer's module path and aten op (k-th occurrence in that module), a weight by its consumer.
:func:`compare_encodings` then requires the same bit width and range endpoints within
``max_steps`` quantisation steps, and fails (never passes vacuously) when no tensor matched.

Loading a ``.pt2`` graph costs seconds (``torch.export.load``); what the check needs of it is a
small table (:class:`GraphEncodings`: the user inputs' shapes and every encoding), which
:func:`graph_encodings` derives once and :meth:`GraphEncodings.save`/:meth:`GraphEncodings.load`
keep as JSON, so the pipeline caches it next to the graph it came from.

The graphs compared are the calibration-shaped ones and, for a flow that keeps them, the graphs it
deploys (``kv_forward``, ``prefill_forward``), which carry the calibration graph's encodings by
override: an override that moves one tensor changes the program while the calibration graphs still
agree, so the deployed graphs are compared too. Two builds of one recipe calibrate the same graph
on the same samples, so their encodings are identical, not close: ``max_steps`` is 0 unless a case
opts the pair into a tolerance, with its reason
(:class:`pytest_qnn_genai.models.spec.ParityTolerance`). Hazard: on a 4-bit weight one step is a
~15 % scale change, so a tolerance of one step lets a real gap (a skipped SeqMSE search measured
1.09 steps) pass when it is a little milder.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks.parity import Check
from pytest_qnn_genai.untyped import Upstream

if TYPE_CHECKING:
    import torch

MAX_ENCODING_STEPS = 0.0  # two builds of one recipe: every encoding identical


@dataclass(frozen=True)
class Encoding:
    """One quantised tensor's encoding (per-channel arrays have one entry per channel)."""

    key: str
    layer: str
    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    qmin: int
    qmax: int
    dtype: str

    def range(self) -> tuple[np.ndarray, np.ndarray]:
        s, z = np.asarray(self.scale, np.float64), np.asarray(self.zero_point, np.float64)
        return (self.qmin - z) * s, (self.qmax - z) * s


_LAYER = re.compile(r"layers\.(\d+)")


def _module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "model"
    return str(list(stack.values())[-1][0]).replace(".forward.__self__", "")


def _op(node: torch.fx.Node) -> str:
    return str(node.target).removeprefix("aten.")


def _layer(path: str) -> str:
    m = _LAYER.search(path)
    return f"layers.{m.group(1)}" if m else path.split("/")[0].split(".")[0] or "model"


def qdq_encodings(ep: torch.export.ExportedProgram) -> dict[str, Encoding]:
    """Encodings of a saved QDQ ``ExportedProgram``, keyed by what they quantise.

    Activations: each ``quantize_per_tensor`` by its input node — a graph input by position, else
    ``<module path>/<aten op>#<k>`` (k = occurrence of that op in that module, graph order).
    Weights: each ``dequantize_*`` of a constant by its consumer, ``w:<module path>/<op>#<k>.<arg>``.
    Node names are not used: they depend on how each flow traced the model.
    """
    sig = ep.graph_signature
    consts = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
              **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
    values = {**ep.state_dict, **getattr(ep, "constants", {})}
    user_inputs = list(sig.user_inputs)
    counts: Counter[str] = Counter()
    out: dict[str, Encoding] = {}

    def value(a: Upstream) -> np.ndarray:  # a graph node or a literal
        if hasattr(a, "op") and a.op == "placeholder":
            return np.asarray(values[consts[a.name]].detach().cpu().numpy()).ravel()
        return np.asarray([a]).ravel()

    for node in ep.graph.nodes:
        if node.op != "call_function" or "quantized_decomposed" not in str(node.target):
            continue
        kind = str(node.target).split(".")[1]
        src = node.args[0]
        if kind.startswith("quantize"):
            if src.op == "placeholder":
                key = f"input/{user_inputs.index(src.name) if src.name in user_inputs else src.name}"
            else:
                base = f"{_module_path(src)}/{_op(src)}"
                key = f"{base}#{counts[base]}"
                counts[base] += 1
        elif src.op == "placeholder" and src.name in consts:  # a weight's dequantize
            user = next(iter(node.users))
            base = f"w:{_module_path(user)}/{_op(user)}"
            key = f"{base}#{counts[base]}.{list(user.args).index(node)}"
            counts[base] += 1
        else:
            continue
        if kind.endswith("per_channel"):
            scale, zp = node.args[1], node.args[2]
            qmin, qmax, dtype = node.args[4:7]
        else:
            scale, zp, qmin, qmax, dtype = node.args[1:6]
        out[key] = Encoding(key, _layer(key.removeprefix("w:")),
                            tuple(float(x) for x in value(scale)),
                            tuple(int(x) for x in value(zp)), int(qmin), int(qmax),
                            str(dtype).removeprefix("torch."))
    return out


def load_qdq(path: Path | str) -> torch.export.ExportedProgram:
    """A saved QDQ ``.pt2`` (registers the ``quantized_decomposed`` ops first)."""
    import executorch.backends.qualcomm.quantizer.quantizer  # noqa: F401
    import torch

    return torch.export.load(str(path))


ENCODINGS_FILE = "encodings.json"


@dataclass(frozen=True)
class GraphEncodings:
    """What the encodings check needs of one QDQ graph: its user inputs' shapes (the graph's
    calling shape) and its encodings keyed by what they quantise."""

    input_shapes: tuple[tuple[int, ...], ...]
    encodings: dict[str, Encoding]

    def save(self, folder: Path) -> Path:
        path = folder / ENCODINGS_FILE
        path.write_text(json.dumps({"input_shapes": self.input_shapes,
                                    "encodings": [asdict(e) for e in self.encodings.values()]}))
        return path

    @classmethod
    def load(cls, path: Path) -> GraphEncodings:
        data = json.loads(Path(path).read_text())
        encodings = {}
        for e in data["encodings"]:
            encodings[e["key"]] = Encoding(e["key"], e["layer"], tuple(e["scale"]),
                                           tuple(e["zero_point"]), e["qmin"], e["qmax"],
                                           e["dtype"])
        return cls(tuple(tuple(s) for s in data["input_shapes"]), encodings)


def input_shapes(ep: torch.export.ExportedProgram) -> tuple[tuple[int, ...], ...]:
    """Shapes of a saved ``ExportedProgram``'s user inputs, in order."""
    user_inputs = set(ep.graph_signature.user_inputs)
    return tuple(tuple(int(d) for d in p.meta["val"].shape) for p in ep.graph.nodes
                 if p.op == "placeholder" and p.name in user_inputs)


def graph_encodings(path: Path | str) -> GraphEncodings:
    """Load a QDQ ``.pt2`` and derive what the encodings check needs of it."""
    ep = load_qdq(path)
    return GraphEncodings(input_shapes(ep), qdq_encodings(ep))


def over_bound(steps: float, max_steps: float) -> bool:
    """Whether ``steps`` exceeds ``max_steps``: any difference at all when the bound is 0 (a
    one-ulp scale change counts), else beyond the bound's own float rounding."""
    return steps > max_steps * (1 + 1e-9)


def encoding_steps(a: Encoding, b: Encoding) -> float:
    """How far apart two encodings' ranges are, in quantisation steps (inf: not comparable)."""
    if (a.qmin, a.qmax, a.dtype) != (b.qmin, b.qmax, b.dtype) or len(a.scale) != len(b.scale):
        return math.inf
    (lo_a, hi_a), (lo_b, hi_b) = a.range(), b.range()
    step = np.maximum(np.asarray(a.scale), np.asarray(b.scale))
    return float(np.max(np.maximum(np.abs(lo_a - lo_b), np.abs(hi_a - hi_b)) / step))


@dataclass
class EncodingReport:
    """QDQ encodings of two flows' calibration graphs, matched and compared."""

    n_legacy: int
    n_new: int
    steps: dict[str, float]
    only_legacy: list[str]
    only_new: list[str]
    max_steps: float
    pairs: dict[str, tuple[Encoding, Encoding]] = field(default_factory=dict)
    reason: str = ""  # why the case allows max_steps > 0 (empty: exact)

    @property
    def over(self) -> dict[str, float]:
        """The tensors beyond the bound, in graph order (legacy's)."""
        return {k: s for k, s in self.steps.items() if over_bound(s, self.max_steps)}

    @property
    def matched(self) -> int:
        """Tensors found in both graphs; zero means nothing was compared."""
        return len(self.steps)

    @property
    def ok(self) -> bool:
        return (self.matched > 0 and not self.over and not self.only_legacy
                and not self.only_new)

    def worst_per_layer(self) -> list[tuple[str, str, float, int, int]]:
        """(layer, worst tensor, its steps, tensors in layer, tensors over the bound), by layer."""
        by_layer: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for k, s in self.steps.items():
            by_layer[self.pairs[k][0].layer].append((s, k))
        rows = []
        for layer in sorted(by_layer):
            items = by_layer[layer]
            s, k = max(items)
            rows.append((layer, k, s, len(items),
                         sum(1 for x, _ in items if over_bound(x, self.max_steps))))
        return rows

    def table(self) -> str:
        lines = [f"{'layer':10} {'worst tensor':52} {'steps':>8} {'n':>4} {'over':>4}  "
                 "scale legacy/new  zp legacy/new"]
        for layer, key, s, n, over in self.worst_per_layer():
            a, b = self.pairs[key]
            i = 0 if len(a.scale) == 1 else int(np.argmax(np.abs(np.subtract(a.scale, b.scale))))
            lines.append(f"{layer:10} {key[-52:]:52} {s:8.3f} {n:4d} {over:4d}  "
                         f"{a.scale[i]:.4g}/{b.scale[i]:.4g}  {a.zero_point[i]}/{b.zero_point[i]}")
        for k in self.only_legacy[:10]:
            lines.append(f"only in legacy: {k}")
        for k in self.only_new[:10]:
            lines.append(f"only in new: {k}")
        return "\n".join(lines)

    def describe(self, key: str) -> str:
        """One tensor's difference: its steps and both encodings at the channel that differs most."""
        a, b = self.pairs[key]
        i = 0 if len(a.scale) == 1 else int(np.argmax(np.abs(np.subtract(a.scale, b.scale))))
        where = f" channel {i} of {len(a.scale)}" if len(a.scale) > 1 else ""
        kind = "" if (a.qmin, a.qmax, a.dtype) == (b.qmin, b.qmax, b.dtype) else (
            f", legacy {a.dtype}[{a.qmin}, {a.qmax}] new {b.dtype}[{b.qmin}, {b.qmax}]")
        return (f"{key}: {self.steps[key]:.6g} steps{where} (scale legacy {a.scale[i]!r} new "
                f"{b.scale[i]!r}, zero point legacy {a.zero_point[i]} new {b.zero_point[i]}"
                f"{kind})")

    @property
    def judge(self) -> str:
        if self.max_steps == 0:
            return "identical to legacy's (0 steps)"
        return f"≤ {self.max_steps:g} steps of legacy's (case tolerance: {self.reason})"

    def checks(self, graph: str = "") -> list[Check]:
        """The matching row and the encodings row; ``graph`` names the new side's graph when it
        is not the calibration graph (a deployed one: ``kv_forward``), in labels and names."""
        worst = max(self.steps.values(), default=0.0)
        over = self.over
        said, named = (f"{graph} ", f"{graph}_") if graph else ("", "")
        label = said + ("QDQ encodings identical (worst steps)" if self.max_steps == 0 else
                        f"QDQ encodings within {self.max_steps:g} steps (worst)")
        detail = self.table()
        if over:
            first, top = next(iter(over)), max(over, key=over.__getitem__)
            detail = (f"{len(over)} of {self.matched} tensors differ; first (graph order) "
                      f"{self.describe(first)}\nworst {self.describe(top)}\n{detail}")
        return [Check(f"{said}QDQ tensors matched", self.n_legacy, self.n_new,
                      f"{len(self.only_legacy)}/{len(self.only_new)} unmatched",
                      ok=self.matched > 0 and not self.only_legacy and not self.only_new,
                      detail=self.table(), judge="every tensor in both graphs",
                      name=f"{named}qdq_tensors_matched"),
                Check(label, 0.0, round(worst, 6), f"{len(over)} of {self.matched} differ",
                      ok=self.matched > 0 and not over, detail=detail, judge=self.judge,
                      name=f"{named}encoding_worst_steps", bound=self.max_steps, rule=figures.AT_MOST,
                      better=figures.LOWER, tolerance=self.reason if self.max_steps else "")]


def compare_encodings(legacy: dict[str, Encoding], new: dict[str, Encoding],
                      max_steps: float = MAX_ENCODING_STEPS, reason: str = "") -> EncodingReport:
    """Every tensor of ``legacy`` (graph order) against ``new``'s: identical unless ``max_steps``
    (a case's tolerance, ``reason`` why) allows more; a bound > 0 without a reason is refused."""
    if max_steps < 0 or (max_steps > 0 and not reason.strip()):
        raise ValueError(f"an encoding tolerance of {max_steps:g} steps needs a reason")
    common = [k for k in legacy if k in new]
    return EncodingReport(len(legacy), len(new),
                          {k: encoding_steps(legacy[k], new[k]) for k in common},
                          sorted(set(legacy) - set(new)), sorted(set(new) - set(legacy)),
                          max_steps, {k: (legacy[k], new[k]) for k in common}, reason)

