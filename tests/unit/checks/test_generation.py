"""checks.generation: the judged generation is the reported one (each row shown failing)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pytest_qnn_genai.checks.generation import (
    judged_generation,
    lookahead_matches_hybrid,
    parting_in_text,
)
from pytest_qnn_genai.checks.parity import failures
from pytest_qnn_genai.runtime.result import PerfStats, RunResult


def _run(tokens: list[int], text: str = " a b c", hybrid_text: str | None = " a b c",
         prompt_logits: np.ndarray | None = None) -> RunResult:
    """A kv-mode judged run: ``text`` is its own, ``hybrid_text`` the hybrid run's."""
    logits = np.zeros((3, 8), dtype=np.float32)
    logits[np.arange(3), [3, 5, 2]] = 1.0
    extra = {} if hybrid_text is None else {"hybrid_text": hybrid_text}
    return RunResult([1, 4], tokens, text, PerfStats(2, 3, 0.0, 1.0, 1.0, 0.0), logits,
                     extra=extra, prompt_logits=prompt_logits)


PIECES = {0: " x0", 1: " x1", 2: " c", 3: " a", 4: " x4", 5: " b", 6: " d", 7: " e"}


def _decode(ids: list[int]) -> str:
    return "".join(PIECES[i] for i in ids)


def test_consistent_runs_pass() -> None:
    assert all(c.ok for c in judged_generation(_run([3, 5, 2]), " a b c"))


def test_ids_that_are_not_what_the_runner_wrote_fail() -> None:
    """The judged ids decode to another text than the runner's kv-mode outputs.txt (a dump read
    with another dtype, rows shifted, ...): the first row fails and says where."""
    check = judged_generation(_run([3, 6, 2]), " a x c")[0]
    assert not check.ok and check.delta == "char 3" and "runner: ' a b c'" in check.detail
    message = failures([check])
    assert message.startswith("runner's kv-mode text = the judged ids decoded is ' a x c' "
                              "(against ' a b c'; difference char 3), which fails the text the "
                              "runner itself wrote (kv-mode outputs.txt).")


def test_the_eos_piece_the_runner_strips_is_not_a_difference() -> None:
    run = dataclasses.replace(_run([3, 5, 2]), extra={"hybrid_text": " a b", "eos_piece": "</s>"},
                              text=" a b")
    assert all(c.ok for c in judged_generation(run, " a b</s>"))


def test_the_hybrid_text_must_be_the_kv_runs() -> None:
    checks = judged_generation(_run([3, 5, 2], hybrid_text=" a b d"), " a b c")
    assert [c.ok for c in checks] == [True, False]  # no decode, no noise: any parting fails
    missing = judged_generation(_run([3, 5, 2], hybrid_text=None), " a b x")
    assert [c.ok for c in missing] == [False, False]


def test_a_hybrid_run_may_part_from_the_kv_run_at_a_near_tie_only() -> None:
    """The kv-mode row where the hybrid text goes on with " d": 0.05 behind " c" at a noise of
    0.1 is a near tie; 1.0 behind is not (the planted fault), nor a token outside the row's top
    tokens, nor a hybrid text that stops where the ids go on."""
    run = _run([3, 5, 2], hybrid_text=" a b d e")
    noise = np.full(3, 0.1)
    assert run.logits is not None
    run.logits[2, 6] = 0.95
    near = judged_generation(run, " a b c", _decode, noise)
    assert [c.ok for c in near] == [True, True] and near[1].delta == "parts at step 2"
    assert "2 -> 6" in near[1].detail and "near tie" in near[1].detail
    run.logits[2, 6] = 0.0
    wide = judged_generation(run, " a b c", _decode, noise)
    assert [c.ok for c in wide] == [True, False] and "NOT a near tie" in wide[1].detail
    gone = parting_in_text([3, 5, 2], run.logits, " a b x", _decode, noise, top=8)
    assert gone.step == 2 and gone.chosen == -1 and not gone.near_tie
    stops = parting_in_text([3, 5, 2], run.logits, " a b c d", _decode, noise)
    assert stops.step == 3 and not stops.near_tie


def test_a_run_without_logits_fails() -> None:
    run = dataclasses.replace(_run([3, 5, 2]), logits=None)
    assert [c.ok for c in judged_generation(run, " a b c")] == [False]


