"""A product added through the table alone: one ``register`` call with its ``make``, one fixture
that declares it. The prebuild plans it from the fixture's declaration and builds it in its own
process (which imports the registering module), for a model case from outside the package
(``--qnn-cases``: the prebuild reads the session's own settings), and the test finds a hit."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_qnn_genai.models import registry

PRODUCTS = """
from pytest_qnn_genai.pipeline.products import Per, Product, register


def make(pipeline, build):
    case = build.require_case()
    return pipeline.entry(
        "word-count", {"case": case.build_fingerprint(), "prompt": case.eval_prompt},
        lambda out: (out / "words.txt").write_text(str(len(case.eval_prompt.split()))),
        label=case.name)


register(Product("word-count", Per.CASE, "word_products:make",
                 code=("pytest_qnn_genai.files",)))
"""
CONFTEST = """
import pytest

import word_products  # registers the product
from pytest_qnn_genai.pipeline.products import needs
from pytest_qnn_genai.plugin.session import session_of


@pytest.fixture(scope="session", autouse=True)
def prebuilt_first(request):
    process = session_of(request.config).prebuild
    assert process is not None, "no prebuild process was started"
    assert process.wait(600), "the prebuild did not finish"


@pytest.fixture(scope="session")
@needs("word-count")
def word_count(qnn_pipeline, qnn_case):
    return int(qnn_pipeline.make("word-count", qnn_case).file("words.txt").read_text())
"""
TEST = """
def test_counts_the_prompt(word_count, qnn_case, qnn_cache):
    assert qnn_case.name == "outside1" and not qnn_case.packaged
    assert word_count == len(qnn_case.eval_prompt.split())
    assert (qnn_cache.stats.builds, qnn_cache.stats.hits) == (0, 1), qnn_cache.stats
"""


def _outside_case(root: Path) -> Path:
    """stories260k's files as a case of the user's own, named ``outside1``."""
    folder = root / "cases" / "outside1"
    shutil.copytree(registry.available()["stories260k"].folder, folder)
    spec = json.loads((folder / "case.json").read_text())
    (folder / "case.json").write_text(json.dumps({**spec, "name": "outside1",
                                                  "eval_prompt": "One two three four"}))
    return root / "cases"


@pytest.mark.usefixtures("qnn_env")
def test_a_product_added_through_the_table_is_planned_and_built_ahead(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(word_products=PRODUCTS, test_words=TEST)
    pytester.makeconftest(CONFTEST)
    cases = _outside_case(tmp_path)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--soc", "SM8650",
        "--qnn-cases", str(cases), "--models", "outside1", timeout=600)
    result.assert_outcomes(passed=1)
    errors = "\n".join(result.errlines)
    assert "[qnn-genai] prebuild: 1 cache entries the selected tests need" in errors, errors
    assert "[qnn-genai] prebuild word-count outside1: done" in errors, errors
    assert "[qnn-genai] prebuild: 1 built in" in errors, errors
    assert "[qnn-genai] build " not in errors  # the test built nothing itself


@pytest.mark.usefixtures("qnn_env")
def test_without_the_declaration_the_test_builds_it_itself(pytester: pytest.Pytester,
                                                           tmp_path: Path) -> None:
    """The same fixture without ``@needs``: nothing is planned, the test builds the entry (what
    the declaration is for)."""
    pytester.makepyfile(word_products=PRODUCTS, test_words=TEST.replace("(0, 1)", "(1, 0)"))
    pytester.makeconftest(CONFTEST.replace('@needs("word-count")\n', "").replace(
        "process is not None", "process is None").replace(
        'assert process.wait(600), "the prebuild did not finish"', ""))
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--soc", "SM8650",
        "--qnn-cases", str(_outside_case(tmp_path)), "--models", "outside1", timeout=600)
    result.assert_outcomes(passed=1)
    errors = "\n".join(result.errlines)
    assert "prebuild" not in errors, errors
    assert "[qnn-genai] build word-count outside1: done" in errors, errors
