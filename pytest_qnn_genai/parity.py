"""Legacy-vs-new parity as plain functions: program signatures, QDQ encodings, outputs, the table.

Every comparison returns :class:`Check` rows (check, legacy, new, delta, verdict, detail) that a
test asserts on and the session's :class:`ParityTable` prints. Nothing here depends on pytest, so
the comparisons can be called directly on any two flows' artifacts (e.g. a perturbed variant).
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from pytest_qnn_genai import numerics

SCALE_RTOL = 1e-3  # constant-method scales (logits, KV outputs) of the two flows
MAX_ENCODING_STEPS = 1.0  # each quantised tensor's range endpoints within one quantisation step
PTE_SIZE_RTOL = 0.05
MIN_ROW_COSINE = 0.995
MIN_SQNR_DB = 30.0
GRAPH_METHODS = ("kv_forward", "prefill_forward")


@dataclass(frozen=True)
class Check:
    """One parity check: both sides' values, their difference, and whether it passes."""

    check: str
    legacy: Any
    new: Any
    delta: Any = ""
    ok: bool = True
    detail: str = ""

    @property
    def verdict(self) -> str:
        return "ok" if self.ok else "FAIL"

    def row(self) -> dict[str, str]:
        return {"check": self.check, "legacy": _fmt(self.legacy), "new": _fmt(self.new),
                "delta": _fmt(self.delta), "verdict": self.verdict}


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)) and len(v) > 6:
        return f"[{len(v)} items]"
    return str(v)


def failures(checks: Iterable[Check]) -> str:
    """A readable message for the failing checks (empty when all pass)."""
    bad = [c for c in checks if not c.ok]
    lines = []
    for c in bad:
        lines.append(f"{c.check}: legacy={_fmt(c.legacy)} new={_fmt(c.new)} delta={_fmt(c.delta)}")
        lines += [f"    {line}" for line in c.detail.splitlines()]
    return "\n".join(lines)


class ParityTable:
    """Rows collected during a session, printed in the terminal summary (shippable as dicts)."""

    COLUMNS = ("check", "legacy", "new", "delta", "verdict")

    def __init__(self) -> None:
        self.rows: list[dict[str, str]] = []

    def add(self, checks: Iterable[Check], prefix: str = "") -> None:
        for c in checks:
            row = c.row()
            row["check"] = f"{prefix}{row['check']}"
            if row not in self.rows:
                self.rows.append(row)

    def merge(self, rows: Iterable[dict[str, str]]) -> None:
        for row in rows:
            if row not in self.rows:
                self.rows.append(dict(row))

    def to_dicts(self) -> list[dict[str, str]]:
        return [dict(r) for r in self.rows]

    def format(self, max_width: int = 48, check_width: int = 80) -> list[str]:
        cells = [[r[c][:check_width if c == "check" else max_width] for c in self.COLUMNS]
                 for r in self.rows]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.COLUMNS)]
        line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
        return [line(self.COLUMNS), line(["-" * w for w in widths])] + [line(r) for r in cells]


# -- program signatures -------------------------------------------------------------------------
@dataclass(frozen=True)
class Signature:
    """Methods, IO (dtype, shape) of the graph methods, and constant-method values of a .pte."""

    methods: tuple[str, ...]
    io: dict[str, dict[str, list[tuple[str, tuple[int, ...]]]]]
    constants: dict[str, Any]
    size_bytes: int


