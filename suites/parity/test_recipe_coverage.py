"""Each flow's QDQ graph against the quantizer recipe it claims (``checks/recipe_coverage.py``):
every rule of the case's ``StaticLLMQuantRecipe`` matches a node of the graph, and no linear or
convolution weight fell to per-tensor where the recipe declares per-channel or block weights; the
weights counted by op, scheme and bit width go to the parity table and the report.

llama.py and the staged flow quantize the rewritten ``static_llama`` graph the recipe was written
for. genai_pipeline's graph is held to upstream's Hugging Face recipe, and to llama.py's recipe
under a strict xfail naming why it reaches nothing there (``test_genai_front.py``).
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import encodings, parity, recipe_coverage
from pytest_qnn_genai.stages.recipe import make_recipe

pytestmark = [pytest.mark.parity]


def hold_coverage(flow, coverage, case, target, table, record) -> None:  # noqa: ANN001
    """``coverage`` of ``flow``'s QDQ graph: the rows into the parity table and the report, a
    failure naming the rules and weights."""
    checks = coverage.checks(flow)
    table.add(checks, prefix=f"[{case.name} {target.id}] ")
    record("parity", checks)
    print("\n".join(f"{c.check}: {c.delta}" for c in checks))
    assert all(c.ok for c in checks), parity.failures(checks)


def hold_recipe(flow, graph, case, target, table, record) -> None:  # noqa: ANN001
    """``case``'s llama.py recipe on ``flow``'s QDQ ``graph`` (:func:`hold_coverage`)."""
    hold_coverage(flow, recipe_coverage.coverage(make_recipe(case).recipe,
                                                 encodings.load_qdq(graph)),
                  case, target, table, record)


@pytest.mark.flow("legacy")
def test_llama_py_graph_carries_its_recipe(legacy_artifacts, qnn_case, qnn_target, parity_table,
                                           qnn_record) -> None:
    hold_recipe("legacy", legacy_artifacts.qdq_graph, qnn_case, qnn_target, parity_table, qnn_record)


@pytest.mark.flow("new")
def test_staged_graph_carries_its_recipe(new_artifacts, qnn_case, qnn_target, parity_table,
                                         qnn_record) -> None:
    hold_recipe("staged", new_artifacts.qdq_graph, qnn_case, qnn_target, parity_table, qnn_record)
