"""What a flow is, and what every flow hands the parity suite: the same artifact keys.

A flow turns a model case into a hybrid ``.pte`` for a target. Each is one module of this package
with a module-level ``FLOW``, an instance of a :class:`Flow` subclass (:mod:`.registry` finds
them): its name (``legacy``, ``new``, ``genai``), the cache stage its entries live under, the
key inputs that shape what it builds, and one builder signature, ``build(request, out)``, that
writes into a folder and knows nothing of the cache. A flow that starts from the staged flow's
QDQ graphs (``from_qdq``) is handed them in the request.
:meth:`pytest_qnn_genai.pipeline.Pipeline.artifacts` runs any flow through the cache and returns
:class:`FlowArtifacts`: ``text_decoder`` = the hybrid .pte, ``qdq`` = the calibration-shaped QDQ
graph that is the CPU reference, plus the cache manifests' build times.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_qnn_genai.hybrid import QDQ, TEXT_DECODER

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.stages.quantize import QdqArtifacts
    from pytest_qnn_genai.targets import Target


@dataclass(frozen=True)
class BuildRequest:
    """What a flow's builder gets: the case, the target it builds for and, for a flow that
    starts from them, the staged flow's QDQ graphs."""

    case: ModelCase
    target: Target
    qdq: QdqArtifacts | None = None

    def require_qdq(self, flow: str) -> QdqArtifacts:
        """The QDQ graphs (a flow with ``from_qdq`` always gets them)."""
        if self.qdq is None:
            raise ValueError(f"flow {flow!r} builds from the staged QDQ graphs; none were given")
        return self.qdq


@dataclass(frozen=True)
class FlowOutput:
    """What a built folder holds: files by artifact key, and facts for the parity table."""

    files: dict[str, Path]  # hybrid.ARTIFACT_KEYS -> file
    info: dict[str, object] = field(default_factory=dict)


class Flow(ABC):
    """One way to build a case's hybrid program (see the module docstring)."""

    name: ClassVar[str]
    stage: ClassVar[str]  # the cache stage of its entries
    from_qdq: ClassVar[bool] = False  # built from the staged quantize stage's graphs
    in_subprocess: ClassVar[bool] = False  # its build is a subprocess (it overlaps in-process ones)
    code: ClassVar[tuple[str, ...]] = ()  # modules besides its own whose code keys its entries

    @abstractmethod
    def key(self, case: ModelCase, target: Target) -> dict[str, object]:
        """Every input that shapes what it builds for ``case`` and ``target`` (the cache key)."""

    @abstractmethod
    def build(self, request: BuildRequest, out: Path) -> None:
        """Build into the folder ``out``."""

    @abstractmethod
    def load(self, folder: Path, qdq: QdqArtifacts | None) -> FlowOutput:
        """What a built folder holds (``qdq``: the graphs it was built from, if any)."""


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