def program_signature(pte: Path | str) -> Signature:
    """Read a .pte's signature through the host runner's process-wide program cache, the same
    load :class:`~pytest_qnn_genai.runtime.host_runner.HybridRunner` uses (a QNN .pte must not be
    loaded through two code paths in one process). Graph methods are not loaded here."""
    from pytest_qnn_genai.runtime import programs
    from pytest_qnn_genai.runtime.pte_info import constant_values, dtype_name

    pte = Path(pte)
    program = programs.load(pte)[0].program
    io: dict[str, dict[str, list[tuple[str, tuple[int, ...]]]]] = {}
    for name in sorted(program.method_names):
        meta = program.metadata(name)
        if meta.num_inputs() == 0:
            continue
        io[name] = {
            "inputs": [(dtype_name(meta.input_tensor_meta(i).dtype()),
                        tuple(int(s) for s in meta.input_tensor_meta(i).sizes()))
                       for i in range(meta.num_inputs())],
            "outputs": [(dtype_name(meta.output_tensor_meta(i).dtype()),
                         tuple(int(s) for s in meta.output_tensor_meta(i).sizes()))
                        for i in range(meta.num_outputs())]}
    return Signature(tuple(sorted(program.method_names)), io, constant_values(program),
                     pte.stat().st_size)


def _close(a: Any, b: Any, rtol: float) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=0.0)
    return a == b  # integers, bools, strings: exact


def compare_signatures(legacy: Signature, new: Signature,
                       scale_rtol: float = SCALE_RTOL) -> list[Check]:
    """Method names, graph-method IO (count, shapes, dtypes) and constant values."""
    checks = [Check("method names", f"{len(legacy.methods)} methods", f"{len(new.methods)} methods",
                    ok=legacy.methods == new.methods,
                    detail=f"only legacy: {sorted(set(legacy.methods) - set(new.methods))}\n"
                           f"only new: {sorted(set(new.methods) - set(legacy.methods))}")]
    for m in GRAPH_METHODS:
        a, b = legacy.io.get(m), new.io.get(m)
        if a is None or b is None:
            checks.append(Check(f"{m} IO", a is not None, b is not None, ok=False,
                                detail=f"{m} missing"))
            continue
        for side in ("inputs", "outputs"):
            diffs = [f"{side}[{i}]: legacy {x} new {y}"
                     for i, (x, y) in enumerate(zip(a[side], b[side])) if x != y]
            n_a, n_b = len(a[side]), len(b[side])
            checks.append(Check(f"{m} {side} (count/shape/dtype)", n_a, n_b,
                                delta=f"{len(diffs)} differ", ok=n_a == n_b and not diffs,
                                detail="\n".join(diffs[:10])))
    bad, n = [], 0
    for name in sorted(set(legacy.constants) | set(new.constants)):
        a, b = legacy.constants.get(name), new.constants.get(name)
        n += 1
        if not _close(a, b, scale_rtol):
            bad.append(f"{name}: legacy {a} new {b}")
    checks.append(Check("constant methods (ints exact, scales rtol "
                        f"{scale_rtol:g})", f"{len(legacy.constants)}", f"{len(new.constants)}",
                        delta=f"{len(bad)} differ", ok=not bad, detail="\n".join(bad)))
    for name in ("get_logits_scale", "get_logits_zero_point"):
        a, b = legacy.constants.get(name), new.constants.get(name)
        if a is not None and b is not None:
            checks.append(Check(name, a, b, delta=(b - a) / a if a else b - a,
                                ok=_close(a, b, scale_rtol)))
    return checks


def compare_pte_size(legacy_bytes: int, new_bytes: int, rtol: float = PTE_SIZE_RTOL) -> Check:
    delta = (new_bytes - legacy_bytes) / legacy_bytes
    return Check(f".pte size (within {rtol:.0%})", legacy_bytes, new_bytes, f"{delta:+.2%}",
                 ok=abs(delta) <= rtol)


# -- QDQ encodings ------------------------------------------------------------------------------
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


