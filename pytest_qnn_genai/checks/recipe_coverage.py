"""Whether a quantizer recipe's rules reached the graph they were meant for: rule by rule, weight by
weight.

Contract. :func:`coverage` takes an ExecuTorch ``QuantRecipe`` (a ``StaticLLMQuantRecipe``'s
``.recipe``) and a saved QDQ graph, and gives each rule of the recipe (a node-target rule: its op
targets; a name rule: its module-path patterns) with the number of the graph's nodes it matches,
and every quantized weight counted by the op that consumes it, its scheme (per-tensor,
per-channel, block) and bit width. :meth:`Coverage.checks` fails when a rule matches no node, and
when a weight of a linear or convolution fell to per-tensor while the recipe declares per-channel
or block weights (the default strategy took it), naming the rules and the nodes; the weights'
table is an ``info`` row beside it. A quantizer without rules (upstream's Hugging Face path:
``per_channel_linear`` and a block map) states :class:`Declared` schemes per op instead;
:func:`declared_coverage` makes each a rule matched by the weights it describes, and any weight
of a declared op with another scheme or bit width fails.

Why. A recipe keyed on one graph's ops or module names quantizes another graph by its default:
llama.py's ``StaticLLMQuantRecipe``\\ s key their per-channel and block rules on
``aten.conv2d`` (after llama.py's linear-to-conv rewrite), so on a Hugging Face graph, whose
linears stay ``aten.linear``, every rule matches nothing and every linear weight is quantized
per-tensor, and nothing fails; upstream met the same after a PyTorch bump renamed a pattern
(pytorch/executorch#21237). The quantized graph runs either way: only counting says so.

Hazard. Matching goes through the rules' own ``_matches`` (upstream's ``QuantizationStrategy``
has no public matcher), on the saved QDQ graph: an export that dropped ``nn_module_stack`` from a
node would make a name rule miss it here, and fail, though it matched at quantization time.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks.parity import Check

if TYPE_CHECKING:
    import torch

WEIGHTED_OPS = ("linear", "conv2d")  # ops whose weights a recipe's granularity is about
PER_TENSOR, PER_CHANNEL, BLOCK = "per-tensor", "per-channel", "block"
_SCHEMES = {"dequantize_per_tensor": PER_TENSOR, "dequantize_per_channel": PER_CHANNEL,
            "dequantize_affine": BLOCK}
_GRANULARITY = {"PER_TENSOR": PER_TENSOR, "PER_CHANNEL": PER_CHANNEL, "PER_BLOCK": BLOCK}


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Strategy(Protocol):
    """What this module reads of an upstream ``QuantizationStrategy`` (a ``ByNodeTarget`` also
    has ``targets``, a ``ByNameRegex`` ``patterns``)."""

    @property
    def quant_dtype(self) -> _Named: ...
    @property
    def granularity(self) -> _Named: ...
    def _matches(self, node: torch.fx.Node) -> bool: ...


@dataclass(frozen=True)
class Rule:
    """One rule of a recipe as a reader names it, and how many of the graph's nodes it matches."""

    label: str
    granularity: str
    matched: int
    nodes: tuple[str, ...] = ()  # the first few matched nodes, for the detail


@dataclass(frozen=True)
class Weight:
    """One quantized weight: the op that consumes it, its scheme and bit width, the node."""

    op: str
    scheme: str
    bits: int
    node: str


@dataclass(frozen=True)
class Declared:
    """What a quantizer declares for the weights of one op (no rules to read: upstream's HF
    path sets ``per_channel_linear`` and a block map): their scheme and bit width, and where
    upstream says so."""

    op: str  # "linear", "conv2d"
    scheme: str  # PER_TENSOR, PER_CHANNEL or BLOCK
    bits: int
    source: str


@dataclass(frozen=True)
class Coverage:
    """A recipe's rules on one graph, and the graph's quantized weights."""

    rules: tuple[Rule, ...]
    weights: tuple[Weight, ...]
    declared: tuple[Declared, ...] = ()  # a quantizer's declarations, where it has no rules

    def table(self) -> dict[tuple[str, str, int], int]:
        """Weights counted by (op, scheme, bits)."""
        return dict(sorted(Counter((w.op, w.scheme, w.bits) for w in self.weights).items()))

    def fell_to_default(self) -> list[Weight]:
        """Linear and convolution weights quantized per-tensor where the recipe declares
        per-channel or block weights for some rule (the default strategy took them); with
        declarations, every weight of a declared op whose scheme or bit width is not the
        declared one."""
        if self.declared:
            want = {d.op: (d.scheme, d.bits) for d in self.declared}
            return [w for w in self.weights if w.op in want and (w.scheme, w.bits) != want[w.op]]
        if all(r.granularity == PER_TENSOR for r in self.rules):
            return []
        return [w for w in self.weights if w.op in WEIGHTED_OPS and w.scheme == PER_TENSOR]

    def checks(self, flow: str) -> list[Check]:
        """The rules row (every rule matches a node), the defaults row (no linear or
        convolution weight fell to per-tensor) and the weights' table (``info``)."""
        unmatched = [r for r in self.rules if r.matched == 0]
        fell = self.fell_to_default()
        rules = "\n".join(f"{r.label}: {r.matched} nodes" + (f" ({', '.join(r.nodes)}, ...)"
                                                              if r.nodes else "")
                          for r in self.rules)
        table = ", ".join(f"{op} {scheme} {bits}-bit ×{n}"
                          for (op, scheme, bits), n in self.table().items())
        ops = Counter(w.op for w in fell)
        return [
            Check(f"{flow} recipe rules that match a node", len(self.rules),
                  len(self.rules) - len(unmatched),
                  "; ".join(f"{r.label} matches no node" for r in unmatched) or "all",
                  ok=not unmatched and bool(self.rules), detail=rules,
                  judge="every rule of the recipe matches a node of the graph",
                  name=f"{flow}_recipe_rules_matched", rule=figures.EQUAL),
            Check(f"{flow} linear/conv weights " + ("not as declared" if self.declared
                                                      else "left per-tensor"), 0, len(fell),
                  ", ".join(f"{op} ×{n}" for op, n in sorted(ops.items())) or "none",
                  ok=not fell, detail="\n".join(f"{w.node}: {w.bits}-bit {w.scheme}"
                                                for w in fell[:20]),
                  judge=("none: each as its op's declaration" if self.declared else
                         "none, where the recipe declares per-channel or block weights"),
                  name=f"{flow}_weights_fell_to_default", rule=figures.AT_MOST, bound=0,
                  better=figures.LOWER),
            Check(f"{flow} quantized weights (op, scheme, bits)", "", len(self.weights), table,
                  info=True, name=f"{flow}_quantized_weights"),
        ]


