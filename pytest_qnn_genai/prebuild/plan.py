"""Which cached builds the selected tests will ask for, in the order to start them ahead.

Pytest-free. The plugin describes each selected, not-skipped item as a :class:`Request`: the
names of the fixtures it uses (the whole closure, as pytest resolves it), its model case and
target, and its A/B pair. :func:`plan` turns the requests into :class:`Step` s, each one cache
entry that :mod:`.process` builds through the same :class:`~pytest_qnn_genai.pipeline.Pipeline`
the tests use: dependencies first (quantize before the flows built from its graphs and the QDQ
references), the long builds (:data:`LONG_KINDS`: quantize, flows, the runners; minutes each)
before the short ones (references, logits, smoke blocks, configs; seconds each), each group in the
order the items first need them (the order they run in). Measured: in first-need order the
prebuild's one in-process lane spent minutes on a case's references and held-out logits before
starting the lookahead variant's quantize, whose compile then ran alone at the end of a cold gate
(60 + 108 s, one core idle); a short entry a test needs before the prebuild reaches it is built
by that test, on its own worker.

What a fixture asks the pipeline for is :data:`FIXTURE_NEEDS` (the plugin's and the suites'
fixtures). A fixture missing from it is only a build not started ahead: the test builds it when
it asks, as without this module. Nothing a run will not use is planned:

- only the selected items count (``-k``, ``-m``, ``--models``, skip marks are applied first);
- only targets whose builds are known before any device is asked: the emulator, and upstream's
  x86 runners (the same x86 simulator: the emulator's builds, plus the runners themselves when
  they are built from ``--executorch-src``). A phone's builds depend on what the phone runs
  (``Pipeline.build_target`` asks it), so they are never planned;
- an A/B variant the case does not declare (its test skips) is not planned, nor a lookahead
  build on the emulator (the lookahead test skips there) or of a case declaring none.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_qnn_genai.flows import registry as flows
from pytest_qnn_genai.models.registry import VARIANT_SEPARATOR, ModelCase
from pytest_qnn_genai.targets import EMULATOR, Target
from pytest_qnn_genai.untyped import Json

# step kinds: what each builds (one cache entry through the Pipeline method named)
QUANTIZE = "quantize"  # Pipeline.qdq_entry
FLOW = "flow"  # Pipeline.flow_entry: arg = the flow's name (legacy, new, genai, ...)
SMOKE = "smoke"  # Pipeline.smoke_block: arg = the block's quantisation
LLM_CONFIG = "llm-config"  # Pipeline.decoder_model_version (every run on a target needs it)
FP32_REFERENCE = "fp32-reference"  # Pipeline.fp32_reference on the case's eval prompt
QDQ_LOGITS = "qdq-logits"  # Pipeline.qdq_logits teacher-forced on the fp32 continuation
TRANSFORMERS_LOGITS = "transformers-logits"  # Pipeline.transformers_logits on the same tokens
RUNNERS = "runners"  # Pipeline.runners_entry: arg = the ExecuTorch source tree
HELDOUT_FP32 = "heldout-fp32"  # Pipeline.fp32_logits on each held-out window
HELDOUT_QDQ = "heldout-qdq"  # Pipeline.qdq_logits on each held-out window
KINDS = (QUANTIZE, FLOW, SMOKE, LLM_CONFIG, FP32_REFERENCE, QDQ_LOGITS, TRANSFORMERS_LOGITS,
         RUNNERS, HELDOUT_FP32, HELDOUT_QDQ)
LONG_KINDS = (QUANTIZE, FLOW, RUNNERS)  # minutes each; the other kinds take seconds

# What each fixture makes the pipeline build for the item's case and target: a step kind, or
# (kind, arg). Table order is the order within one item.
Need = str | tuple[str, str]
FIXTURE_NEEDS: dict[str, tuple[Need, ...]] = {
    # the plugin's fixtures (plugin/fixtures.py)
    "qnn_qdq": (QUANTIZE,),
    "qnn_pte": ((FLOW, "new"),),
    "qnn_run": ((FLOW, "new"), LLM_CONFIG),
    "qnn_benchmark": ((FLOW, "new"), LLM_CONFIG),
    # suites/gate/conftest.py, test_transformers_reference.py
    "fp32_reference": (FP32_REFERENCE,),
    "qdq_on_fp32_tokens": (QDQ_LOGITS,),
    "transformers_logits": (TRANSFORMERS_LOGITS,),
    # suites/parity/conftest.py, test_genai_parity.py
    "legacy_artifacts": ((FLOW, "legacy"),),
    "new_artifacts": ((FLOW, "new"),),
    "genai_artifacts": ((FLOW, "genai"),),
    "legacy_run": (LLM_CONFIG,),
    "new_run": (LLM_CONFIG,),
    # suites/smoke/test_smoke.py
    "block_16a8w": ((SMOKE, "16a8w"),),
    "block_fp16": ((SMOKE, "fp16"),),
    # suites/conftest.py: the held-out windows' fp32 and QDQ logits (perplexity)
    "heldout_fp32": (HELDOUT_FP32,),
    "heldout_qdq": (HELDOUT_QDQ,),
}
# Fixtures whose needs hold for the case and for each lookahead variant it declares
# (suites/perf/test_lookahead.py: each flow's lookahead build and its hybrid build). The fixture
# skips on the emulator (the host runner decodes AR-1), so nothing is planned for it there.
LOOKAHEAD_NEEDS: dict[str, tuple[Need, ...]] = {
    "lookahead_cases": ((FLOW, "legacy"), (FLOW, "new")),
}
# the fixture through which an item builds anything (on an x86-runner target it starts the runners)
PIPELINE_FIXTURE = "qnn_pipeline"
# the step kinds whose build runs in a subprocess (llama.py, cmake): they overlap in-process ones
SUBPROCESS_FLOWS = ("legacy",)


@dataclass(frozen=True)
class Request:
    """One selected item, as the plan needs it."""

    fixtures: frozenset[str]
    case: ModelCase | None = None
    target: Target | None = None
    ab_pair: tuple[str, str] | None = None


@dataclass(frozen=True)
class Step:
    """One cache entry to build ahead. ``case`` is a case name (``stories260k@ar8`` for a
    declared variant); ``soc``/``backend`` name the build target, always the emulator's."""

    kind: str
    case: str = ""
    soc: str = ""
    backend: str = ""
    arg: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown prebuild step kind {self.kind!r}; kinds: {', '.join(KINDS)}")

    @property
    def in_subprocess(self) -> bool:
        """True if the build runs in a subprocess (llama.py, cmake), so it can run beside an
        in-process build without holding the interpreter."""
        return self.kind == RUNNERS or (self.kind == FLOW and self.arg in SUBPROCESS_FLOWS)

    @property
    def label(self) -> str:
        """``flow legacy stories260k SM8650-htp`` and the like."""
        target = f"{self.soc}-{self.backend}" if self.soc else ""
        what = f"{self.kind} {self.arg}" if self.kind in (FLOW, SMOKE) else self.kind
        return " ".join(x for x in (what, self.case, target) if x)

    def to_dict(self) -> dict[str, Json]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Json]) -> Step:
        return cls(**{f.name: str(data.get(f.name, "")) for f in dataclasses.fields(cls)})


