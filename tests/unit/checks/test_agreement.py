"""The gate's and smoke's accuracy checks as Check rows: each passes on agreeing inputs, fails on
the broken thing it guards, and becomes a report figure carrying the same verdict and its judge."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_qnn_genai.checks import agreement, parity
from pytest_qnn_genai.checks.parity import Check
from pytest_qnn_genai.checks.program_bytes import ProgramDiff

RNG = np.random.default_rng(0)
FP32 = RNG.normal(size=(24, 64))
TOKENS = [int(t) for t in np.argmax(FP32, axis=1)]


def _verdicts(checks: list[Check]) -> list[str]:
    return [c.figure().verdict for c in checks]


def test_check_figure_carries_value_reference_judge_and_verdict() -> None:
    ok = Check("logits SQNR dB", "ref", 41.6, "floor 30", ok=True, judge="≥ 30 dB", name="sqnr_db",
               bound=30.0, rule="at-least", better="higher")
    f = ok.figure()
    assert (f.name, f.value, f.reference, f.verdict, f.judge, f.bound, f.label) == (
        "sqnr_db", 41.6, "ref", "pass", "≥ 30 dB", 30.0, "logits SQNR dB")
    assert f.context == {"delta": "floor 30"}
    assert Check("x", 1, 2, ok=False, judge="same as legacy").figure().verdict == "fail"
    assert Check("build s", 1.0, 2.0, info=True).figure().verdict == "info"
    with pytest.raises(ValueError, match="names no judge"):  # a verdict must name its judge
        Check("x", 1, 2, ok=True).figure()


def test_every_parity_row_names_its_judge() -> None:
    a = parity.Signature(("kv_forward", "prefill_forward"), {}, {"get_max_seq_len": 128}, 10)
    other_bytes = ProgramDiff(("a" * 64, "b" * 64), (1000, 1000), ("constant buffer 1: ...",))
    rows = [*parity.compare_signatures(a, a), parity.pte_sha256(other_bytes),
            parity.pte_size(1000, 1001),
            *parity.compare_compile_options({"soc": "SM8650"}, {"soc": "SM8750"})]
    judged = [r.figure() for r in rows]  # raises if a judged row had no judge
    assert all(f.judge for f in judged)
    # other bytes; one byte bigger; another SoC
    assert [f.verdict for f in judged][-3:] == ["fail", "fail", "fail"]


def test_qdq_keeps_fp32() -> None:
    assert _verdicts(agreement.qdq_keeps_fp32(FP32, FP32 + 0.01, 15.0, 0.9)) == ["pass", "pass"]
    noisy = FP32 + RNG.normal(scale=1.0, size=FP32.shape)  # ~0 dB, argmax scrambled
    checks = agreement.qdq_keeps_fp32(FP32, noisy, 15.0, 0.9)
    assert _verdicts(checks) == ["fail", "fail"]
    assert [c.figure().judge for c in checks] == ["≥ 15 dB", "≥ 0.9 of steps"]


def test_target_runs_qdq() -> None:
    good = agreement.target_runs_qdq(FP32, FP32 + 1e-4, TOKENS, 0.995, 30.0)
    assert _verdicts(good) == ["pass", "pass", "info", "pass"]
    assert (good[2].new, good[3].new) == (0, 0.0)  # parts nowhere: the toys' accepted count
    other = list(TOKENS)
    other[5] = int(np.argsort(FP32[5])[0])  # the QDQ graph's least likely token: a wide swap
    off = agreement.target_runs_qdq(FP32, FP32 + 1e-4, other, 0.995, 30.0)
    assert _verdicts(off) == ["pass", "pass", "info", "fail"]
    assert (off[2].new, off[2].delta) == (1, "steps [5]")  # vs the QDQ graph's greedy path
    noisy = agreement.target_runs_qdq(FP32, FP32 * -1, other, 0.995, 30.0)
    assert _verdicts(noisy)[:2] == ["fail", "fail"]  # noisy everywhere: the floors beside it


def test_a_near_tie_may_part_a_wide_swap_may_not() -> None:
    """Teacher-forced rows with a noise of 0.1 logits: the target taking the QDQ graph's runner-up
    where the two are 0.05 apart is a near tie; the same swap where they are 2 apart, or a
    target whose error sits on the token it picked (planted: +2 on it), is not."""
    qdq = RNG.normal(scale=4.0, size=(8, 256))
    target = qdq + RNG.normal(scale=0.1, size=qdq.shape)
    tokens = [int(t) for t in np.argmax(target, axis=1)]
    runner_up = int(np.argsort(qdq[3])[-2])
    qdq[3, runner_up] = qdq[3].max() - 0.05
    target[3] = qdq[3] + RNG.normal(scale=0.1, size=256)
    target[3, runner_up] = target[3].max() + 0.01
    tokens = [int(t) for t in np.argmax(target, axis=1)]
    checks = agreement.target_runs_qdq(qdq, target, tokens, 0.99, 20.0)
    assert checks[2].new == 1 and _verdicts(checks)[3] == "pass"
    wide = qdq.copy()
    wide[3, runner_up] = wide[3].max() - 2.0
    assert _verdicts(agreement.target_runs_qdq(wide, target, tokens, 0.99, 20.0))[3] == "fail"
    planted = target.copy()
    planted[5, int(np.argsort(qdq[5])[-2])] += 2.0 + float(np.ptp(qdq[5][np.argsort(qdq[5])[-2:]]))
    forced = [int(t) for t in np.argmax(planted, axis=1)]
    fails = agreement.target_runs_qdq(qdq, planted, forced, 0.99, 20.0)
    assert fails[2].new == 2 and _verdicts(fails)[3] == "fail"
    assert "step 5" in fails[3].detail and "NOT a near tie" in fails[3].detail


def test_keeps_reference_and_same_model() -> None:
    got = {"sqnr_db": 14.0, "greedy_agreement": 0.95, "steps": 48}
    assert _verdicts(agreement.keeps_reference(got, "transformers", 15.0, 0.9, "t")) == [
        "fail", "pass"]
    assert _verdicts(agreement.same_model(FP32, FP32 + 1e-6, 1e-3, "transformers", "f")) == [
        "pass", "pass"]
    assert _verdicts(agreement.same_model(FP32, FP32 + 1e-2, 1e-3, "transformers", "f"))[0] == (
        "fail")


def test_not_degenerate_and_pte_size() -> None:
    assert _verdicts(agreement.not_degenerate(list(range(48)), 48)) == ["pass", "pass"]
    assert _verdicts(agreement.not_degenerate([7] * 48, 48)) == ["pass", "fail"]  # a loop
    assert _verdicts(agreement.not_degenerate([1, 2, 3], 48)) == ["fail", "pass"]  # too short
    assert agreement.pte_size(1_354_368, 2_020_000, "upstream").figure().verdict == "pass"
    big = agreement.pte_size(2_020_001, 2_020_000, "upstream").figure()
    assert big.verdict == "fail" and big.judge == "≤ 2020000 bytes (upstream)"


def test_smoke_checks() -> None:
    qdq = np.linspace(-1, 1, 100)
    step = 2 / 65535
    assert agreement.within_steps(qdq, qdq + 3 * step, 16, 8).ok
    assert not agreement.within_steps(qdq, qdq + 9 * step, 16, 8).ok
    fp32 = np.sin(np.arange(100.0))
    q = fp32 + 0.1 * np.cos(np.arange(100.0))
    assert all(c.ok for c in agreement.loses_no_more(fp32, q, q, 0.5, 10.0))
    worse = agreement.loses_no_more(fp32, q, fp32 + 0.2 * np.cos(np.arange(100.0)), 0.5, 10.0)
    assert _verdicts(worse) == ["pass", "fail"]
    assert not agreement.loses_no_more(fp32, np.zeros(100), fp32, 0.5, 10.0)[0].ok  # broken QDQ
    assert agreement.close_to_fp32(fp32, fp32 + 1e-4, 40.0).ok
    assert not agreement.close_to_fp32(fp32, fp32 + 0.1, 40.0).ok


def test_logits_follow_qdq_names_its_rows() -> None:
    good = agreement.logits_follow_qdq(FP32, FP32 + 1e-4, 0.995, 30.0, what="prefill",
                                       rows="position")
    assert _verdicts(good) == ["pass", "pass"]
    assert [c.name for c in good] == ["prefill_min_row_cosine", "prefill_sqnr_db"]
    assert good[0].check == "prefill vs QDQ per-position cosine (min of 24)"
    broken = FP32.copy()
    broken[7] = -broken[7]  # one prompt position's logits wrong: the min row cosine sees it
    assert _verdicts(agreement.logits_follow_qdq(FP32, broken, 0.995, 30.0))[0] == "fail"
    named = agreement.target_runs_qdq(FP32, FP32, TOKENS, 0.93, 16.0, ("x spec", "default floor"))
    assert [c.judge for c in named[:2]] == ["≥ 0.93 (x spec)", "≥ 16 dB (default floor)"]


def test_ab_accuracy_holds_b_to_as_within_the_bounds() -> None:
    """B keeping A's accuracy passes; B 1 dB less SQNR against fp32, or one greedy step fewer,
    fails, saying the bound and where it comes from; a side with no steps fails."""
    from pytest_qnn_genai.checks.agreement import ab_accuracy
    from pytest_qnn_genai.checks.parity import failures

    a = {"sqnr_db": 19.422, "greedy_agreement": 0.9792, "steps": 48}
    same = ab_accuracy("ar8", "new", a, dict(a), 0.3, 0.0, "measured")
    assert all(c.ok for c in same) and [c.delta for c in same] == [0.0, 0.0]
    kv8 = ab_accuracy("kv16", "new", a, {**a, "sqnr_db": 19.332}, 0.3, 0.0, "measured")
    assert all(c.ok for c in kv8)  # the 8-bit KV's measured -0.09 dB
    worse = ab_accuracy("legacy", "new", a, {**a, "sqnr_db": 18.422}, 0.3, 0.0, "measured")
    assert [c.ok for c in worse] == [False, True]
    assert failures(worse) == ("A/B legacy vs new: logits SQNR vs fp32 dB is 18.422 (against "
                               "19.422; difference -1), which fails B − A ≥ −0.3 dB (measured).")
    flipped = ab_accuracy("legacy", "new", a, {**a, "greedy_agreement": 0.9583}, 0.3, 0.0, "m")
    assert [c.ok for c in flipped] == [True, False]
    empty = ab_accuracy("legacy", "new", a, {**a, "steps": 0}, 0.3, 0.0, "m")
    assert not any(c.ok for c in empty)
