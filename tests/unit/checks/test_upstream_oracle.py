"""Upstream's CI job's assertions as verdicts: the ``.pte`` over ``LlmSpecs.pte_size``, llama.py's
SQNR under ``LlmSpecs.sqnr``, a bound upstream does not set, and the harness's SQNR off
llama.py's by more than the printed digits each fail naming the figures; the job's figures at
upstream's bounds pass."""
from __future__ import annotations

from pytest_qnn_genai.checks.upstream_oracle import held_to_upstream, upstream_ci_checks
from pytest_qnn_genai.checks.upstream_specs import runs_upstream_ci
from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.targets import EMULATOR, X86_RUNNER, Target, soc

SOURCE = "test_qnn_delegate.py:8951"


def _verdicts(**kw: float | None) -> dict[str, tuple[bool, str]]:
    args: dict[str, float | None] = {"spec_pte_bytes": 210_000_000, "spec_sqnr_db": 19,
                                     "pte_bytes": 209_000_000, "upstream_sqnr_db": 19.5,
                                     "harness_sqnr_db": 19.5021}
    args.update(kw)
    rows = upstream_ci_checks(args["spec_pte_bytes"], args["spec_sqnr_db"], SOURCE,
                              int(args["pte_bytes"] or 0), float(args["upstream_sqnr_db"] or 0),
                              float(args["harness_sqnr_db"] or 0))
    return {c.name: (c.ok, c.detail) for c in rows}


def test_the_job_at_upstreams_bounds_passes() -> None:
    assert all(ok for ok, _ in _verdicts().values())
    assert all(ok for ok, _ in _verdicts(pte_bytes=210_000_000, upstream_sqnr_db=19.0,
                                         harness_sqnr_db=19.0).values())


def test_each_fault_fails_naming_the_figure() -> None:
    ok, detail = _verdicts(pte_bytes=393_133_568)["upstream_ci_pte_bytes"]
    assert not ok and "393,133,568 is not ≤ 210,000,000" in detail
    ok, detail = _verdicts(upstream_sqnr_db=18.99, harness_sqnr_db=18.99)["upstream_ci_sqnr_db"]
    assert not ok and "18.99 is not ≥ 19" in detail
    ok, detail = _verdicts(spec_sqnr_db=None)["upstream_ci_sqnr_db"]
    assert not ok and f"upstream's LlmSpecs ({SOURCE}) sets no sqnr" in detail
    ok, detail = _verdicts(harness_sqnr_db=19.56)["upstream_ci_harness_sqnr_db"]
    assert not ok and "19.5600" in detail and "19.5000" in detail


def test_the_harness_is_held_to_the_printed_digits() -> None:
    assert held_to_upstream("x", "x", harness=21.3129 + 0.049, upstream=21.3129).ok
    check = held_to_upstream("x", "x", harness=21.3129 + 0.051, upstream=21.3129)
    assert not check.ok and "the harness measures 21.3639 dB" in check.detail


def test_the_job_exists_for_a_case_that_declares_it_on_upstreams_runner() -> None:
    cases = available()
    x86, emulator = Target(soc("SM8650"), "htp", X86_RUNNER), Target(soc("SM8650"), "htp", EMULATOR)
    assert runs_upstream_ci(cases["smollm2_135m"], x86)
    assert not runs_upstream_ci(cases["smollm2_135m"], emulator)
    assert not runs_upstream_ci(cases["stories260k"], x86)
