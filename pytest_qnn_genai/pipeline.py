"""Every cached product of a session: model → QDQ → .pte → run, the other flows, the references.

The only caller of the artifact cache for builds. Every expensive product is a cache entry keyed
by content (the model case's files and settings, the target, the upstream entry's digest, the tool
versions), so a warm session only loads files and runs the emulator. The builders it runs write
into a folder and know nothing of the cache (:mod:`pytest_qnn_genai.stages`,
:mod:`pytest_qnn_genai.flows`); :meth:`Pipeline.artifacts` gives any flow's build in the same
shape. Nothing here depends on pytest.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai.cache import ArtifactCache, CacheEntry, code_digest
from pytest_qnn_genai.flows.base import FLOW_NAMES, FlowArtifacts
from pytest_qnn_genai.hybrid import CALIBRATION, QDQ, TEXT_DECODER
from pytest_qnn_genai.models import families
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.runtime.result import RunResult
from pytest_qnn_genai.stages.reference import Reference
from pytest_qnn_genai.targets import Target

if TYPE_CHECKING:
    import torch

    from pytest_qnn_genai.devices.session import DeviceSession, DeviceSessions
    from pytest_qnn_genai.flows.legacy import LegacyArtifacts
    from pytest_qnn_genai.stages.compile import PteArtifacts
    from pytest_qnn_genai.stages.prepare import PreparedModel
    from pytest_qnn_genai.stages.quantize import QdqArtifacts

# What builds each entry: the package modules whose code (and transitive package imports) goes
# into its key, so an edit to the harness rebuilds what it shapes and nothing else. The model
# families are found at run time (no static import reaches them): they are roots of their own.
FAMILIES = families.module_names()
CODE = {
    "quantize": ("pytest_qnn_genai.stages.quantize", *FAMILIES),
    "compile": ("pytest_qnn_genai.stages.compile",),
    # the bootstrap installs the torchtune stand-in in llama.py's process (a string, not an import)
    "legacy-build": ("pytest_qnn_genai.flows.legacy", "pytest_qnn_genai.compat.torchtune",
                     *FAMILIES),
    "genai-build": ("pytest_qnn_genai.flows.genai",),
    "smoke-lower": ("pytest_qnn_genai.flows.smoke",),
    "fp32-reference": ("pytest_qnn_genai.stages.reference", "pytest_qnn_genai.stages.prepare",
                       *FAMILIES),
    "qdq-logits": ("pytest_qnn_genai.stages.reference", "pytest_qnn_genai.stages.prepare",
                   *FAMILIES),
}


class Pipeline:
    """One session's view of the stages: builds through the cache, memoizes what it loaded."""

    def __init__(self, cache: ArtifactCache, devices: DeviceSessions | None = None,
                 package_root: Path | None = None) -> None:
        self.cache = cache
        self.devices = devices  # this worker's phones, for phone targets
        self.package_root = package_root  # the package whose code keys hash (tests: a copy)
        self._prepared: dict[str, PreparedModel] = {}

    def build_target(self, target: Target) -> Target:
        """The target the LLM builds (.pte, legacy) for ``target`` are made for: itself. The one
        place a harness whose "phone" is not one may say otherwise
        (``tests/support/loopback_builds.py``: a loopback phone backed by the x86 emulator, which
        refuses the weight-shared context of a phone LLM build)."""
        return target

    def _inputs(self, stage: str, inputs: dict[str, object]) -> dict[str, object]:
        """A stage's key inputs plus the digest of the code that builds it."""
        return {**inputs, "code": code_digest(CODE[stage], package_root=self.package_root)}

    def _build(self, stage: str, inputs: dict[str, object], build: Callable[[Path], object],
               upstream: tuple[str, ...] = (), label: str = "") -> CacheEntry:
        """``cache.get_or_build`` with the code that builds ``stage`` in the key."""
        return self.cache.get_or_build(stage, self._inputs(stage, inputs), build,
                                       upstream=list(upstream), label=label)

    # -- stages ---------------------------------------------------------------------------
    def prepared(self, case: ModelCase) -> PreparedModel:
        """Stage prepare (in memory, not cached: cheap once executorch is imported)."""
        if case.name not in self._prepared:
            from pytest_qnn_genai.stages.prepare import prepare

            self._prepared[case.name] = prepare(case)
        return self._prepared[case.name]

    def qdq_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """Stage quantize: the QDQ graphs for the target's SoC and backend."""
        from pytest_qnn_genai.stages.quantize import quantize

        return self._build(
            "quantize", {"case": case.build_fingerprint(), "soc": target.soc.name,
                         "backend": target.backend},
            lambda out: quantize(self.prepared(case), target.soc, out, target.backend),
            label=f"{case.name} {target.soc.name}-{target.backend}")

    def qdq(self, case: ModelCase, target: Target) -> QdqArtifacts:
        """The quantize stage's artifacts."""
        from pytest_qnn_genai.stages.quantize import QdqArtifacts

        return QdqArtifacts.load(self.qdq_entry(case, target).path)

    def pte_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """Stage compile: the hybrid .pte for the target."""
        from pytest_qnn_genai.stages.compile import compile_pte, compile_spec_data

        target = self.build_target(target)
        qdq_entry = self.qdq_entry(case, target)
        return self._build(
            "compile", {"soc": target.soc.name, "backend": target.backend,
                        "spec": compile_spec_data(target)},
            lambda out: compile_pte(self.qdq(case, target), target, out),
            upstream=(qdq_entry.digest,), label=f"{case.name} {target.soc.name}-{target.backend}")

    def pte(self, case: ModelCase, target: Target) -> PteArtifacts:
        """The compile stage's artifacts."""
        from pytest_qnn_genai.stages.compile import PteArtifacts

        return PteArtifacts.load(self.pte_entry(case, target).path)

    def run(self, case: ModelCase, target: Target, prompt: str | None = None,
            max_new_tokens: int | None = None, logits: bool = False) -> RunResult:
        """Stage run: greedy generation with the target's .pte (never cached: it is the test).
        ``logits``: a phone also runs kv mode for them (the emulator always has them)."""
        pte = self.pte(case, target).pte
        digest = None if target.is_emulator else self.pte_entry(case, target).digest
        return self.run_pte(case, target, pte, prompt, max_new_tokens, logits=logits,
                            digest=digest)

    def _device(self, target: Target) -> DeviceSession | None:
        """This worker's session for a phone target (None for the emulator)."""
        if target.is_emulator:
            return None
        if self.devices is None:
            raise RuntimeError(f"{target.id}: this Pipeline has no device sessions")
        return self.devices.session(target)

    def run_pte(self, case: ModelCase, target: Target, pte: Path, prompt: str | None = None,
                max_new_tokens: int | None = None, *, logits: bool = False,
                digest: str | None = None) -> RunResult:
        """Greedy generation of any hybrid .pte of ``case`` (another flow's build) on ``target``:
        in this process on the emulator, with the runner on a phone (``digest`` names the pushed
        copy; default: the file's sha256)."""
        from pytest_qnn_genai.runtime.run import run
        from pytest_qnn_genai.stages.recipe import decoder_model_version

        return run(pte, case.path("tokenizer_model"),
                   prompt if prompt is not None else case.eval_prompt, target,
                   max_new_tokens or case.max_new_tokens, device=self._device(target),
                   tokenizer_bin=case.path("tokenizer_bin"), pte_digest=digest, logits=logits,
                   decoder_model_version=decoder_model_version(case))

    def run_method(self, target: Target, pte: Path, inputs: Sequence[torch.Tensor],
                   digest: str | None = None) -> list[torch.Tensor]:
        """One inference of a one-method .pte on ``target`` (qnn_executor_runner on a phone)."""
        from pytest_qnn_genai.runtime.run import run_method

        return run_method(pte, inputs, target, device=self._device(target), pte_digest=digest)

    def variant_pte(self, case: ModelCase, variant: str, target: Target) -> Path:
        """The .pte of one build variant of ``case`` (:attr:`ModelCase.variant_names`):
        ``legacy`` (llama.py), ``new`` (the staged flow) or a declared variant, staged."""
        if variant == "legacy":
            return self.legacy(case, target).pte
        return self.pte(case.variant(variant), target).pte

    def legacy_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """The legacy flow (executorch's llama.py, compile-only) for the same case and target."""
        from pytest_qnn_genai.flows.legacy import build_legacy

        target = self.build_target(target)
        return self._build(
            "legacy-build", self._legacy_inputs(case, target),
            lambda out: build_legacy(case, target, out),
            label=f"{case.name} {target.soc.name}-{target.backend}")

    @staticmethod
    def _legacy_inputs(case: ModelCase, target: Target) -> dict[str, object]:
        # --enable_x86_64 changes what llama.py builds (no shared buffer, no weight sharing)
        return {"case": case.build_fingerprint(), "soc": target.soc.name,
                "backend": target.backend, "emulator": target.is_emulator}

    def cached_legacy(self, case: ModelCase, target: Target) -> LegacyArtifacts | None:
        """The legacy build if the cache already holds it (never builds: minutes of llama.py)."""
        from pytest_qnn_genai.flows.legacy import LegacyArtifacts

        target = self.build_target(target)
        key = self.cache.key("legacy-build", self._inputs("legacy-build",
                                                          self._legacy_inputs(case, target)))
        entry = self.cache.lookup("legacy-build", key)
        return None if entry is None else LegacyArtifacts.load(entry.path)

    def legacy(self, case: ModelCase, target: Target) -> LegacyArtifacts:
        """The legacy flow's artifacts (.pte, decode_qdq.pt2, log)."""
        from pytest_qnn_genai.flows.legacy import LegacyArtifacts

        return LegacyArtifacts.load(self.legacy_entry(case, target).path)

    def genai_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """executorch's genai_pipeline compiling the staged flow's QDQ graphs."""
        from pytest_qnn_genai.flows.genai import build_genai
        from pytest_qnn_genai.sdk.versions import dist_version

        qdq_entry = self.qdq_entry(case, target)
        return self._build(
            "genai-build", {"case": case.build_fingerprint(), "soc": target.soc.name,
                            "backend": target.backend, "executorch": dist_version("executorch")},
            lambda out: build_genai(self.qdq(case, target), case, target, out),
            upstream=(qdq_entry.digest,), label=f"{case.name} {target.soc.name}-{target.backend}")

    def smoke_block(self, target: Target, quant: str) -> CacheEntry:
        """The smoke flow's attention block, quantized with ``quant`` (or fp16), lowered."""
        from pytest_qnn_genai.flows import smoke

        return self._build(
            "smoke-lower", smoke.spec(target, quant), lambda out: smoke.build(target, quant, out),
            label=f"attention-{quant} {target.id}")

    # -- any flow, same shape ---------------------------------------------------------------
    def artifacts(self, flow: str, case: ModelCase, target: Target) -> FlowArtifacts:
        """What ``flow`` (``legacy``, ``new``, ``genai``) built for ``case`` and ``target``."""
        if flow not in FLOW_NAMES:
            raise KeyError(f"unknown flow {flow!r}; flows: {', '.join(FLOW_NAMES)}")
        if flow == "legacy":
            entry = self.legacy_entry(case, target)
            art = self.legacy(case, target)
            return FlowArtifacts(flow, {TEXT_DECODER: art.pte, QDQ: art.decode_qdq},
                                 {"legacy-build": _build_s(entry)},
                                 {"wall_s": art.wall_s, "peak_rss_mb": art.peak_rss_mb})
        qdq_entry = self.qdq_entry(case, target)
        qdq = self.qdq(case, target)
        if flow == "new":
            pte_entry = self.pte_entry(case, target)
            pte = self.pte(case, target)
            return FlowArtifacts(
                flow, {TEXT_DECODER: pte.pte, QDQ: qdq.path(CALIBRATION)},
                {"quantize": _build_s(qdq_entry), "compile": _build_s(pte_entry)},
                {"graphs": sorted(qdq.data["graphs"]), "metadata": sorted(qdq.metadata),
                 "compile_spec": pte.compile_spec})
        if flow == "genai":
            from pytest_qnn_genai.flows.genai import artifact_names

            entry = self.genai_entry(case, target)
            names = artifact_names(entry.path)
            return FlowArtifacts(flow, {TEXT_DECODER: entry.path / names[0],
                                        QDQ: qdq.path(CALIBRATION)},
                                 {"quantize": _build_s(qdq_entry), "genai-build": _build_s(entry)},
                                 {"artifacts": names})
        raise AssertionError(f"flow {flow!r} is in FLOW_NAMES but has no branch here")

    # -- references -----------------------------------------------------------------------
    def fp32_reference(self, case: ModelCase, prompt_tokens: list[int]) -> Reference:
        """The fp32 model's greedy continuation of ``prompt_tokens`` and its logits."""
        from pytest_qnn_genai.stages.reference import fp32_reference

        n = case.max_new_tokens
        entry = self._build(
            "fp32-reference", {"case": case.build_fingerprint(),
                               "prompt_tokens": list(prompt_tokens), "max_new_tokens": n},
            lambda out: fp32_reference(self.prepared(case), prompt_tokens, n).save(out),
            label=case.name)
        return Reference.load(entry.path)

    def qdq_logits(self, case: ModelCase, target: Target, prompt_tokens: list[int],
                   tokens: list[int]) -> np.ndarray:
        """QDQ logits (CPU, teacher-forced) for each of ``tokens`` after ``prompt_tokens``."""
        from pytest_qnn_genai.stages.reference import teacher_forced

        def build(out: Path) -> None:
            graph = self.qdq(case, target).graph(CALIBRATION)
            teacher_forced(graph, self.prepared(case), prompt_tokens, tokens).save(out)

        qdq_entry = self.qdq_entry(case, target)
        entry = self._build(
            "qdq-logits", {"prompt_tokens": list(prompt_tokens), "tokens": list(tokens)}, build,
            upstream=(qdq_entry.digest,), label=f"{case.name} {target.soc.name}-{target.backend}")
        return Reference.load(entry.path).logits


def _build_s(entry: CacheEntry) -> float:
    """``build_s`` of a cache entry's manifest (what building it took, even on a cache hit)."""
    return float(entry.manifest.get("build_s", 0.0))