def test_the_runners_prompt_path_is_held_to_the_harness_ids() -> None:
    from pytest_qnn_genai.checks.generation import runner_reads_harness_prompt

    formatted, ids = "[INST] hi [/INST]", [1, 7, 8, 9]
    dumped = _run([3, 5, 2], prompt_logits=np.ones((3, 8), dtype=np.float32))
    by_text = dataclasses.replace(dumped, perf=PerfStats(4, 3, 0.0, 1.0, 1.0, 0.0),
                                  extra={"outputs_txt": formatted + " a b c"})
    by_ids = dataclasses.replace(dumped, prompt_tokens=ids)
    assert all(c.ok for c in runner_reads_harness_prompt(by_text, by_ids, ids, formatted))
    # the runner read one token more than the harness's template gives (a template drift)
    assert [c.ok for c in runner_reads_harness_prompt(by_text, by_ids, [1, *ids], formatted)
            ][0] is False
    # its echo is another text; its generation differs from the run from the harness's ids
    echo = dataclasses.replace(by_text, extra={"outputs_txt": "<s>hi a b c"})
    assert [c.ok for c in runner_reads_harness_prompt(echo, by_ids, ids, formatted)] == [
        True, False, True, True]
    other = dataclasses.replace(by_ids, text=" a b d")
    assert [c.ok for c in runner_reads_harness_prompt(by_text, other, ids, formatted)] == [
        True, True, False, True]


def test_one_id_the_runner_read_differently_is_seen_in_its_kv_mode_logits() -> None:
    """The same count, echo and text, but the runner's prompt rows differ from position 0 on (as
    qwen3_toy's BOS did: 0 in the harness, 768 in the runner): only the ids row fails, and says
    where; a run without its kv-mode dump fails that row rather than passing it."""
    from pytest_qnn_genai.checks.generation import runner_reads_harness_prompt

    formatted, ids = "[INST] hi [/INST]", [1, 7, 8, 9]
    prompt_rows = np.arange(24, dtype=np.float32).reshape(3, 8)
    by_ids = dataclasses.replace(_run([3, 5, 2]), prompt_tokens=ids, prompt_logits=prompt_rows)
    by_text = dataclasses.replace(by_ids, perf=PerfStats(4, 3, 0.0, 1.0, 1.0, 0.0),
                                  extra={"outputs_txt": formatted + " a b c"})
    assert all(c.ok for c in runner_reads_harness_prompt(by_text, by_ids, ids, formatted))
    other_bos = prompt_rows.copy()
    other_bos[0, 0] += 0.5  # what one other id at position 0 does to the first row
    wrong = dataclasses.replace(by_text, prompt_logits=other_bos)
    rows = runner_reads_harness_prompt(wrong, by_ids, ids, formatted)
    assert [c.ok for c in rows] == [True, True, True, False]
    assert rows[3].delta == "position 0" and rows[3].figure().verdict == "fail"
    no_dump = dataclasses.replace(by_text, prompt_logits=None)
    assert [c.ok for c in runner_reads_harness_prompt(no_dump, by_ids, ids, formatted)][3] is False


def _text_run(text: str, produced: int) -> RunResult:
    perf = PerfStats(5, produced, 0.1, 10.0, 5.0, 0.5)
    return RunResult([1, 2, 3, 4, 5], [], text, perf, extra={"produced": produced})


def test_a_lookahead_text_is_held_to_the_hybrid_greedy_text() -> None:
    """Equal texts and counts pass; one changed character, or a lookahead run one token longer,
    fails and says where."""
    text = " there was a little boy named Tom. He loved to run"
    assert all(c.ok for c in lookahead_matches_hybrid(_text_run(text, 12), _text_run(text, 12)))
    changed = text.replace("Tom", "Tim")
    rows = lookahead_matches_hybrid(_text_run(changed, 12), _text_run(text, 12))
    assert [c.ok for c in rows] == [False, True]
    assert rows[0].delta == f"char {text.index('Tom') + 1}" and "Tim" in rows[0].detail
    assert rows[0].figure().verdict == "fail"
    longer = lookahead_matches_hybrid(_text_run(text + " and", 13), _text_run(text, 12))
    assert [c.ok for c in longer] == [False, False]


def _rate_run(decode_tok_s: float) -> RunResult:
    return RunResult([1, 2], [], " a", PerfStats(2, 12, 0.1, 10.0, decode_tok_s, 0.5))


def test_lookahead_is_judged_on_the_tokens_the_runner_accepted_and_its_speed() -> None:
    """The runner's own n_accept: more than none and at least the measured count; the decode
    rate against the hybrid build's at least the measured share. The stand-in runner's line (it
    accepts nothing) fails, as does a log without the line and a slower decode."""
    from pytest_qnn_genai.checks.generation import lookahead_accepted, lookahead_gains

    log = ("I 00:00:01.000 executorch:lhd_token_generator.cpp:415] Lookahead Decoding: "
           "n_generated = 50 / n_accept = 21\n")
    assert lookahead_accepted("noise\n" + log) == (50, 21)
    assert lookahead_accepted("no lookahead here") is None
    la, hy = _rate_run(12.0), _rate_run(30.0)
    ok = lookahead_gains([(la, hy)], (50, 21), 21, 0.35, "measured")
    assert all(c.ok for c in ok) and ok[1].delta == 0.4
    none = lookahead_gains([(la, hy)], lookahead_accepted(
        "Lookahead Decoding: n_generated = 50 / n_accept = 0"), 0, 0.35, "m")
    assert [c.ok for c in none] == [False, True]  # zero accepted never passes
    assert failures(none[:1]) == ("lookahead tokens accepted (runner's count) is 0 (against 1), "
                                  "which fails ≥ 1 (m).")
    fewer = lookahead_gains([(la, hy)], (50, 20), 21, 0.35, "measured")
    assert [c.ok for c in fewer] == [False, True]
    silent = lookahead_gains([(la, hy)], None, 21, 0.35, "measured")
    assert not silent[0].ok and "no \"Lookahead Decoding" in silent[0].detail
    slower = lookahead_gains([(_rate_run(9.0), hy)], (50, 21), 21, 0.35, "measured")
    assert [c.ok for c in slower] == [True, False]
    phone = lookahead_gains([(_rate_run(9.0), hy)], (50, 21), 21, None, "measured")
    assert phone[1].info and phone[1].ok  # no share measured there: reported only


