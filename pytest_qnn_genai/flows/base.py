"""One interface over the three ways of turning a model case into a hybrid ``.pte``.

Each flow's ``build(pipeline, case, target)`` returns :class:`FlowArtifacts`: the same artifact
keys whatever the flow (``text_decoder`` = the hybrid .pte, ``qdq`` = the calibration-shaped QDQ
graph that is the CPU reference), plus the cache manifests' build time. The parity suite compares
two flows' artifacts; nothing here depends on pytest.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

TEXT_DECODER = "text_decoder"  # the hybrid prefill_forward + kv_forward program
QDQ = "qdq"  # the calibration-shaped QDQ graph (AR = max_context_len, empty KV cache)
ARTIFACT_KEYS = (TEXT_DECODER, QDQ)


@dataclass(frozen=True)
class FlowArtifacts:
    """What one flow built for one model case and target."""

    flow: str
    files: dict[str, Path]  # ARTIFACT_KEYS -> file
    build_s: dict[str, float] = field(default_factory=dict)  # cache stage -> manifest build_s
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def pte(self) -> Path:
        return self.files[TEXT_DECODER]

    @property
    def qdq_graph(self) -> Path:
        return self.files[QDQ]

    @property
    def total_build_s(self) -> float:
        return round(sum(self.build_s.values()), 1)

    @property
    def pte_bytes(self) -> int:
        return self.pte.stat().st_size


class Flow(Protocol):
    """A build flow: a name and a ``build`` producing :class:`FlowArtifacts`."""

    name: str

    def build(self, pipeline: Any, case: Any, target: Any) -> FlowArtifacts: ...


def build_seconds(entry: Any) -> float:
    """``build_s`` of a cache entry's manifest (what building it took, even on a cache hit)."""
    return float(entry.manifest.get("build_s", 0.0))