def build_target(target: Target) -> Target | None:
    """The target a build for ``target`` is made for, if known before any device is asked: the
    emulator itself, the emulator's builds for upstream's x86 runners (the same x86 HTP
    simulator, as ``Pipeline.build_target`` finds by asking their device), None for a phone."""
    if target.is_emulator:
        return target
    if target.is_x86_runner:
        return dataclasses.replace(target, device=EMULATOR)
    return None


def dependencies(step: Step) -> tuple[Step, ...]:
    """The steps whose entries ``step``'s build reads (they are planned before it)."""
    on_target = dict(case=step.case, soc=step.soc, backend=step.backend)
    if step.kind == FLOW and flows.get(step.arg).from_qdq:
        return (Step(QUANTIZE, **on_target),)
    if step.kind == QDQ_LOGITS:
        return (Step(QUANTIZE, **on_target), Step(FP32_REFERENCE, step.case))
    if step.kind == HELDOUT_QDQ:
        return (Step(QUANTIZE, **on_target),)
    if step.kind == TRANSFORMERS_LOGITS:
        return (Step(FP32_REFERENCE, step.case),)
    return ()


def _step(need: Need, case: ModelCase | None, target: Target) -> Step | None:
    kind, arg = (need, "") if isinstance(need, str) else need
    if kind == SMOKE:
        return Step(kind, soc=target.soc.name, backend=target.backend, arg=arg)
    if case is None:
        return None
    if kind in (LLM_CONFIG, FP32_REFERENCE, TRANSFORMERS_LOGITS, HELDOUT_FP32):
        return Step(kind, case.name)
    return Step(kind, case.name, target.soc.name, target.backend, arg)


def _variant_step(case: ModelCase, variant: str, target: Target) -> Step | None:
    """The build of one side of an A/B pair (``Pipeline.variant_pte``), if the case has it."""
    if variant not in case.variant_names:
        return None  # the test skips: the case does not declare it
    if variant == "legacy":
        return _step((FLOW, "legacy"), case, target)
    name = case.name if variant == "new" else f"{case.name}{VARIANT_SEPARATOR}{variant}"
    return Step(FLOW, name, target.soc.name, target.backend, "new")


def lookahead_variant_names(case: ModelCase) -> tuple[str, ...]:
    """The variants ``case`` declares that build llama.py's lookahead mode (here, not on
    :class:`ModelCase`: the build stages' cache keys hash that module's bytes)."""
    return tuple(n for n in case.variants if case.variant(n).is_lookahead)


def plan(requests: Iterable[Request], runners_src: Path | None = None) -> list[Step]:
    """Every step the requests need, each once, dependencies before dependents, long builds
    before short steps, otherwise in first-need order. ``runners_src``: the tree upstream's x86
    runners are built from (None: they are not built this session, e.g. a prebuilt
    ``--runner``)."""
    steps: dict[Step, None] = {}

    def add(step: Step | None) -> None:
        if step is None or step in steps:
            return
        for dep in dependencies(step):
            add(dep)
        steps[step] = None

    for request in requests:
        target = None if request.target is None else build_target(request.target)
        if target is None:
            continue
        if (request.target is not None and request.target.is_x86_runner
                and runners_src is not None and PIPELINE_FIXTURE in request.fixtures):
            add(Step(RUNNERS, arg=str(runners_src)))
        for fixture, needs in FIXTURE_NEEDS.items():
            if fixture in request.fixtures:
                for need in needs:
                    add(_step(need, request.case, target))
        if request.case is not None and request.target is not None and not request.target.is_emulator:
            for fixture, needs in LOOKAHEAD_NEEDS.items():
                if fixture in request.fixtures:
                    for case in (request.case, *map(request.case.variant,
                                                    lookahead_variant_names(request.case))):
                        for need in needs:
                            add(_step(need, case, target))
        if request.ab_pair is not None and request.case is not None:
            for variant in request.ab_pair:
                add(_variant_step(request.case, variant, target))
            add(_step(LLM_CONFIG, request.case, target))
    # long builds first (a stable partition: no long build depends on a short step, so every
    # dependency stays before its dependents)
    return sorted(steps, key=lambda step: step.kind not in LONG_KINDS)
