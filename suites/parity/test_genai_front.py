"""Legacy (llama.py) against upstream's new flow: genai_pipeline's own model preparation and
quantization on every Hugging Face case, judged beside llama.py's QDQ graph and the staged one.

The three QDQ graphs are fed the same teacher-forced windows (held-out stories, the eval prompt
with fp32's continuation) and held to transformers' fp32 logits (``checks/qdq_windows.py``);
each pair of flows has its own bounds in ``golden/genai/qdq_windows.json``, set from
measurement on the pinned numeric path (``pytest_qnn_genai/isa.py``). Upstream's unadjusted
default path and its compilation stage are strict xfails that name upstream's exact failure,
so a different failure or a fix shows the day it happens. A case genai's loader cannot read (a
llama.2c checkpoint) xfails with the one-line reason.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.checks import parity, perplexity, qdq_windows
from pytest_qnn_genai.checks.negative_control import perturbation_problems
from pytest_qnn_genai.flows import genai_front
from pytest_qnn_genai.flows.genai import GenAIUnavailable, unavailable_reason
from pytest_qnn_genai.golden import no_record
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.genai import genai_qdq, window_rows
from pytest_qnn_genai.pipeline.products import needs

pytestmark = [pytest.mark.parity, pytest.mark.flow("legacy", "new", "genai")]

BOUNDS_DIR, BOUNDS_FILE = "genai", "qdq_windows.json"
ONE_PROMPT = "one-prompt calibration"


class UpstreamDefault(Exception):  # noqa: N818 - the expected upstream failure, not an error
    """Upstream's default path failed exactly as recorded (the strict xfails' ``raises``)."""


def expect_upstream(run: Callable[[], object], stage: str, cause: type[BaseException],
                    pattern: str) -> None:
    """Run ``run``; upstream's ``StageError`` from ``stage`` caused by ``cause`` matching
    ``pattern`` becomes :class:`UpstreamDefault`; any other failure propagates as it is."""
    try:
        run()
    except genai_front.GenAIStageFailed as e:
        if genai_front.is_upstream_failure(e, stage, cause, pattern):
            raise UpstreamDefault(str(e)) from e
        raise


@pytest.fixture(scope="session")
def hf_case(qnn_case):
    """The case, when genai's Hugging Face loader can read it; else xfail with the reason."""
    reason = genai_front.not_huggingface_reason(qnn_case)
    if reason is not None:
        pytest.xfail(reason)
    return qnn_case


@pytest.fixture(scope="session")
def compared_windows(qnn_pipeline, hf_case) -> qdq_windows.Windows:
    """Held-out windows and the eval prompt followed by fp32's greedy continuation."""
    prompt = genai_front.runner_ids(hf_case, hf_case.eval_prompt)
    ref = qnn_pipeline.fp32_reference(hf_case, prompt)
    return qdq_windows.Windows(tuple(perplexity.heldout_documents(hf_case)), tuple(prompt),
                               tuple(ref.tokens))


@pytest.fixture(scope="session")
def fp32_rows(qnn_pipeline, hf_case, compared_windows) -> list[np.ndarray]:
    """transformers' fp32 rows of every window (the independent reference, cached)."""
    return compared_windows.rows([qnn_pipeline.transformers_logits(hf_case, ids)
                                  for ids in compared_windows.ids()])


@pytest.fixture(scope="session")
@needs(products.GENAI_QDQ)
def genai_metrics(qnn_pipeline, hf_case, qnn_target, compared_windows, fp32_rows):
    def of(prompts: tuple[str, ...] | None = None) -> qdq_windows.Metrics:
        entry, qdq = genai_qdq(qnn_pipeline, hf_case, qnn_target, prompts)
        rows = window_rows(qnn_pipeline, hf_case, qdq.graph_path, genai_front.GENAI,
                           compared_windows, (entry.digest,))
        return qdq_windows.metrics(compared_windows, fp32_rows, rows)
    return of


@pytest.fixture(scope="session")
def flow_metrics(qnn_pipeline, hf_case, qnn_target, compared_windows, fp32_rows, legacy_artifacts,
                 genai_metrics) -> dict[str, qdq_windows.Metrics]:
    """legacy's, the staged flow's and genai's QDQ figures against fp32 (the staged flow's
    calibration graph from its quantize stage: no .pte needed)."""
    from pytest_qnn_genai.hybrid import CALIBRATION

    staged = qnn_pipeline.qdq(hf_case, qnn_pipeline.build_target(qnn_target)).path(CALIBRATION)
    out = {name: qdq_windows.metrics(compared_windows, fp32_rows, window_rows(
        qnn_pipeline, hf_case, graph, genai_front.STATIC_LLAMA, compared_windows))
        for name, graph in (("legacy", legacy_artifacts.qdq_graph), ("staged", staged))}
    out["genai"] = genai_metrics()
    return out


def _case_bounds(path: Path, case: str) -> dict[str, dict[str, float]] | None:
    """``case``'s bounds in the file at ``path``; None if the file or its entry is absent."""
    try:
        return qdq_windows.load_bounds(path, case) if path.is_file() else None
    except KeyError:
        return None


