"""The build plan: a walk of the product graph from what the items' fixtures declare,
dependencies first, long builds first, nothing else."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.pipeline import products as p
from pytest_qnn_genai.pipeline.products import Need, Per, Product, Wants
from pytest_qnn_genai.prebuild.plan import Request, plan
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc

SM8650 = Target(soc("SM8650"))
X86 = Target(soc("SM8650"), device=X86_RUNNER)
STORIES = available()["stories260k"]
LLAMA3 = available()["llama3_2_toy"]


def on(case, target=SM8650, *wants: str | Wants, pair=None) -> Request:  # noqa: ANN001
    return Request(tuple(w if isinstance(w, Wants) else Wants(w) for w in wants), case, target,
                   pair)


def quantize(case) -> Need:  # noqa: ANN001
    return Need(p.QUANTIZE, case if isinstance(case, str) else case.name, "SM8650", "htp")


def flow(name: str, case) -> Need:  # noqa: ANN001
    return Need(name, case if isinstance(case, str) else case.name, "SM8650", "htp")


def test_a_flow_built_from_the_qdq_graphs_comes_after_quantize() -> None:
    assert plan([on(STORIES, SM8650, "new")]) == [quantize(STORIES), flow("new", STORIES)]


def test_genai_needs_nothing_first() -> None:
    """genai_pipeline quantizes in its own pipeline: its build reads no quantize product."""
    assert plan([on(STORIES, SM8650, "genai")]) == [flow("genai", STORIES)]


def test_legacy_needs_nothing_first_and_builds_in_a_subprocess() -> None:
    (legacy,) = plan([on(STORIES, SM8650, "legacy")])
    assert legacy == flow("legacy", STORIES) and legacy.in_subprocess
    assert not quantize(STORIES).in_subprocess and not flow("new", STORIES).in_subprocess


def test_each_entry_once_long_builds_first_each_group_in_first_need_order() -> None:
    """The config a run reads takes seconds: it comes after every build of minutes (else the
    one in-process lane spends them on it first, and the longest chain ends later)."""
    needs = plan([on(LLAMA3, SM8650, "new"), on(STORIES, SM8650, "legacy"),
                  on(LLAMA3, SM8650, "new", p.LLM_CONFIG, "legacy"),
                  on(STORIES, SM8650, "new")])
    assert needs == [quantize(LLAMA3), flow("new", LLAMA3), flow("legacy", STORIES),
                     flow("legacy", LLAMA3), quantize(STORIES), flow("new", STORIES),
                     Need(p.LLM_CONFIG, LLAMA3.name)]


def test_references_follow_what_they_are_built_from() -> None:
    needs = plan([on(STORIES, SM8650, p.QDQ_LOGITS, p.TRANSFORMERS_LOGITS)])
    assert needs == [quantize(STORIES), Need(p.FP32_REFERENCE, STORIES.name),
                     Need(p.QDQ_LOGITS, STORIES.name, "SM8650", "htp"),
                     Need(p.TRANSFORMERS_LOGITS, STORIES.name)]


def test_the_heldout_windows_logits_are_planned_the_qdq_ones_after_quantize() -> None:
    """Each window's fp32 logits (per case) and QDQ logits (per case and build target; the
    x86 runners' are the emulator's)."""
    for target in (SM8650, X86):
        assert plan([on(STORIES, target, Wants(p.FP32_LOGITS, p.HELDOUT),
                        Wants(p.QDQ_LOGITS, p.HELDOUT))]) == [
            quantize(STORIES), Need(p.FP32_LOGITS, STORIES.name, arg=p.HELDOUT),
            Need(p.QDQ_LOGITS, STORIES.name, "SM8650", "htp", p.HELDOUT)]


def test_a_narrowed_selection_plans_only_its_own_builds() -> None:
    assert plan([on(None, SM8650, Wants(p.SMOKE, "fp16"))]) == [
        Need(p.SMOKE, soc="SM8650", backend="htp", arg="fp16")]
    assert {n.case for n in plan([on(STORIES, SM8650, "new", "legacy")])} == {STORIES.name}
    assert plan([on(STORIES, SM8650)]) == []
    assert plan([on(None, SM8650, p.QUANTIZE)]) == []  # a per-case product, no case


def test_a_phone_targets_builds_are_never_planned() -> None:
    """Its builds depend on what the phone runs (asked only when a test starts it)."""
    phone = Target(soc("SM8650"), device="R5CX1234")
    assert plan([on(STORIES, phone, "new", "legacy", Wants(p.SMOKE, "16a8w"),
                    Wants(p.RUNNERS))], runners_src=Path("/src/executorch")) == []


def test_upstreams_x86_runners_get_the_emulators_builds_and_the_runners() -> None:
    src = Path("/src/executorch")
    runners = Wants(p.RUNNERS, where=lambda t: t.is_x86_runner)
    needs = plan([on(STORIES, X86, runners, "new", p.LLM_CONFIG)], runners_src=src)
    assert needs == [Need(p.RUNNERS, arg=str(src)), quantize(STORIES), flow("new", STORIES),
                     Need(p.LLM_CONFIG, STORIES.name)]
    assert needs[0].in_subprocess and needs[0].label == f"runners-build {src}"
    assert plan([on(STORIES, SM8650, runners)], runners_src=src) == []  # where: not here
    assert plan([on(STORIES, X86, runners)]) == []  # a prebuilt --runner: nothing to build


def test_a_declaration_narrows_to_targets_and_widens_to_variants() -> None:
    """``where`` and ``cases``, as the lookahead test declares its builds."""
    ahead = f"{STORIES.name}@lookahead"
    wants = Wants("legacy", where=lambda t: not t.is_emulator,
                  cases=lambda c: [c, c.variant("lookahead")])
    assert plan([on(STORIES, X86, wants)]) == [flow("legacy", STORIES), flow("legacy", ahead)]
    assert plan([on(STORIES, SM8650, wants)]) == []


def test_ab_pairs_plan_both_sides_and_nothing_for_a_pair_the_case_lacks() -> None:
    """A pair whose side the case does not declare skips, so none of it is built (the nightly's
    ``ar8:new`` on ``smollm2_135m`` planned that case's ``.pte`` for a skipped test)."""
    needs = plan([on(STORIES, SM8650, pair=("ar8", "new"))])
    ar8 = f"{STORIES.name}@ar8"
    assert needs == [quantize(ar8), flow("new", ar8), quantize(STORIES), flow("new", STORIES),
                     Need(p.LLM_CONFIG, STORIES.name)]
    assert plan([on(STORIES, SM8650, pair=("legacy", "nope"))]) == []
    assert plan([on(STORIES, SM8650, pair=("nope", "new"))]) == []


def test_needs_travel_as_json_and_name_their_product() -> None:
    need = flow("legacy", STORIES)
    assert Need.from_dict(need.to_dict()) == need
    assert need.label == "legacy stories260k SM8650-htp"
    assert Need(p.QDQ_LOGITS, "a", "SM8650", "htp", p.HELDOUT).label == \
        "qdq-logits heldout a SM8650-htp"
    with pytest.raises(p.UnknownProductError, match="unknown product 'compile'; products: "):
        p.get("compile")


def test_a_registered_product_is_planned_after_what_it_is_built_from() -> None:
    """Adding a product is one table entry: the plan walks it like the harness's own."""
    dummy = Product("dummy-after-new", Per.CASE_TARGET, "tests.nowhere:make",
                    built_from=lambda need: (need.on(product="new"),))
    p.register(dummy)
    try:
        assert plan([on(STORIES, SM8650, "dummy-after-new")]) == [
            quantize(STORIES), flow("new", STORIES),
            Need("dummy-after-new", STORIES.name, "SM8650", "htp")]
        assert p.registered_modules() == ["tests.nowhere"]
        with pytest.raises(ValueError, match="the harness's own"):
            p.register(Product(p.QUANTIZE, Per.CASE, "x:y"))
    finally:
        p.unregister("dummy-after-new")


def test_every_product_names_a_make_function_and_code_that_exists() -> None:
    """The table's own consistency: each make resolves, each code module imports, each
    ``built_from`` names products of the table."""
    import importlib

    for product in p.table().values():
        if product.make:
            assert callable(product.maker()), product.name
        else:
            with pytest.raises(p.UnknownProductError, match="built only by the tests"):
                plan([on(STORIES, SM8650, product.name)])
        for module in product.code:
            importlib.import_module(module)
        need = Need(product.name, STORIES.name, "SM8650", "htp", "new")
        for dep in product.built_from(need):
            p.get(dep.product)
