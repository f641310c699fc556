"""Gate-suite fixtures: references derived from the pipeline's cached stages."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.products import needs
from pytest_qnn_genai.stages.reference import Reference


@pytest.fixture(scope="session")
@needs(products.FP32_REFERENCE)
def fp32_reference(qnn_pipeline, qnn_case, qnn_run) -> Reference:
    """The fp32 model's greedy continuation of the same prompt tokens the emulator ran."""
    return qnn_pipeline.fp32_reference(qnn_case, qnn_run.prompt_tokens)


@pytest.fixture(scope="session")
@needs(products.QDQ_LOGITS)
def qdq_on_fp32_tokens(qnn_pipeline, qnn_case, qnn_target, fp32_reference):
    """QDQ logits, teacher-forced on the fp32 continuation."""
    return qnn_pipeline.qdq_logits(qnn_case, qnn_target, fp32_reference.prompt_tokens,
                                   fp32_reference.tokens)


@pytest.fixture(scope="session")
def qdq_on_run_tokens(qnn_pipeline, qnn_case, qnn_target, qnn_run):
    """QDQ logits, teacher-forced on the tokens the target generated."""
    return qnn_pipeline.qdq_logits(qnn_case, qnn_target, qnn_run.prompt_tokens, qnn_run.tokens)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the items of a module that says where it applies (``APPLIES(case, target)``:
    upstream's CI job, :func:`~pytest_qnn_genai.checks.upstream_specs.runs_upstream_ci`; the
    other judged prompts, a case that names some) everywhere else: nothing to run there, so
    nothing is reported, not even a skip."""
    dropped = []
    for item in items:
        applies = getattr(getattr(item, "module", None), "APPLIES", None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if applies is not None and not applies(params["qnn_case"], params["qnn_target"]):
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]
