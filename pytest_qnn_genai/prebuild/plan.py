"""Which products the selected tests will ask for, in the order to build them ahead: a walk of
the product graph (:mod:`pytest_qnn_genai.pipeline.products`) from what their fixtures declare.

Pytest-free. The plugin describes each selected, not-skipped item as a :class:`Request`: what the
fixtures of its closure declare they get (``products.needs``), its model case and target, and its
A/B pair. :func:`plan` turns the requests into needs, each one product's entries that the
prebuild process builds through the same :class:`~pytest_qnn_genai.pipeline.Pipeline` the tests
use: what a product is built from before it (quantize before the flows built from its graphs and
the QDQ references), the long products (minutes each: quantize, the flows, the runners) before
the short ones (seconds each: references, logits, smoke blocks, configs), each group in the order
the items first need them (the order they run in). Hazard: in first-need order the prebuild's one
in-process lane spends minutes on references before a variant's quantize, whose compile then runs
alone at the end of a cold gate with a core idle; a short entry a test needs before the prebuild
reaches it is built by that test, on its own worker.

Nothing a run will not use is planned:

- only the selected items count (``-k``, ``-m``, ``--models``, skip marks are applied first);
- only targets whose builds are known before any device is asked
  (:func:`~pytest_qnn_genai.targets.known_build_target`: the emulator, and upstream's x86 runners,
  which run the emulator's builds); a phone's builds depend on what the phone runs;
- a declaration's ``where`` and ``cases`` narrow it (the lookahead builds: upstream's runners
  only, for the variants a case declares); an A/B variant the case does not declare (its test
  skips) is not planned.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.products import Need, Wants, need_for
from pytest_qnn_genai.targets import Target, known_build_target


@dataclass(frozen=True)
class Request:
    """One selected item, as the plan needs it."""

    wants: tuple[Wants, ...]
    case: ModelCase | None = None
    target: Target | None = None
    ab_pair: tuple[str, str] | None = None


def dependencies(need: Need) -> tuple[Need, ...]:
    """The needs whose entries ``need``'s build reads (they are planned before it)."""
    return products.get(need.product).built_from(need)


def _variant_need(case: ModelCase, variant: str, target: Target) -> Need | None:
    """The build of one side of an A/B pair (``Pipeline.variant_pte``)."""
    if variant == "legacy":
        return need_for("legacy", case, target)
    return need_for("new", case if variant == "new" else case.variant(variant), target)


def plan(requests: Iterable[Request], runners_src: Path | None = None) -> list[Need]:
    """Every need the requests make, each once, what it is built from before it, long builds
    before short ones, otherwise in first-need order. ``runners_src``: the tree upstream's x86
    runners are built from (None: they are not built this session, e.g. a prebuilt
    ``--runner``)."""
    found: dict[Need, None] = {}

    def add(need: Need | None) -> None:
        if need is None or need in found:
            return
        products.get(need.product).check_built_ahead()
        for dep in dependencies(need):
            add(dep)
        found[need] = None

    for request in requests:
        target = None if request.target is None else known_build_target(request.target)
        if request.target is not None and target is None:
            continue  # a phone
        for want in request.wants:
            if want.where is not None and (request.target is None
                                           or not want.where(request.target)):
                continue
            cases = ([request.case] if want.cases is None or request.case is None
                     else list(want.cases(request.case)))
            for case in cases:
                add(need_for(want.product, case, target, want.arg, runners_src))
        if request.ab_pair is not None and request.case is not None and target is not None \
                and set(request.ab_pair) <= set(request.case.variant_names):
            # (a pair with a side the case does not declare skips: nothing of it is built)
            for variant in request.ab_pair:
                add(_variant_need(request.case, variant, target))
            add(need_for(products.LLM_CONFIG, request.case, target))
    # long builds first (a stable partition: no long build is built from a short one, so every
    # dependency stays before its dependents)
    return sorted(found, key=lambda need: not need.long)