def test_lookahead_speed_is_the_median_of_alternated_pairs() -> None:
    """The share judged is the median of the pairs' ratios: one pair slowed by a burst of load
    (0.445, as a loaded CI machine measured against a floor of 0.5) does not fail it, a lookahead
    path at under half the hybrid's rate in two pairs of three does; the row shows every ratio."""
    from pytest_qnn_genai.checks.generation import lookahead_gains

    hy = _rate_run(20.0)
    burst = [(_rate_run(18.0), hy), (_rate_run(8.9), hy), (_rate_run(19.0), hy)]
    ok = lookahead_gains(burst, (47, 11), 11, 0.5, "measured")[1]
    assert ok.ok and ok.delta == 0.9 and ok.new == 18.0
    assert ok.detail == "median of 3 alternated pairs: 0.900, 0.445, 0.950"
    slow = [(_rate_run(8.0), hy), (_rate_run(9.0), hy), (_rate_run(19.0), hy)]
    assert not lookahead_gains(slow, (47, 11), 11, 0.5, "measured")[1].ok
    with pytest.raises(ValueError, match="no \\(lookahead, hybrid\\) run pair"):
        lookahead_gains([], (47, 11), 11, 0.5, "measured")


def test_genai_inference_is_held_to_the_harness_run() -> None:
    """genai_pipeline's inference stage reporting what the harness's run of the same program
    wrote passes; another prompt id, another token, another text or a second text fails its row;
    the decode rate is shown, judged by nothing."""
    from pytest_qnn_genai.checks.generation import inference_matches_run

    run = _run([3, 5, 2])
    same = inference_matches_run(run, [1, 4], [3, 5, 2], [" a b c"], 1.02)
    assert [c.ok for c in same] == [True] * 4 and same[3].info
    assert [c.figure().verdict for c in same] == ["pass", "pass", "pass", "info"]
    faults = {"prompt ids": ([1, 5], [3, 5, 2], [" a b c"]),
              "greedy tokens": ([1, 4], [3, 5, 7], [" a b c"]),
              "text": ([1, 4], [3, 5, 2], [" a b d"])}
    for row, (ids, tokens, texts) in faults.items():
        checks = inference_matches_run(run, ids, tokens, texts, 1.0)
        assert [c.check for c in checks if not c.ok] == [f"genai inference: {row}"], row
    other_token = inference_matches_run(run, [1, 4], [3, 5, 7], [" a b c"], 1.0)[1]
    assert failures([other_token]) == ("genai inference: greedy tokens is 3 (against 3; "
                                       "difference first differs at 2), which fails identical to "
                                       "the harness's run.")
    two = inference_matches_run(run, [1, 4], [3, 5, 2], [" a b c", " a b c"], 1.0)
    assert [c.ok for c in two] == [True, True, False, True]
    assert failures([c for c in two if not c.ok]).startswith(
        "genai inference: text is 2 texts (against ' a b c'), which fails identical to the "
        "harness's run.")


def test_genai_inference_on_upstreams_runner_is_held_to_the_hybrid_run() -> None:
    """Upstream's inference stage runs the hybrid mode: on upstream's runners it is held to the
    harness run's hybrid text and its tokens, not to the judged kv-mode run's, which may part
    from them at a near tie (SmolLM2-135M); a genai run that wrote the kv-mode text fails."""
    from pytest_qnn_genai.checks.generation import inference_matches_run

    run = dataclasses.replace(_run([3, 5, 2], hybrid_text=" a b d"),
                              extra={"hybrid_text": " a b d", "hybrid_tokens": [3, 5, 6]})
    assert all(c.ok for c in inference_matches_run(run, [1, 4], [3, 5, 6], [" a b d"], 1.0))
    kv = inference_matches_run(run, [1, 4], [3, 5, 2], [" a b c"], 1.0)
    assert [c.ok for c in kv] == [True, False, False, True]