@pytest.fixture(scope="session")
def genai_bounds(qnn_settings, hf_case) -> tuple[dict[str, dict[str, float]], str]:
    """The case's pair bounds (golden/genai/qdq_windows.json); a case without them fails as no
    record (golden/no_record.py). The tests ask for it first, so a case without bounds fails
    before the flows are built."""
    source = f"golden/{BOUNDS_DIR}/{BOUNDS_FILE}"
    bounds = _case_bounds(qnn_settings.golden_dir / BOUNDS_DIR / BOUNDS_FILE, hf_case.name)
    if bounds is None:
        pytest.fail(no_record.line(source, f"{hf_case.name}'s genai window bounds",
                                   "set them from the figures this test prints (the docs' gates "
                                   "page, genai_pipeline)"), pytrace=False)
    return bounds, source


def test_genai_qdq_beside_legacy_and_staged(genai_bounds, flow_metrics, hf_case, qnn_target,
                                            parity_table, qnn_record) -> None:
    """Each pair judged by its own bounds: staged vs legacy (the same quantization: identity),
    genai vs legacy (a different one: genai's figures bounded by their measurement)."""
    pair_bounds, source = genai_bounds
    m = flow_metrics
    checks = (qdq_windows.pair_checks("staged vs legacy", m["legacy"], m["staged"],
                                      pair_bounds["staged_vs_legacy"], source)
              + qdq_windows.pair_checks("genai vs legacy", m["legacy"], m["genai"],
                                        pair_bounds["genai_vs_legacy"], source))
    parity_table.add(checks, prefix=f"[{hf_case.name} {qnn_target.id}] ")
    qnn_record("parity", checks)
    print(f"\n{hf_case.name} {qnn_target.id} QDQ vs transformers fp32, teacher-forced windows\n"
          + qdq_windows.table(m))
    assert all(c.ok for c in checks), parity.failures(checks)


def test_perturbed_genai_calibration_fails_its_gate(genai_bounds, genai_metrics, hf_case) -> None:
    """One calibration prompt instead of the case's: KL against fp32 rises and the genai gate
    (the same bounds as the real run's) fails."""
    pair_bounds, source = genai_bounds
    normal = genai_metrics()
    one = genai_metrics(hf_case.calibration_prompts[:1])
    print(f"\n{hf_case.name} genai QDQ, {ONE_PROMPT} beside the case's prompts\n"
          + qdq_windows.table({"case prompts": normal, "one prompt": one}))
    problems = perturbation_problems(normal, one, pair_bounds["genai_vs_legacy"], source,
                                     f"genai ({ONE_PROMPT})")
    assert not problems, "\n".join(problems)


@pytest.mark.xfail(raises=UpstreamDefault, strict=True,
                   reason="genai_pipeline's defaults: the model is loaded with use_cache on and "
                          "torch.export meets a DynamicCache in its output")
def test_unadjusted_default_path(hf_case, qnn_target, tmp_path) -> None:
    expect_upstream(lambda: genai_front.run_unadjusted(hf_case, qnn_target, tmp_path),
                    genai_front.QUANTIZATION, RuntimeError,
                    r"Found <class 'transformers\.cache_utils\.DynamicCache'> in output")


@pytest.mark.xfail(raises=UpstreamDefault, strict=True,
                   reason="genai_pipeline's default calibration adapter yields (input_ids, "
                          "attention_mask) for a graph exported with input_ids alone")
def test_unadjusted_calibration(hf_case, qnn_target, tmp_path) -> None:
    expect_upstream(lambda: genai_front.run_unadjusted(hf_case, qnn_target, tmp_path,
                                                       use_cache_off=True),
                    genai_front.QUANTIZATION, TypeError,
                    r"forward\(\) takes 2 positional arguments but 3 were given")


@pytest.mark.xfail(raises=GenAIUnavailable, strict=True, reason=unavailable_reason())
def test_compilation_of_genai_qdq(qnn_pipeline, hf_case, qnn_target, tmp_path) -> None:
    """genai's compilation stage fed genai's own QDQ module (not the staged flow's)."""
    from pytest_qnn_genai.flows.genai import compile_graph

    _, qdq = genai_qdq(qnn_pipeline, hf_case, qnn_target)
    module = qdq.module()
    example = (genai_front.padded([0], hf_case.max_context_len),)
    paths = compile_graph(module, example, hf_case, qnn_pipeline.build_target(qnn_target),
                          tmp_path)
    assert all(p.is_file() for p in paths)


CONV_RULES_ON_A_LINEAR_GRAPH = (
    "llama.py's StaticLLMQuantRecipe keys its per-channel and block rules on aten.conv2d (after "
    "its linear-to-conv rewrite); genai's Hugging Face graph has aten.linear, so every rule "
    "matches nothing and every linear weight falls to the recipe's default, per-tensor")


@needs(products.GENAI_QDQ)
@pytest.mark.xfail(raises=AssertionError, strict=True, reason=CONV_RULES_ON_A_LINEAR_GRAPH)
def test_genai_graph_carries_the_recipe_it_is_handed(qnn_pipeline, hf_case, qnn_target,
                                                     parity_table, qnn_record) -> None:
    """genai's QDQ graph against the recipe it is handed (``test_recipe_coverage.py``)."""
    from suites.parity.test_recipe_coverage import hold_recipe

    graph = genai_qdq(qnn_pipeline, hf_case, qnn_target)[1].graph_path
    hold_recipe("genai", graph, hf_case, qnn_target, parity_table, qnn_record)
