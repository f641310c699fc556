"""Lookahead runs through upstream's own qnn_llama_runner (x86 build, the local transport), and
what the harness refuses held against what that runner really does with it.

The staged flow builds stories260k's lookahead variant (window 4, ngram 3, gcap 4: a 16-token
decode graph, as llama.py's ``--model_mode lookahead``); the runner decodes it with
``--eval_mode 2`` and its flags. Its text equals the staged hybrid build's greedy text, and a
hybrid text one word off fails the same check. Lookahead flags
that do not fill the decode graph exactly are refused before any run, one line: with more rows
upstream's runner aborts on its own assertion (shown here by running it anyway), with fewer it
reads its attention map past the end (unit-tested refusal; measured segfaults are not a thing a
test should depend on). The builds are the perf suite's (``suites/perf/test_lookahead.py``);
llama.py's lookahead build is judged there in the nightly only."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_qnn_genai.checks.generation import lookahead_accepted, lookahead_matches_hybrid
from pytest_qnn_genai.devices.llama_runs import RunnerRequestError
from pytest_qnn_genai.devices.session import DeviceSession
from pytest_qnn_genai.devices.workspace import RunnerFailedError
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc

TARGET = Target(soc("SM8650"), "htp", X86_RUNNER)
VARIANT = "lookahead"


@pytest.fixture(scope="module")
def builds(qnn_pipeline, qnn_sdk, case, sm8650_emulator) -> dict[str, Path]:
    """The staged flow's hybrid and lookahead builds of stories260k (cache entries the suites
    share)."""
    return {"hybrid": qnn_pipeline.artifacts("new", case, sm8650_emulator).pte,
            VARIANT: qnn_pipeline.artifacts("new", case.variant(VARIANT), sm8650_emulator).pte}


def _generate(session: DeviceSession, case, pte: Path, n: int, version: str,
              lookahead: tuple[int, int, int] | None):
    return session.generate(pte, case.path("tokenizer_model"), case.path("tokenizer_bin"),
                            case.eval_prompt, n, TARGET, decoder_model_version=version,
                            lookahead=lookahead)


def test_lookahead_text_is_the_hybrid_greedy_text_and_a_wrong_one_fails(
        qnn_pipeline, case, x86_runner_session, builds) -> None:
    variant = case.variant(VARIANT)
    version = qnn_pipeline.decoder_model_version(case)
    la = _generate(x86_runner_session, case, builds[VARIANT], case.max_new_tokens, version,
                   variant.lookahead)
    produced = la.extra["produced"]
    assert la.extra["eval_mode"] == 2 and la.extra["lookahead"]["decode_ar"] == 16
    assert case.max_new_tokens <= produced <= case.max_new_tokens + variant.ngram - 1
    hybrid = _generate(x86_runner_session, case, builds["hybrid"], produced, version, None)
    assert hybrid.extra["eval_mode"] == 1
    checks = lookahead_matches_hybrid(la, hybrid)
    assert all(c.ok for c in checks), [c.detail for c in checks]
    word = hybrid.text.split()[3]
    wrong = dataclasses.replace(hybrid, text=hybrid.text.replace(word, word[::-1] + "x", 1))
    assert [c.ok for c in lookahead_matches_hybrid(la, wrong)] == [False, True]
    assert la.perf.decode_tok_s > 0 and hybrid.perf.decode_tok_s > 0
    # upstream's runner (built here with its logging) says how many tokens its verification
    # branch accepted from candidate n-grams (some, on this prompt) of the tokens it decoded
    # (all but the prompt pass's)
    accepted = lookahead_accepted(Path(str(la.extra["run_log"])).read_text(errors="replace"))
    assert accepted is not None and accepted[0] == produced - 1 and accepted[1] > 0, accepted


def test_flags_other_than_the_builds_are_refused_and_upstream_aborts_on_them(
        qnn_pipeline, case, x86_runner_session, builds) -> None:
    version = qnn_pipeline.decoder_model_version(case)
    for flags, why in (((4, 4, 4), "24 rows of a decode graph of 16: the runner aborts"),
                       ((4, 3, 2), "12 rows of a decode graph of 16: the runner reads its "
                                   "attention map past the end"),
                       ((4, 3, 4), "16 rows of a decode graph of 1: ")):
        pte = builds["hybrid" if flags == (4, 3, 4) else VARIANT]  # last: a hybrid program
        with pytest.raises(RunnerRequestError, match=why):
            _generate(x86_runner_session, case, pte, case.max_new_tokens, version, flags)
    # what the refusal spares: upstream's runner given 24 rows for its 16 aborts, at its own check
    # of the attention map or (QAIRT 2.47's libraries beside it) on the heap it overran first
    session = x86_runner_session
    ws = session.session_workspace
    remote_pte = ws.push_artifact(builds[VARIANT], "lookahead-mismatch")
    remote_tok = ws.push_artifact(case.path("tokenizer_bin"), "lookahead-mismatch-tok")
    aborted = r"(?s)exited 134 \(abort\).*(attention_map \(24\)|malloc\(\)|free\(\))"
    with pytest.raises(RunnerFailedError, match=aborted):
        ws.run_llama_runner(session.runner, remote_pte, remote_tok, case.eval_prompt, 60, 300,
                            session.local_dir / "mismatch", eval_mode=2,
                            extra_args=["--window", "4", "--ngram", "4", "--gcap", "4"])