def _module_path(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "model"
    return list(stack.values())[-1][0].replace(".forward.__self__", "")


def _op(node: Any) -> str:
    return str(node.target).removeprefix("aten.")


def _layer(path: str) -> str:
    m = _LAYER.search(path)
    return f"layers.{m.group(1)}" if m else path.split("/")[0].split(".")[0] or "model"


def qdq_encodings(ep: Any) -> dict[str, Encoding]:
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
    counts: Counter = Counter()
    out: dict[str, Encoding] = {}

    def value(a: Any) -> np.ndarray:
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
            scale, zp, qmin, qmax, dtype = node.args[1], node.args[2], *node.args[4:7]
        else:
            scale, zp, qmin, qmax, dtype = node.args[1:6]
        out[key] = Encoding(key, _layer(key.removeprefix("w:")),
                            tuple(float(x) for x in value(scale)),
                            tuple(int(x) for x in value(zp)), int(qmin), int(qmax),
                            str(dtype).removeprefix("torch."))
    return out


def load_qdq(path: Path | str) -> Any:
    """A saved QDQ ``.pt2`` (registers the ``quantized_decomposed`` ops first)."""
    import executorch.backends.qualcomm.quantizer.quantizer  # noqa: F401
    import torch

    return torch.export.load(str(path))


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

    @property
    def over(self) -> dict[str, float]:
        return {k: s for k, s in self.steps.items() if s > self.max_steps + 1e-6}

    @property
    def ok(self) -> bool:
        return not self.over and not self.only_legacy and not self.only_new

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
                         sum(1 for x, _ in items if x > self.max_steps + 1e-6)))
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

    def checks(self) -> list[Check]:
        worst = max(self.steps.values(), default=0.0)
        return [Check("QDQ tensors matched", self.n_legacy, self.n_new,
                      f"{len(self.only_legacy)}/{len(self.only_new)} unmatched",
                      ok=not self.only_legacy and not self.only_new, detail=self.table()),
                Check(f"QDQ encodings within {self.max_steps:g} step", "", f"worst {worst:.3f}",
                      f"{len(self.over)} over", ok=not self.over, detail=self.table())]


def compare_encodings(legacy: dict[str, Encoding], new: dict[str, Encoding],
                      max_steps: float = MAX_ENCODING_STEPS) -> EncodingReport:
    common = [k for k in legacy if k in new]
    return EncodingReport(len(legacy), len(new),
                          {k: encoding_steps(legacy[k], new[k]) for k in common},
                          sorted(set(legacy) - set(new)), sorted(set(new) - set(legacy)),
                          max_steps, {k: (legacy[k], new[k]) for k in common})


# -- emulator outputs ---------------------------------------------------------------------------
def compare_runs(legacy: Any, new: Any, min_cosine: float = MIN_ROW_COSINE,
                 min_sqnr_db: float = MIN_SQNR_DB, require_same_tokens: bool = True) -> list[Check]:
    """Two ``RunResult``s of the same prompt: dequantized logits per step up to (and including)
    the first divergent token, and the greedy tokens."""
    a, b = list(legacy.tokens), list(new.tokens)
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    n = min(same + 1, len(a), len(b))
    la, lb = np.asarray(legacy.logits)[:n], np.asarray(new.logits)[:n]
    cos = numerics.rowwise_cosine(la, lb)
    sqnr = numerics.sqnr_db(la, lb)
    checks = [Check(f"logits per-step cosine (min, {n} steps)", "ref", float(cos.min()),
                    f"floor {min_cosine}", ok=float(cos.min()) >= min_cosine,
                    detail=f"per step: {np.round(cos, 4).tolist()}"),
              Check("logits SQNR dB", "ref", sqnr, f"floor {min_sqnr_db}", ok=sqnr >= min_sqnr_db)]
    tok = Check("greedy tokens", f"{len(a)} tokens", f"{len(b)} tokens",
                "identical" if a == b else f"first differs at step {same}",
                ok=a == b or not require_same_tokens,
                detail="" if a == b else f"legacy {a[same:same + 8]}\nnew    {b[same:same + 8]}")
    return checks + [tok]


def as_dicts(checks: Sequence[Check]) -> list[dict[str, Any]]:
    return [asdict(c) for c in checks]
