"""The registered flows: every module of :mod:`pytest_qnn_genai.flows` with a module-level
``FLOW`` (a :class:`~pytest_qnn_genai.flows.base.Flow`). Adding a flow is adding such a module.

Modules are imported on first use, not at plugin start: builders import executorch lazily, but a
flow module may import torch.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from pytest_qnn_genai import flows as package
from pytest_qnn_genai.flows.base import Flow


class UnknownFlowError(KeyError):
    """A flow name no module registers (one line, listing the flows)."""

    def __str__(self) -> str:
        return str(self.args[0])


@cache
def flows() -> dict[str, Flow]:
    """Every registered flow by name, in module order."""
    found: dict[str, Flow] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        flow = getattr(module, "FLOW", None)
        if isinstance(flow, Flow):
            if flow.name in found:
                raise ValueError(f"two flow modules register the name {flow.name!r}")
            found[flow.name] = flow
    return found


def get(name: str) -> Flow:
    """The flow called ``name``; UnknownFlowError (one line) otherwise."""
    known = flows()
    if name not in known:
        raise UnknownFlowError(f"unknown flow {name!r}; flows: {', '.join(known)}")
    return known[name]
