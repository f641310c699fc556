"""A hybrid program as the case says it must be built, read back out of its ``.pte``
(:func:`pytest_qnn_genai.runtime.pte_info.inspect_pte`): each method one QnnBackend call with no
operator left on CPU, its constant methods the case's and the QDQ graph's values, its graphs'
inputs and outputs the case's shapes and dtypes.

Hazard: every one of these can be wrong while the program still runs. An operator the
partitioner cannot lower stays on CPU, its outputs right and its speed a CPU kernel's; a constant
the runner reads (``get_max_seq_len``, the logits scale) or a KV cache IO of another width or
``head_dim`` makes upstream's runner size its buffers for another program. No accuracy check
downstream says so; only the program's own plan does.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_qnn_genai.hybrid import DECODE, PREFILL

if TYPE_CHECKING:
    from pytest_qnn_genai.runtime.pte_info import PteInfo
    from pytest_qnn_genai.untyped import Json

QNN = "QnnBackend"
REL_TOL = 1e-6  # a float constant's tolerance: pytest.approx's default


def qnn_only(info: PteInfo, methods: Sequence[str]) -> list[str]:
    """What keeps ``methods`` of ``info`` from being QnnBackend-only, one line each (empty when
    nothing does): a method the program lacks, another delegate or more than one, an operator
    left on CPU."""
    problems = []
    for name in methods:
        method = info.methods.get(name)
        if method is None:
            problems.append(f"{name}: no such method (the program has {', '.join(info.methods)})")
            continue
        if method.delegates != (QNN,):
            problems.append(f"{name}: delegates {list(method.delegates)}, want one {QNN} call")
        if method.cpu_operators:
            problems.append(f"{name} left ops on CPU: {', '.join(method.cpu_operators)}")
    return problems


def constant_problems(constants: Mapping[str, Json], exact: Mapping[str, Json],
                      close: Mapping[str, float]) -> list[str]:
    """The program's constant methods against ``exact`` (equal) and ``close`` (floats within
    :data:`REL_TOL`), one line per constant that is missing or differs."""
    problems = []
    for name, want in [*exact.items(), *close.items()]:
        if name not in constants:
            problems.append(f"{name}: the program has no such constant method")
            continue
        got = constants[name]
        same = (got == want if name in exact else isinstance(got, (int, float))
                and math.isclose(got, want, rel_tol=REL_TOL, abs_tol=1e-12))
        if not same:
            problems.append(f"{name}: the program says {got!r}, want {want!r}")
    return problems


@dataclass(frozen=True)
class HybridShape:
    """The IO the case gives a hybrid program's two graphs: ``prefill_forward`` takes
    ``prefill_ar`` tokens a call, ``kv_forward`` one; each keeps ``context - tokens`` positions of
    KV cache per layer (keys ``[1, kv_heads, head_dim, past]``, values ``[1, kv_heads, past,
    head_dim]``) in ``kv_dtype``, and returns uint16 logits over ``vocab`` and the new KV rows."""

    prefill_ar: int
    context: int
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    kv_dtype: str


def _first_difference(what: str, got: list[tuple[str, tuple[int, ...]]],
                      want: list[tuple[str, tuple[int, ...]]]) -> str | None:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"{what} {i}: (dtype, shape) {g}, want {w}"
    if len(got) != len(want):
        return f"{what}: {len(got)}, want {len(want)}"
    return None


def io_problems(info: PteInfo, shape: HybridShape) -> list[str]:
    """Each graph's inputs (tokens, attention mask, positions, the KV cache) and its logits
    output against ``shape``, one line per graph at its first difference."""
    problems = []
    for name, n in ((PREFILL, shape.prefill_ar), (DECODE, 1)):
        method = info.methods.get(name)
        if method is None:
            problems.append(f"{name}: no such method")
            continue
        past = shape.context - n
        want_in = ([("int32", (1, n)), ("uint16", (1, 1, n, shape.context)), ("int32", (1, n))]
                   + [(shape.kv_dtype, (1, shape.kv_heads, shape.head_dim, past))] * shape.layers
                   + [(shape.kv_dtype, (1, shape.kv_heads, past, shape.head_dim))] * shape.layers)
        outs = [(t.dtype, t.shape) for t in method.outputs]
        for problem in (_first_difference(f"{name} input", [(t.dtype, t.shape)
                                                            for t in method.inputs], want_in),
                        _first_difference(f"{name} output", outs[:1],
                                          [("uint16", (1, n, shape.vocab))]),
                        None if len(outs) == 1 + 2 * shape.layers else
                        f"{name} outputs: {len(outs)}, want {1 + 2 * shape.layers}"):
            if problem is not None:
                problems.append(problem)
    return problems
