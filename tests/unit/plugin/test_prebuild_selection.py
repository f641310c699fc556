"""The plan the plugin computes from the real suites' selected items (collection only: no
builds, no prebuild process under ``--collect-only``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("qnn_env")

ROOT = Path(__file__).resolve().parents[3]
PRINT_PLAN = """
import json
from pytest_qnn_genai.plugin.prebuild import session_plan
from pytest_qnn_genai.plugin.session import session_of

def pytest_collection_finish(session):
    steps = session_plan(session_of(session.config).settings, session.items)
    print("PLAN=" + json.dumps([s.label for s in steps]))
"""


def _plan(pytester: pytest.Pytester, *args: str) -> list[str]:
    pytester.makepyfile(print_plan=PRINT_PLAN)
    result = pytester.runpytest_subprocess("--co", "-q", "-p", "print_plan", "-p", "no:randomly",
                                           "-p", "no:cacheprovider", str(ROOT / "suites"),
                                           "--soc", "SM8650", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert not [x for x in result.errlines if "prebuild" in x]  # --co starts nothing
    line = next(x for x in result.outlines if x.startswith("PLAN="))
    return json.loads(line.removeprefix("PLAN="))


def test_narrowed_by_models_and_k_the_plan_holds_only_what_those_tests_need(
        pytester: pytest.Pytester) -> None:
    assert _plan(pytester, "--models", "stories260k", "-k", "test_pte_program") == [
        "quantize stories260k SM8650-htp", "new stories260k SM8650-htp"]
    assert _plan(pytester, "-k", "smoke and emulator") == [
        "smoke-lower 16a8w SM8650-htp", "smoke-lower fp16 SM8650-htp"]


def test_the_gate_plans_every_cases_builds_once(pytester: pytest.Pytester) -> None:
    from pytest_qnn_genai.models import registry

    steps = _plan(pytester)
    cases = [c.name for c in registry.select([])]  # the default tier: no nightly case
    assert len(cases) < len(registry.available())
    assert not [s for s in steps if "smollm2_135m" in s]
    assert len(steps) == len(set(steps))
    for case in cases:
        for step in ("quantize", "new", "legacy", "genai", "qdq-logits",
                     "qdq-logits heldout"):
            assert f"{step} {case} SM8650-htp" in steps, (step, case, steps)
        for after in ("new", "qdq-logits heldout"):
            assert steps.index(f"quantize {case} SM8650-htp") < steps.index(
                f"{after} {case} SM8650-htp")
        assert {f"llm-config {case}", f"fp32-reference {case}",
                f"transformers-logits {case}", f"fp32-logits heldout {case}"} <= set(steps)
    assert {"smoke-lower 16a8w SM8650-htp", "smoke-lower fp16 SM8650-htp"} <= set(steps)
    # no other SoC, no variant the default --qnn-ab (legacy:new) does not name, no runners
    # (their x86-runner items are skipped without --executorch-src)
    assert not [s for s in steps if "SM8750" in s or "@" in s or s.startswith("runners")]
    assert len(steps) == len(cases) * 10 + 2
    # the builds of minutes first (quantize, flows): the one in-process lane starts every long
    # chain before it spends time on references and logits a test may build itself
    long = [i for i, step in enumerate(steps)
            if step.split()[0] in ("quantize", "new", "legacy", "genai")]
    assert long == list(range(len(long))), steps


def test_the_lookahead_test_plans_its_builds_on_upstreams_runners(pytester: pytest.Pytester,
                                                                  tmp_path: Path) -> None:
    """The real perf suite's lookahead fixtures declare their builds: with a source tree for the
    runners, its x86-runner items plan the staged flow's lookahead build, and llama.py's only
    with ``--nightly`` (its test is nightly's; else the test builds them itself, one after
    another, after every planned build)."""
    from pytest_qnn_genai.runners.sources import ALL_SOURCES

    for rel in ALL_SOURCES:  # a tree the option accepts; collection reads none of it
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).touch()
    args = ("--models", "stories260k", "-k", "lookahead", "--executorch-src", str(tmp_path))
    steps = _plan(pytester, *args)
    ahead = "stories260k@lookahead SM8650-htp"
    assert {f"quantize {ahead}", f"new {ahead}"} <= set(steps)
    assert steps.index(f"quantize {ahead}") < steps.index(f"new {ahead}")
    assert not [s for s in steps if s.startswith("legacy ")], steps
    nightly = _plan(pytester, *args, "--nightly")
    assert {f"legacy {ahead}", "legacy stories260k SM8650-htp"} <= set(nightly)


def test_the_nightlys_variant_pairs_are_valid_for_a_case_that_declares_none(
        pytester: pytest.Pytester) -> None:
    """``make nightly MODELS=smollm2_135m`` passes the nightly's pairs ``ar8:new`` and
    ``kv16:new`` to a case that declares neither (it was a usage error): they collect, their
    items skip, and nothing is built for them; a misspelt variant is still one line."""
    pairs = ("--qnn-ab", "ar8:new", "--qnn-ab", "kv16:new")
    # (_plan fails on exit 5: the pairs' items of smollm2_135m are collected)
    assert _plan(pytester, "--nightly", "--models", "smollm2_135m", *pairs,
                 "-k", "relative_gate or accuracy_deltas") == []
    assert "new stories260k@ar8 SM8650-htp" in _plan(
        pytester, "--models", "stories260k", *pairs, "-k", "relative_gate")
    bad = pytester.runpytest_subprocess("--co", "-q", "-p", "no:cacheprovider",
                                        str(ROOT / "suites"), "--models", "smollm2_135m",
                                        "--qnn-ab", "ar9:new")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in bad.errlines if x.strip()]
    assert line.startswith("ERROR: --qnn-ab: no model case has a variant 'ar9'; variants: "
                           "legacy, new, ar8, kv16"), line


def test_a_module_that_says_where_it_applies_is_deselected_elsewhere(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``APPLIES(case, target)`` (suites/gate/conftest.py): the judged-prompts test exists for a
    case that names other prompts, on every target, and nowhere else, not even as a skip."""
    from pytest_qnn_genai.runners.sources import ALL_SOURCES

    for rel in ALL_SOURCES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")

    def ids(*args: str) -> list[str]:
        result = pytester.runpytest_subprocess(
            "--co", "-q", "-p", "no:cacheprovider", str(ROOT / "suites" / "gate"), "--soc",
            "SM8650", "--executorch-src", str(tmp_path), "-k", "judged_prompt or upstream_ci",
            *args)
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        return [x.split("::")[1] for x in result.outlines if "::" in x]

    assert ids("--models", "stories260k") == []
    got = ids("--models", "smollm2_135m")
    assert sorted(got) == sorted([
        "test_target_runs_the_qdq_graph_on_each_judged_prompt[smollm2_135m-SM8650-htp-emulator]",
        "test_target_runs_the_qdq_graph_on_each_judged_prompt[smollm2_135m-SM8650-htp-x86-runner]",
        "test_upstream_ci_job[smollm2_135m-SM8650-htp-x86-runner]"]), got
