"""suites/parity ``genai_bounds`` in a pytest run: a bounds file that lacks the case, or no file,
fails in one "no record" line (golden/no_record.py), not with a KeyError's traceback; a case that
has them gets them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from suites.parity.conftest import BOUNDS_DIR, BOUNDS_FILE

pytestmark = pytest.mark.usefixtures("qnn_env")

BOUNDS_TEST = """
from suites.parity.conftest import genai_bounds, hf_case  # noqa: F401 (fixtures)


def test_bounds(genai_bounds):
    bounds, source = genai_bounds
    assert bounds["genai_vs_legacy"]["min_sqnr_db"] == 13.0, bounds
"""
ARGS = ("-p", "no:cacheprovider", "-p", "no:xdist", "--no-qnn-prebuild", "--models",
        "qwen3_toy", "--qnn-golden-dir", "golden")
PAIR = {"staged_vs_legacy": {"max_sqnr_db_drop": 0.0}, "genai_vs_legacy": {"min_sqnr_db": 13.0}}


def _write(pytester: pytest.Pytester, data: dict[str, object]) -> Path:
    path = pytester.path / "golden" / BOUNDS_DIR / BOUNDS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_a_case_without_bounds_fails_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(BOUNDS_TEST)
    own = _write(pytester, {"llama3_2_toy": PAIR})  # the file, without the case

    absent = pytester.runpytest(*ARGS)
    absent.assert_outcomes(errors=1)
    absent.stdout.fnmatch_lines([
        "golden/genai/qdq_windows.json: no record of qwen3_toy's genai window bounds: set them "
        "from the figures this test prints (the docs' gates page, genai_pipeline)"])
    assert "Traceback" not in absent.stdout.str() and "KeyError" not in absent.stdout.str()

    own.unlink()  # no file at all
    pytester.runpytest(*ARGS).stdout.fnmatch_lines(["*no record of qwen3_toy's genai window*"])

    _write(pytester, {"qwen3_toy": PAIR})  # the case's own: the test gets them
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)
