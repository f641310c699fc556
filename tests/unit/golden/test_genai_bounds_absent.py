"""suites/parity ``genai_bounds`` in a pytest run: a CPU kind whose bounds file lacks the case,
or has no file, fails in one line naming the kinds that have the case's bounds (golden/per_cpu.py),
not with a KeyError's traceback; a kind that has them gets them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_qnn_genai import cpu
from pytest_qnn_genai.golden import per_cpu
from suites.parity.test_genai_front import BOUNDS_DIR, BOUNDS_FILE

pytestmark = pytest.mark.usefixtures("qnn_env")

BOUNDS_TEST = """
from suites.parity.test_genai_front import genai_bounds, hf_case  # noqa: F401 (fixtures)


def test_bounds(genai_bounds):
    bounds, source = genai_bounds
    assert bounds["genai_vs_legacy"]["min_sqnr_db"] == 13.0, bounds
"""
ARGS = ("-p", "no:cacheprovider", "-p", "no:xdist", "--no-qnn-prebuild", "--models",
        "qwen3_toy", "--qnn-golden-dir", "golden")
PAIR = {"staged_vs_legacy": {"max_sqnr_db_drop": 0.0}, "genai_vs_legacy": {"min_sqnr_db": 13.0}}


def _write(pytester: pytest.Pytester, kind: str, data: dict[str, object]) -> Path:
    path = per_cpu.path_for(pytester.path / "golden", BOUNDS_DIR, kind, BOUNDS_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_a_kind_without_the_cases_bounds_fails_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(BOUNDS_TEST)
    slug = cpu.kind().slug
    _write(pytester, "other-cpu-avx2", {"qwen3_toy": PAIR})
    own = _write(pytester, slug, {"llama3_2_toy": PAIR})  # this kind's file, without the case

    absent = pytester.runpytest(*ARGS)
    absent.assert_outcomes(errors=1)
    absent.stdout.fnmatch_lines([
        f"golden/genai/{slug}/qdq_windows.json: no measured bounds of qwen3_toy's genai windows "
        f"on this CPU kind ({cpu.kind().label}); recorded on other-cpu-avx2, whose figures are "
        "not this kind's: set them from this kind's figures (the docs' gates page, "
        "genai_pipeline)"])
    assert "Traceback" not in absent.stdout.str() and "KeyError" not in absent.stdout.str()

    own.unlink()  # no file at all
    pytester.runpytest(*ARGS).stdout.fnmatch_lines(["*no measured bounds of qwen3_toy's*"
                                                    "recorded on other-cpu-avx2*"])

    _write(pytester, slug, {"qwen3_toy": PAIR})  # this kind's own: the test gets them
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)
