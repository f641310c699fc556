"""The Pipeline: one session's view of the cached products (declared in :mod:`.products`).

The only caller of the artifact cache for builds: every entry is keyed by content (case, target,
upstream entry, tool versions, the product's code), so a warm session only loads files and runs
the emulator. Builders write into a folder and know nothing of the cache. Nothing needs pytest.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai import isa, threads
from pytest_qnn_genai.cache import ArtifactCache, CacheEntry, code_digest
from pytest_qnn_genai.flows import registry as flows
from pytest_qnn_genai.flows.base import BuildRequest, Flow, FlowArtifacts
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.pipeline import outputs, products
from pytest_qnn_genai.pipeline.outputs import RunnerRequest
from pytest_qnn_genai.pipeline.products import Build, Need
from pytest_qnn_genai.pipeline.references import References
from pytest_qnn_genai.runtime.result import RunResult
from pytest_qnn_genai.targets import EMULATOR, Target, known_build_target

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

    from pytest_qnn_genai.checks.encodings import GraphEncodings
    from pytest_qnn_genai.devices.session import DeviceSession, DeviceSessions
    from pytest_qnn_genai.flows.legacy import LegacyArtifacts
    from pytest_qnn_genai.flows.llama_eval import UpstreamSqnr
    from pytest_qnn_genai.runners import RunnerBuild
    from pytest_qnn_genai.runtime.work import ProgramWork
    from pytest_qnn_genai.stages.compile import PteArtifacts
    from pytest_qnn_genai.stages.prepare import PreparedModel
    from pytest_qnn_genai.stages.quantize import QdqArtifacts


class Pipeline(References):
    """One session's view of the stages: builds through the cache, memoizes what it loaded
    (the references to judge them by: :class:`~.references.References`)."""

    def __init__(self, cache: ArtifactCache, devices: DeviceSessions | None = None,
                 package_root: Path | None = None) -> None:
        threads.pin()  # what it builds computes as every other process's builds (a key input)
        isa.check()  # and on the one numeric path (IsaError: one line)
        self.cache = cache
        self.devices = devices  # this worker's phones, for phone targets
        self.package_root = package_root  # the package whose code keys hash (tests: a copy)
        self._prepared: dict[str, PreparedModel] = {}
        self._transformers: dict[str, PreTrainedModel] = {}  # case name -> transformers' model
        # quantize entry digest -> its artifacts: a graph (0.9 GB at 135M) loads once a session
        self._qdq: dict[str, QdqArtifacts] = {}

    def build_target(self, target: Target) -> Target:
        """The target the builds for ``target`` are made for. A phone whose device says it runs
        x86_64 code (``ro.product.cpu.abi``; there is no x86 Snapdragon, so it is an x86 HTP
        simulator behind a device transport, e.g. the loopback phone) gets the emulator's
        builds: llama.py ``--enable_x86_64``, no shared buffer, no weight sharing, the only
        programs the simulator loads (measured: a phone LLM build fails with "Shared weights
        buffer isn't supported on this platform")."""
        known = known_build_target(target)
        if known is not None:
            return known
        if self.devices is None or not self.devices.serves(target):
            return target  # no device to ask (builds only): a phone's builds
        if self.devices.session(target).runs_simulator:
            return dataclasses.replace(target, device=EMULATOR)
        return target

    def _inputs(self, product: str, inputs: dict[str, object]) -> dict[str, object]:
        """A product's key inputs plus the digest of the code that builds it (its ``code``)."""
        code = products.get(product).code
        return {**inputs, "code": code_digest(code, package_root=self.package_root)}

    def entry(self, product: str, inputs: dict[str, object], build: Callable[[Path], object],
              upstream: Sequence[str] = (), label: str = "") -> CacheEntry:
        """One entry of ``product`` (:mod:`.products`): ``cache.get_or_build`` under its cache
        stage, with ``inputs`` and the code that builds it in the key."""
        return self.cache.get_or_build(products.get(product).cache_stage,
                                       self._inputs(product, inputs), build,
                                       upstream=list(upstream), label=label)

    def make(self, product: str, case: ModelCase | None = None, target: Target | None = None,
             arg: str = "") -> object:
        """Every entry one need of ``product`` names, through its ``make`` (what the prebuild
        builds ahead for a fixture that declares it): for ``case`` on ``target``'s builds."""
        build_target = None if target is None else self.build_target(target)
        need = products.need_for(product, case, build_target, arg)
        return self.make_need(Build(need or Need(product, arg=arg), case, build_target))

    def make_need(self, build: Build) -> object:
        """``build``'s product's ``make`` (the prebuild's one call per step)."""
        return products.get(build.need.product).maker()(self, build)

    # -- stages ---------------------------------------------------------------------------
    def prepared(self, case: ModelCase) -> PreparedModel:
        """Stage prepare (in memory, not cached: cheap once executorch is imported)."""
        if case.name not in self._prepared:
            from pytest_qnn_genai.stages.prepare import prepare

            self._prepared[case.name] = prepare(case)
        return self._prepared[case.name]

    @staticmethod
    def _qdq_key(case: ModelCase, target: Target) -> dict[str, object]:
        return {"case": case.build_fingerprint(), "soc": target.soc.name,
                "backend": target.backend}

    def qdq_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """Stage quantize: the QDQ graphs for the target's SoC and backend."""
        from pytest_qnn_genai.stages.quantize import quantize

        return self.entry(
            products.QUANTIZE, self._qdq_key(case, target),
            lambda out: quantize(self.prepared(case), target.soc, out, target.backend),
            label=f"{case.name} {target.soc.name}-{target.backend}")

    def qdq(self, case: ModelCase, target: Target) -> QdqArtifacts:
        """The quantize stage's artifacts (one object per entry: its graphs load once)."""
        from pytest_qnn_genai.stages.quantize import QdqArtifacts

        entry = self.qdq_entry(case, target)
        if entry.digest not in self._qdq:
            self._qdq[entry.digest] = QdqArtifacts.load(entry.path)
        return self._qdq[entry.digest]

    def pte_entry(self, case: ModelCase, target: Target) -> CacheEntry:
        """Stage compile: the hybrid .pte for the target (the ``new`` flow's entry)."""
        return self.flow_entry(flows.get("new"), case, target)

    def pte(self, case: ModelCase, target: Target) -> PteArtifacts:
        """The compile stage's artifacts."""
        from pytest_qnn_genai.stages.compile import PteArtifacts

        return PteArtifacts.load(self.pte_entry(case, target).path)

    def run(self, case: ModelCase, target: Target, prompt: str | None = None,
            max_new_tokens: int | None = None, logits: bool = False,
            judged: bool = False) -> RunResult:
        """Stage run: greedy generation with the target's .pte. ``logits``: a phone also runs kv
        mode for them (the emulator always has them); ``judged``: see :meth:`run_pte`."""
        entry = self.pte_entry(case, target)
        return self.run_pte(case, target, self.pte(case, target).pte, prompt, max_new_tokens,
                            logits=logits, digest=entry.digest, judged=judged)

    def _device(self, target: Target) -> DeviceSession | None:
        """This worker's session for a phone target (None for the emulator)."""
        if target.is_emulator:
            return None
        if self.devices is None:
            raise RuntimeError(f"{target.id}: this Pipeline has no device sessions")
        return self.devices.session(target)

    def run_pte(self, case: ModelCase, target: Target, pte: Path, prompt: str | None = None,
                max_new_tokens: int | None = None, *, logits: bool = False,
                digest: str | None = None, runner_prompt: bool = False,
                prompt_ids: list[int] | None = None, judged: bool = False) -> RunResult:
        """Greedy generation of any hybrid .pte of ``case`` (another flow's build) on ``target``:
        in this process on the emulator, with the runner on a phone (``digest`` names the pushed
        copy; default: the file's sha256). ``runner_prompt``: the runner formats and encodes
        ``prompt`` itself (``--prompt``); only upstream's runners can (not the emulator).
        ``prompt_ids``: the ids to run (upstream's runners), instead of ``prompt`` encoded.
        A lookahead ``case`` (:attr:`ModelCase.is_lookahead`) runs with ``--eval_mode 2`` and
        its window/ngram/gcap: only upstream's runners decode it. ``judged``: only the outputs
        matter, not the speed: on the emulator and upstream's x86 runner a kept product
        (:mod:`.outputs`); a phone's runs are never kept."""
        prompt = prompt if prompt is not None else case.eval_prompt
        n = max_new_tokens or case.max_new_tokens
        version = self.decoder_model_version(case)
        device = self._device(target)
        if device is None:
            from pytest_qnn_genai.runtime.run import RunStageError, run

            if runner_prompt or prompt_ids is not None:
                raise RunStageError(f"{target.id}: the host runner takes ids; --prompt is "
                                    "upstream's runners' path")
            if case.is_lookahead:
                raise RunStageError(f"{target.id}: {case.name} is a lookahead build; only "
                                    "upstream's qnn_llama_runner decodes it (--eval_mode 2: the "
                                    "x86-runner target or a phone), the host runner decodes AR-1")
            if judged:
                return outputs.generation(self, case, target, pte, prompt, n, version)
            return run(pte, case.path("tokenizer_model"), prompt, target, n,
                       decoder_model_version=version)
        request = RunnerRequest(prompt, n, logits, version, runner_prompt, prompt_ids,
                                case.lookahead)
        return self._on_runner(device, case, target, pte, digest, request, judged)

    def _on_runner(self, device: DeviceSession, case: ModelCase, target: Target, pte: Path,
                   digest: str | None, request: RunnerRequest, judged: bool) -> RunResult:
        """``request`` run by qnn_llama_runner on ``device``; when ``judged`` and the runner is
        upstream's on this machine (the x86-runner target), a kept product (:mod:`.outputs`)."""
        def generate() -> RunResult:
            return device.generate(
                pte, case.path("tokenizer_model"), case.path("tokenizer_bin"), request.prompt,
                request.max_new_tokens, target, digest, logits=request.logits,
                decoder_model_version=request.decoder_model_version,
                runner_prompt=request.runner_prompt, prompt_ids=request.prompt_ids,
                lookahead=request.lookahead)

        if judged and target.is_x86_runner:
            return outputs.runner_generation(self, case, target, pte, [device.runner, *device.libs],
                                             request, generate)
        return generate()

    def decoder_model_version(self, case: ModelCase) -> str:
        """The runner's ``--decoder_model_version`` for ``case`` (llama.py's model config),
        cached: reading it imports executorch's LLM example package (seconds), which a
        warm run needs for nothing else."""
        import json

        from pytest_qnn_genai.stages.recipe import decoder_model_version

        def build(out: Path) -> None:
            (out / "llm_config.json").write_text(json.dumps(
                {"decoder_model_version": decoder_model_version(case)}))

        entry = self.entry(products.LLM_CONFIG, {"decoder_model": case.decoder_model}, build,
                            label=case.decoder_model)
        return str(json.loads(entry.file("llm_config.json").read_text())["decoder_model_version"])

    def run_method(self, target: Target, pte: Path, inputs: Sequence[torch.Tensor],
                   digest: str | None = None, method: str = "forward") -> list[torch.Tensor]:
        """One inference of one method of a .pte on ``target`` (qnn_executor_runner on a phone
        and with upstream's runners)."""
        import torch

        device = self._device(target)
        if device is None:
            from pytest_qnn_genai.runtime.run import run_method

            return run_method(pte, inputs, method)
        arrays = [t.detach().contiguous().numpy() for t in inputs]
        return [torch.from_numpy(a) for a in device.run_method(pte, arrays, digest, method)]

    def variant_pte(self, case: ModelCase, variant: str, target: Target) -> Path:
        """The .pte of one build variant of ``case`` (:attr:`ModelCase.variant_names`):
        ``legacy`` (llama.py), ``new`` (the staged flow) or a declared variant, staged."""
        if variant == "legacy":
            return self.artifacts("legacy", case, target).pte
        return self.pte(case.variant(variant), target).pte

    def legacy(self, case: ModelCase, target: Target) -> LegacyArtifacts:
        """The legacy flow's own record of its build (.pte, decode_qdq.pt2, log, argv)."""
        from pytest_qnn_genai.flows.legacy import LegacyArtifacts

        return LegacyArtifacts.load(self.flow_entry(flows.get("legacy"), case, target).path)

    def smoke_block(self, target: Target, quant: str) -> CacheEntry:
        """The smoke flow's attention block, quantized with ``quant`` (or fp16), lowered."""
        from pytest_qnn_genai.flows import smoke

        target = self.build_target(target)
        return self.entry(
            products.SMOKE, smoke.spec(target, quant), lambda out: smoke.build(target, quant, out),
            label=f"attention-{quant} {target.id}")

    def runners_entry(self, src: Path, logging: bool = True) -> CacheEntry:
        """ExecuTorch's ``qnn_llama_runner`` and ``qnn_executor_runner`` built for x86_64 from
        the source tree ``src`` against the installed wheel, in a self-contained ``$ORIGIN``
        folder (:mod:`pytest_qnn_genai.runners`); ``logging=False``: ET_LOG compiled out."""
        from pytest_qnn_genai.runners import build_runners, key_inputs

        return self.entry(products.RUNNERS, key_inputs(src, logging=logging),
                           lambda out: build_runners(src, out, logging=logging),
                           label="qnn_llama_runner qnn_executor_runner"
                                 + ("" if logging else " (no logging)"))

    def runners(self, src: Path, logging: bool = True) -> RunnerBuild:
        """The cached build of :meth:`runners_entry`."""
        from pytest_qnn_genai.runners import RunnerBuild

        return RunnerBuild.load(self.runners_entry(src, logging).path)

    # -- any flow, same shape ---------------------------------------------------------------
    def flow_entry(self, flow: Flow, case: ModelCase, target: Target) -> CacheEntry:
        """``flow``'s build of ``case`` for ``target`` (its build target), through the cache;
        a flow that starts from the staged QDQ graphs has their entry as its upstream."""
        target = self.build_target(target)
        upstream = (self.qdq_entry(case, target).digest,) if flow.from_qdq else ()

        def build(out: Path) -> None:
            qdq = self.qdq(case, target) if flow.from_qdq else None
            flow.build(BuildRequest(case, target, qdq), out)

        return self.entry(flow.name, flow.key(case, target), build, upstream,
                          label=f"{case.name} {target.soc.name}-{target.backend}")

    def cached_entry(self, flow_name: str, case: ModelCase, target: Target) -> CacheEntry | None:
        """``flow_name``'s entry if the cache already holds it (never builds: e.g. minutes of
        llama.py)."""
        flow = flows.get(flow_name)
        target = self.build_target(target)
        upstream: list[str] = []
        if flow.from_qdq:
            qdq_inputs = self._inputs(products.QUANTIZE, self._qdq_key(case, target))
            qdq = self.cache.lookup(products.QUANTIZE,
                                    self.cache.key(products.QUANTIZE, qdq_inputs))
            if qdq is None:
                return None
            upstream = [qdq.digest]
        inputs = self._inputs(flow.name, flow.key(case, target))
        return self.cache.lookup(flow.stage, self.cache.key(flow.stage, inputs, upstream))

    def artifacts(self, flow_name: str, case: ModelCase, target: Target) -> FlowArtifacts:
        """What the flow called ``flow_name`` (``legacy``, ``new``, ``genai``, ...) built for
        ``case`` and ``target``, with the build seconds of every cache entry behind it."""
        flow = flows.get(flow_name)
        entry = self.flow_entry(flow, case, target)
        build_s = {flow.stage: _build_s(entry)}
        qdq = None
        if flow.from_qdq:
            build_target = self.build_target(target)
            build_s = {products.QUANTIZE: _build_s(self.qdq_entry(case, build_target)), **build_s}
            qdq = self.qdq(case, build_target)
        out = flow.load(entry.path, qdq)
        return FlowArtifacts(flow.name, out.files, build_s, out.info)

    def target_logits(self, case: ModelCase, target: Target, pte: Path, ids: list[int],
                      digest: str | None = None) -> np.ndarray:
        """The target's logits of every position of ``ids`` fed to ``pte`` as one prompt (row i
        predicts the token after ``ids[i]``): the emulator's prompt processor in this process,
        elsewhere the runner's kv-mode logits dump (its prompt rows and the first generated
        token's), as llama.py's ``TaskEval`` reads a device's. The emulator's and upstream's x86
        runner's are kept products (:mod:`.outputs`); a phone's runs are never kept."""
        device = self._device(target)
        if device is None:
            return outputs.prompt_logits(self, target, pte, ids, label=case.name)
        request = RunnerRequest("", 1, True, self.decoder_model_version(case),
                                prompt_ids=[int(i) for i in ids])
        run = self._on_runner(device, case, target, pte, digest, request, judged=True)
        if run.prompt_logits is None or run.logits is None:
            raise RuntimeError(f"{target.id}: the run gave no prompt logits")
        return np.concatenate([run.prompt_logits, run.logits[:1]])

    def upstream_sqnr(self, case: ModelCase, target: Target, pte: Path,
                      qdq_graph: Path | None) -> UpstreamSqnr:
        """llama.py's own ``sqnr_eval`` of ``pte`` (an emulator build of ``case``) run by the
        x86-runner ``target``'s runner, as upstream's CI runs it (``--enable_x86_64``): a kept
        product (:func:`.outputs.upstream_sqnr`)."""
        device = self._device(target)
        if device is None or not target.is_x86_runner:
            raise RuntimeError(f"{target.id}: llama.py's sqnr_eval runs upstream's x86 runner "
                               "(the x86-runner target)")
        return outputs.upstream_sqnr(self, case, self.build_target(target), pte, qdq_graph,
                                     [device.runner, *device.libs])

    def program_work(self, case: ModelCase, target: Target, pte: Path, ids: Sequence[int],
                     steps: int) -> ProgramWork:
        """``pte``'s counted work on the emulator (:mod:`pytest_qnn_genai.runtime.work`), a kept
        product: counted once per program and workload."""
        return outputs.program_work(self, target, pte, ids, steps, label=case.name)

    def qdq_encodings(self, graph: Path) -> GraphEncodings:
        """The encodings table of any flow's QDQ ``.pt2`` (the check's input), cached under the
        graph's sha256: a warm run does not load the graph."""
        from pytest_qnn_genai.checks.encodings import ENCODINGS_FILE, GraphEncodings, graph_encodings
        from pytest_qnn_genai.files import file_sha256

        entry = self.entry(products.QDQ_ENCODINGS, {"graph_sha256": file_sha256(graph)},
                            lambda out: graph_encodings(graph).save(out),
                            label=f"{graph.parent.parent.name}/{graph.name}")
        return GraphEncodings.load(entry.file(ENCODINGS_FILE))


def _build_s(entry: CacheEntry) -> float:
    """``build_s`` of a cache entry's manifest (what building it took, even on a cache hit)."""
    return float(entry.manifest.get("build_s", 0.0))
