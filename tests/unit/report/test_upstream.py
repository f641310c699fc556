"""The report beside upstream: smollm2_135m's figures next to upstream's own ``LlmSpecs`` entry,
read from the installed executorch's test_qnn_delegate.py (not from a copy), every row info; an
upstream file that lost its table, a damaged counterpart file: one line each."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks.upstream_specs import (
    UpstreamSpecsError,
    counterpart,
    delegate_tests_file,
    llm_specs,
)
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.report import upstream
from pytest_qnn_genai.report.results import Header, Record, ResultsFile
from pytest_qnn_genai.report.summary import render_summary


def test_upstreams_own_specs_for_smollm2_135m() -> None:
    specs = llm_specs("smollm2_135m")
    assert specs is not None and specs.source.startswith(str(delegate_tests_file()))
    # what the installed executorch's TestExampleLLMScript asserts for the model
    assert {k: specs.values[k] for k in ("SM8650", "SM8750", "pte_size", "wikitext_ppl", "sqnr")} \
        == {"SM8650": 214, "SM8750": 260, "pte_size": 210_000_000, "wikitext_ppl": 23, "sqnr": 19}
    assert llm_specs("stories260k") is None  # a toy: upstream gates no such model


def test_a_moved_table_or_a_damaged_counterpart_is_one_line(tmp_path: Path) -> None:
    moved = tmp_path / "test_qnn_delegate.py"
    moved.write_text("class LlmSpecsRenamed:\n    pass\nspecs = {'m': Other(sqnr=1)}\n")
    with pytest.raises(UpstreamSpecsError, match=r"no table of LlmSpecs\(\.\.\.\) entries"):
        llm_specs("smollm2_135m", moved)
    (tmp_path / "upstream.json").write_text(json.dumps({"differs": []}))
    with pytest.raises(UpstreamSpecsError, match="'llm_specs' must name"):
        counterpart(tmp_path)
    (tmp_path / "upstream.json").write_text("{")
    with pytest.raises(UpstreamSpecsError, match="not JSON"):
        counterpart(tmp_path)
    assert counterpart(tmp_path / "elsewhere") is None


def _record(kind: str, model: str, verdict: str = figures.PASS, **values: float | int) -> Record:
    return Record(kind, model, "SM8650-htp-emulator", "SM8650", "htp", "x86-emulator",
                  [figures.Figure(name, value, verdict, judge="x") for name, value in
                   values.items()])


def test_the_report_sets_the_run_beside_upstream_as_info() -> None:
    run = ResultsFile(Header("2026-12-05T01:00:00+00:00", ["SM8650"], "htp", [], {}), [
        _record("gate", "smollm2_135m", pte_bytes=150_000_000,
                target_vs_transformers_sqnr_db=21.5, target_word_perplexity=9.1),
        _record("perf", "smollm2_135m", decode_tok_s=0.292115321610069),
        _record("gate", "stories260k", pte_bytes=1_354_368.0)])
    [section] = upstream.sections(run)  # stories260k has no upstream counterpart
    assert section.title == ("smollm2_135m · SM8650-htp-emulator beside upstream's "
                             "LlmSpecs['smollm2_135m']")
    md = render_summary(run)
    assert ("| .pte bytes | the case's own build (hybrid: two graphs, no weight sharing on x86; "
            "upstream does not assert a hybrid x86 build's size) | 150000000 | ≤ 210000000 | "
            "info |") in md
    # to the report's four significant digits, as every other figure of it
    assert ("| decode tok/s (upstream: on a phone of the SoC) | the case's own build on this "
            "target | 0.2921 | ≥ 214 | info |") in md
    assert upstream.UPSTREAM_CI not in md  # upstream's job did not run: no rows of it
    assert "upstream's entry: " + str(delegate_tests_file()) in md
    assert "weights: the Q4_1 GGUF" in md  # what differs, from the case's upstream.json


def test_an_unreadable_upstream_says_so_in_the_report(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    (tmp_path / "test_qnn_delegate.py").write_text("x = 1\n")
    monkeypatch.setattr("pytest_qnn_genai.checks.upstream_specs.delegate_tests_file",
                        lambda: tmp_path / "test_qnn_delegate.py")
    run = ResultsFile(Header("2026-12-05T01:00:00+00:00", ["SM8650"], "htp", [], {}),
                      [_record("gate", "smollm2_135m", pte_bytes=1.0)])
    cases = {"smollm2_135m": SimpleNamespace(folder=registry.available()["smollm2_135m"].folder)}
    [section] = upstream.sections(run, cases)
    assert "no table of LlmSpecs" in str(section.blocks[0])


def test_upstreams_ci_job_rows_carry_their_verdicts() -> None:
    run = ResultsFile(Header("2026-12-05T01:00:00+00:00", ["SM8650"], "htp", [], {}), [
        _record("gate", "smollm2_135m", upstream_ci_pte_bytes=190_000_000),
        _record("gate", "smollm2_135m", figures.FAIL, upstream_ci_sqnr_db=18.5),
        _record("gate", "smollm2_135m", pte_bytes=393_133_568)])
    md = render_summary(run)
    job = upstream.UPSTREAM_CI
    assert f"| .pte bytes | {job} | 190000000 | ≤ 210000000 | pass |" in md
    assert f"| logits SQNR dB vs fp32 (the prompt's rows) | {job} | 18.5 | ≥ 19 | fail |" in md
    assert "393133568 | ≤ 210000000 | info |" in md  # the hybrid build: not upstream's job
