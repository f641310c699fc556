"""A QNN program runs on QnnBackend alone: each of its methods is one QnnBackend delegate call and
leaves no operator to ExecuTorch's CPU kernels.

Hazard: an operator the partitioner cannot lower stays on CPU and the program still runs, its
outputs right and its speed a CPU kernel's, so no accuracy check downstream notices; only the
program's own plan says so (:func:`pytest_qnn_genai.runtime.pte_info.inspect_pte`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_qnn_genai.runtime.pte_info import PteInfo

QNN = "QnnBackend"


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
