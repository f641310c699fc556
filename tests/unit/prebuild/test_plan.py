"""The build plan: what the selected items need, dependencies first, nothing else."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.prebuild import plan as p
from pytest_qnn_genai.prebuild.plan import Request, Step
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc

SM8650 = Target(soc("SM8650"))
STORIES = available()["stories260k"]
LLAMA3 = available()["llama3_2_toy"]


def on(case, target=SM8650, *fixtures: str, pair=None) -> Request:  # noqa: ANN001
    return Request(frozenset(fixtures), case, target, pair)


def quantize(case, target=SM8650) -> Step:  # noqa: ANN001
    return Step(p.QUANTIZE, case.name, target.soc.name, target.backend)


def flow(name: str, case, target=SM8650) -> Step:  # noqa: ANN001
    return Step(p.FLOW, case.name, target.soc.name, target.backend, name)


def test_a_flow_built_from_the_qdq_graphs_comes_after_quantize() -> None:
    assert p.plan([on(STORIES, SM8650, "qnn_pte")]) == [quantize(STORIES), flow("new", STORIES)]
    assert p.plan([on(STORIES, SM8650, "genai_artifacts")]) == [quantize(STORIES),
                                                                flow("genai", STORIES)]


def test_legacy_needs_nothing_first_and_builds_in_a_subprocess() -> None:
    (legacy,) = p.plan([on(STORIES, SM8650, "legacy_artifacts")])
    assert legacy == flow("legacy", STORIES) and legacy.in_subprocess
    assert not quantize(STORIES).in_subprocess and not flow("new", STORIES).in_subprocess


def test_each_entry_once_long_builds_first_each_group_in_first_need_order() -> None:
    """The config a run reads takes seconds: it comes after every build of minutes (else the
    one in-process lane spends them on it first, and the longest chain ends later)."""
    steps = p.plan([on(LLAMA3, SM8650, "qnn_pte"), on(STORIES, SM8650, "legacy_artifacts"),
                    on(LLAMA3, SM8650, "qnn_run", "legacy_artifacts"),
                    on(STORIES, SM8650, "qnn_pte")])
    assert steps == [quantize(LLAMA3), flow("new", LLAMA3), flow("legacy", STORIES),
                     flow("legacy", LLAMA3), quantize(STORIES), flow("new", STORIES),
                     Step(p.LLM_CONFIG, LLAMA3.name)]


def test_references_follow_what_they_read() -> None:
    steps = p.plan([on(STORIES, SM8650, "qdq_on_fp32_tokens", "transformers_logits")])
    assert steps == [quantize(STORIES), Step(p.FP32_REFERENCE, STORIES.name),
                     Step(p.QDQ_LOGITS, STORIES.name, "SM8650", "htp"),
                     Step(p.TRANSFORMERS_LOGITS, STORIES.name)]


def test_the_heldout_windows_logits_are_planned_the_qdq_ones_after_quantize() -> None:
    """suites/conftest.py's held-out fixtures: each window's fp32 logits (per case) and QDQ
    logits (per case and build target); without the plan entries the tests build them at the
    end of a cold run, one window after another."""
    x86 = Target(soc("SM8650"), device=X86_RUNNER)
    for target in (SM8650, x86):
        assert p.plan([on(STORIES, target, "heldout_fp32", "heldout_qdq")]) == [
            quantize(STORIES), Step(p.HELDOUT_FP32, STORIES.name),
            Step(p.HELDOUT_QDQ, STORIES.name, "SM8650", "htp")]


def test_a_narrowed_selection_plans_only_its_own_builds() -> None:
    """``-k smoke`` / ``--models`` narrowing: only the selected items' entries."""
    assert p.plan([Request(frozenset({"block_fp16", "qnn_pipeline"}), None, SM8650)]) == [
        Step(p.SMOKE, soc="SM8650", backend="htp", arg="fp16")]
    assert {s.case for s in p.plan([on(STORIES, SM8650, "qnn_pte", "legacy_artifacts")])} == {
        STORIES.name}
    assert p.plan([on(STORIES, SM8650, "qnn_settings", "qnn_case")]) == []


def test_a_phone_targets_builds_are_never_planned() -> None:
    """Its builds depend on what the phone runs (asked only when a test starts it)."""
    phone = Target(soc("SM8650"), device="R5CX1234")
    assert p.plan([on(STORIES, phone, "qnn_run", "legacy_artifacts", "block_16a8w",
                      "qnn_pipeline")], runners_src=Path("/src/executorch")) == []


def test_upstreams_x86_runners_get_the_emulators_builds_and_the_runners() -> None:
    x86 = Target(soc("SM8650"), device=X86_RUNNER)
    src = Path("/src/executorch")
    steps = p.plan([on(STORIES, x86, "qnn_pipeline", "qnn_run")], runners_src=src)
    assert steps == [Step(p.RUNNERS, arg=str(src)), quantize(STORIES), flow("new", STORIES),
                     Step(p.LLM_CONFIG, STORIES.name)]
    assert steps[0].in_subprocess
    # a prebuilt --runner (no source tree): nothing to build for the runners
    assert Step(p.RUNNERS, arg=str(src)) not in p.plan([on(STORIES, x86, "qnn_pipeline")])


def test_lookahead_builds_are_planned_where_they_are_decoded_and_declared() -> None:
    """Each flow's build of the case's lookahead variant and of the case itself, on upstream's
    x86 runners; nothing on the emulator (the test skips there) or for a case declaring none."""
    x86 = Target(soc("SM8650"), device=X86_RUNNER)
    ahead = f"{STORIES.name}@lookahead"
    assert p.lookahead_variant_names(STORIES) == ("lookahead",)
    assert not p.lookahead_variant_names(LLAMA3)
    steps = p.plan([on(STORIES, x86, "lookahead_cases")])
    assert steps == [flow("legacy", STORIES), quantize(STORIES), flow("new", STORIES),
                     Step(p.FLOW, ahead, "SM8650", "htp", "legacy"),
                     Step(p.QUANTIZE, ahead, "SM8650", "htp"),
                     Step(p.FLOW, ahead, "SM8650", "htp", "new")]
    assert p.plan([on(STORIES, SM8650, "lookahead_cases")]) == []
    assert p.plan([on(LLAMA3, x86, "lookahead_cases")]) == [flow("legacy", LLAMA3),
                                                            quantize(LLAMA3), flow("new", LLAMA3)]


def test_ab_pairs_plan_both_sides_and_skip_undeclared_variants() -> None:
    steps = p.plan([on(STORIES, SM8650, "qnn_pipeline", pair=("ar8", "new"))])
    ar8 = f"{STORIES.name}@ar8"
    assert steps == [Step(p.QUANTIZE, ar8, "SM8650", "htp"), Step(p.FLOW, ar8, "SM8650", "htp", "new"),
                     quantize(STORIES), flow("new", STORIES), Step(p.LLM_CONFIG, STORIES.name)]
    assert p.plan([on(STORIES, SM8650, pair=("legacy", "nope"))]) == [
        flow("legacy", STORIES), Step(p.LLM_CONFIG, STORIES.name)]


def test_steps_travel_as_json_and_refuse_unknown_kinds() -> None:
    step = flow("legacy", STORIES)
    assert Step.from_dict(step.to_dict()) == step
    assert step.label == "flow legacy stories260k SM8650-htp"
    with pytest.raises(ValueError, match="unknown prebuild step kind 'compile'"):
        Step("compile", "stories260k")
