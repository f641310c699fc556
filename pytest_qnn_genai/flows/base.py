"""What every flow hands the parity suite: the same artifact keys, whatever built them.

A flow turns a model case into a hybrid ``.pte`` for a target. Each flow module has a builder
that writes into a folder and knows nothing of the cache (``legacy.build_legacy``, the staged
``stages`` functions, ``genai.build_genai``); :meth:`pytest_qnn_genai.pipeline.Pipeline.artifacts`
runs them through the cache and returns :class:`FlowArtifacts`: ``text_decoder`` = the hybrid
.pte, ``qdq`` = the calibration-shaped QDQ graph that is the CPU reference, plus the cache
manifests' build times.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_qnn_genai.hybrid import QDQ, TEXT_DECODER

FLOW_NAMES = ("legacy", "new", "genai")


@dataclass(frozen=True)
class FlowArtifacts:
    """What one flow built for one model case and target."""

    flow: str
    files: dict[str, Path]  # hybrid.ARTIFACT_KEYS -> file
    build_s: dict[str, float] = field(default_factory=dict)  # cache stage -> manifest build_s
    info: dict[str, object] = field(default_factory=dict)

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