def _label(strategy: Strategy) -> str:
    """``aten.conv2d.default → 16a4w_block per-block``, ``/output\\.conv/ → 16a8w per-channel``."""
    targets = getattr(strategy, "targets", None)
    what = (", ".join(sorted(str(t) for t in targets)) if targets is not None
            else " | ".join(f"/{p}/" for p in sorted(getattr(strategy, "patterns", ()))))
    dtype = str(strategy.quant_dtype.name).removeprefix("use_")
    return f"{what} → {dtype} {_GRANULARITY.get(strategy.granularity.name, strategy.granularity.name)}"


def _bits(node: torch.fx.Node, scheme: str) -> int:
    """The bit width of a dequantize node's range (``quant_min``/``quant_max``)."""
    args = list(node.args)
    lo, hi = ((args[3], args[4]) if scheme == PER_TENSOR else (args[4], args[5])
              if scheme == PER_CHANNEL else
              (node.kwargs.get("quant_min", args[5] if len(args) > 5 else None),
               node.kwargs.get("quant_max", args[6] if len(args) > 6 else None)))
    if not isinstance(lo, int) or not isinstance(hi, int):
        return 0  # a range the node does not state: counted as 0 bits, never matched
    return math.ceil(math.log2(hi - lo + 1))


def _op_name(node: torch.fx.Node | None) -> str:
    """``linear`` for ``aten.linear.default``; the target's text for any other node."""
    target = str(getattr(node, "target", "?"))
    return target.split(".")[1] if "." in target else target


def weights(ep: torch.export.ExportedProgram) -> list[Weight]:
    """Every weight dequantized from a constant, by its consumer's op, scheme and bits (a
    linear's or convolution's bias is not a weight)."""
    import torch

    sig = ep.graph_signature
    consts = {*sig.inputs_to_parameters, *sig.inputs_to_buffers,
              *getattr(sig, "inputs_to_lifted_tensor_constants", {})}
    out = []
    for node in ep.graph.nodes:
        scheme = _SCHEMES.get(_op_name(node)) if node.op == "call_function" else None
        src = node.args[0] if node.args else None
        if (scheme is None or not isinstance(src, torch.fx.Node) or src.op != "placeholder"
                or src.name not in consts):
            continue
        user = next(iter(node.users), None)
        op = _op_name(user)
        if op in WEIGHTED_OPS and user is not None and len(user.args) > 2 and user.args[2] is node:
            continue  # a linear's or convolution's bias (int32 by the weight's scales): not a weight
        out.append(Weight(op, scheme, _bits(node, scheme), node.name))
    return out


def coverage(recipe: object, ep: torch.export.ExportedProgram, keep: int = 3) -> Coverage:
    """``recipe``'s rules (``QuantRecipe._strategies``, its default strategy left out: it
    matches what the others do not) on ``ep``'s compute nodes, and ``ep``'s weights."""
    nodes = [n for n in ep.graph.nodes if n.op == "call_function"
             and "quantized_decomposed" not in str(n.target)
             and "torchao" not in str(n.target)]
    rules = []
    for strategy in _strategies(recipe):
        hit = [n.name for n in nodes if strategy._matches(n)]
        rules.append(Rule(_label(strategy),
                          _GRANULARITY.get(strategy.granularity.name, strategy.granularity.name),
                          len(hit), tuple(hit[:keep])))
    return Coverage(tuple(rules), tuple(weights(ep)))


def _strategies(recipe: object) -> Sequence[Strategy]:
    strategies: Iterable[Strategy] = getattr(recipe, "_strategies", ())
    return list(strategies)


def declared_coverage(declared: Sequence[Declared], ep: torch.export.ExportedProgram,
                      keep: int = 3) -> Coverage:
    """``ep``'s weights against a quantizer's declarations: each declaration a rule whose
    matches are the weights of its op with its scheme and bit width (a declaration that reaches
    no weight matches nothing, and fails like a recipe's rule)."""
    found = weights(ep)
    rules = []
    for d in declared:
        hit = [w.node for w in found if (w.op, w.scheme, w.bits) == (d.op, d.scheme, d.bits)]
        rules.append(Rule(f"{d.op} weights → {d.bits}-bit {d.scheme} ({d.source})", d.scheme,
                          len(hit), tuple(hit[:keep])))
    return Coverage(tuple(rules), tuple(found), tuple(declared))
