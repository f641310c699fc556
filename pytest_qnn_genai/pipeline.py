"""The staged pipeline wired to the artifact cache: model → QDQ → .pte → run, plus references.

Every expensive product is a cache entry keyed by content (the model case's files and settings,
the target, the upstream entry's digest, the tool versions), so a warm session only loads files
and runs the emulator. Nothing here depends on pytest.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_qnn_genai.cache import ArtifactCache, CacheEntry
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.results import RunResult
from pytest_qnn_genai.targets import Target

REFERENCE_JSON = "reference.json"
LOGITS_NPY = "logits.npy"


@dataclass(frozen=True)
class Reference:
    """A teacher-forced or greedy token sequence with the logits that produced each token."""

    prompt_tokens: list[int]
    tokens: list[int]
    logits: np.ndarray  # float32 [len(tokens), vocab]: row i predicted tokens[i]

    def save(self, out: Path) -> None:
        (out / REFERENCE_JSON).write_text(json.dumps(
            {"prompt_tokens": self.prompt_tokens, "tokens": self.tokens}))
        np.save(out / LOGITS_NPY, self.logits.astype(np.float32))

    @classmethod
    def load(cls, entry: CacheEntry) -> "Reference":
        data = json.loads(entry.file(REFERENCE_JSON).read_text())
        return cls(data["prompt_tokens"], data["tokens"], np.load(entry.file(LOGITS_NPY)))


def _greedy(logits_of: Any, prompt: list[int], n: int, eos: int | None) -> Reference:
    tokens: list[int] = []
    rows: list[np.ndarray] = []
    for _ in range(n):
        row = logits_of(prompt + tokens)[-1]
        rows.append(row)
        tokens.append(int(np.argmax(row)))
        if eos is not None and tokens[-1] == eos:
            break
    return Reference(prompt, tokens, np.stack(rows).astype(np.float32))


class Pipeline:
    """One session's view of the stages: builds through the cache, memoizes what it loaded."""

    def __init__(self, cache: ArtifactCache, devices: Any = None) -> None:
        self.cache = cache
        self.devices = devices  # devices.session.DeviceSessions for phone targets (or None)
        self._prepared: dict[str, Any] = {}

    # -- stages ---------------------------------------------------------------------------
    def prepared(self, case: ModelCase) -> Any:
        """Stage prepare (in memory, not cached: cheap once executorch is imported)."""
        if case.name not in self._prepared:
            from pytest_qnn_genai.stages.prepare import prepare

            self._prepared[case.name] = prepare(case)
        return self._prepared[case.name]

    def qdq_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """Stage quantize: the QDQ graphs for the target's SoC and backend."""
        from pytest_qnn_genai.stages.quantize import quantize

        return self.cache.get_or_build(
            "quantize", {"case": case.fingerprint(), "soc": target.soc.name,
                         "backend": target.backend},
            lambda out: quantize(self.prepared(case), target.soc, out, target.backend),
            label=f"{case.name} {target.soc.name}-{target.backend}")

    def qdq(self, case: ModelCase, target: Target) -> Any:
        """The quantize stage's artifacts (``QdqArtifacts``)."""
        from pytest_qnn_genai.stages.quantize import QdqArtifacts

        return QdqArtifacts.load(self.qdq_entry(case, target).path)

    def pte_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """Stage compile: the hybrid .pte for the target."""
        from pytest_qnn_genai.stages.compile import compile_pte, compile_spec_data

        qdq_entry = self.qdq_entry(case, target)
        return self.cache.get_or_build(
            "compile", {"soc": target.soc.name, "backend": target.backend,
                        "spec": compile_spec_data(target)},
            lambda out: compile_pte(self.qdq(case, target), target, out),
            upstream=[qdq_entry.digest], label=f"{case.name} {target.soc.name}-{target.backend}")

    def pte(self, case: ModelCase, target: Target) -> Any:
        """The compile stage's artifacts (``PteArtifacts``)."""
        from pytest_qnn_genai.stages.compile import PteArtifacts

        return PteArtifacts.load(self.pte_entry(case, target).path)

    def run(self, case: ModelCase, target: Target, prompt: str | None = None,
            max_new_tokens: int | None = None) -> RunResult:
        """Stage run: greedy generation with the target's .pte (never cached: it is the test)."""
        from pytest_qnn_genai.stages.run import run

        device = digest = None
        if not target.is_emulator:  # a phone: this worker's DeviceSession, the .pte by digest
            if self.devices is None:
                raise RuntimeError(f"{target.id}: this Pipeline has no device sessions")
            device, digest = self.devices.session(target), self.pte_entry(case, target).digest
        return run(self.pte(case, target).pte, case.path("tokenizer_model"),
                   prompt if prompt is not None else case.eval_prompt, target,
                   max_new_tokens or case.max_new_tokens, device=device,
                   tokenizer_bin=case.path("tokenizer_bin"), pte_digest=digest)

    def legacy_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """The legacy flow (executorch's llama.py, compile-only) for the same case and target."""
        from pytest_qnn_genai.flows.legacy import build_legacy

        return self.cache.get_or_build(
            "legacy-build", {"case": case.fingerprint(), "soc": target.soc.name,
                             "backend": target.backend},
            lambda out: build_legacy(case, target, out),
            label=f"{case.name} {target.soc.name}-{target.backend}")

    def legacy(self, case: ModelCase, target: Target) -> Any:
        """The legacy flow's artifacts (``LegacyArtifacts``: .pte, decode_qdq.pt2, log)."""
        from pytest_qnn_genai.flows.legacy import LegacyArtifacts

        return LegacyArtifacts.load(self.legacy_entry(case, target).path)

    # -- references -----------------------------------------------------------------------
    def fp32_reference(self, case: ModelCase, prompt_tokens: list[int]) -> Reference:
        """The fp32 model's greedy continuation of ``prompt_tokens`` and its logits."""
        def build(out: Path) -> None:
            prepared = self.prepared(case)
            eos = prepared.metadata.get("get_eos_id")
            _greedy(prepared.reference_logits, list(prompt_tokens), case.max_new_tokens,
                    eos).save(out)

        entry = self.cache.get_or_build(
            "fp32-reference", {"case": case.fingerprint(), "prompt_tokens": list(prompt_tokens)},
            build, label=case.name)
        return Reference.load(entry)

    def qdq_logits(self, case: ModelCase, target: Target, prompt_tokens: list[int],
                   tokens: list[int]) -> np.ndarray:
        """QDQ logits (CPU, teacher-forced) for each of ``tokens`` after ``prompt_tokens``."""
        from pytest_qnn_genai.stages.prepare import CALIBRATION, run_calibration_graph

        def build(out: Path) -> None:
            graph = self.qdq(case, target).graph(CALIBRATION)
            seq = list(prompt_tokens) + list(tokens[:-1])
            rows = run_calibration_graph(graph, self.prepared(case), seq)[len(prompt_tokens) - 1:]
            Reference(list(prompt_tokens), list(tokens), rows).save(out)

        qdq_entry = self.qdq_entry(case, target)
        entry = self.cache.get_or_build(
            "qdq-logits", {"prompt_tokens": list(prompt_tokens), "tokens": list(tokens)}, build,
            upstream=[qdq_entry.digest], label=f"{case.name} {target.soc.name}-{target.backend}")
        return Reference.load(entry).logits
