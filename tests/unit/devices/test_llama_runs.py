"""The plugin's side of qnn_llama_runner's contract, held against the upstream-rule stand-in.

Each run here is :mod:`tests.support.llama_runner_standin` in-process on its model-free toy
backend (the word w is token 3 + len(w) % 61; position p predicts 3 + p % 61 or EOS where asked;
pieces " t<id>" and "</s>"), so every expectation is upstream's arithmetic, not the plugin's. Each
check is shown failing on the defect it guards.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.devices.llama_runs import (
    HYBRID_MODE,
    KV_MODE,
    LOOKAHEAD_MODE,
    Lookahead,
    ProgramFacts,
    RunnerContractError,
    RunnerRequestError,
    check_generation,
    plan_seq_len,
)
from pytest_qnn_genai.devices.runner_output import LogitsQuant, RunnerFiles
from tests.support import llama_runner_standin as ll
from tests.support import short_llama_runner
from tests.support.standin_backends import ToyBackend

FACTS = ProgramFacts(context_len=64, prefill_ar=16, vocab_size=64,
                     quant=LogitsQuant(0.001, 32768), shared_buffer=False)
IDS = [1, 7, 8, 9, 10]  # BOS + 4 ids: P = 5
P = len(IDS)
EOS = ("</s>",)


def run(tmp_path: Path, seq_len: int, mode: int = HYBRID_MODE, runner: type = ll.Runner,
        ids: list[int] = IDS, extra: tuple[str, ...] | list[str] = (), **toy) -> RunnerFiles:
    """The stand-in as the workspace runs it (tokenized prompt, outputs in ``tmp_path``)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in ("m.pte", "tok.bin"):
        (tmp_path / name).touch()
    np.asarray(ids, dtype=np.uint64).tofile(tmp_path / "ids.raw")
    backend = ToyBackend(**{"context_len": 64, "prefill_ar": 16, **toy})
    argv = ["--model_path", str(tmp_path / "m.pte"), "--tokenizer_path", str(tmp_path / "tok.bin"),
            "--tokenized_prompt", str(tmp_path / "ids.raw"), "--seq_len", str(seq_len),
            "--eval_mode", str(mode), "--temperature", "0",
            "--output_path", str(tmp_path / "outputs.txt"),
            "--performance_output_path", str(tmp_path / "inference_speed.txt")]
    if mode == KV_MODE:
        argv += ["--dump_logits_path", str(tmp_path / "logits.bin")]
    argv += list(extra)
    out, err = io.StringIO(), io.StringIO()
    original, ll.Runner = ll.Runner, runner  # type: ignore[misc, assignment]
    try:
        code = ll.run(argv, lambda request: backend, out, err)
    finally:
        ll.Runner = original  # type: ignore[misc]
    (tmp_path / "run.log").write_text(out.getvalue() + err.getvalue())
    existing = {n: tmp_path / n if (tmp_path / n).exists() else None
                for n in ("outputs.txt", "inference_speed.txt", "logits.bin", "run.log")}
    return RunnerFiles(tmp_path, existing["outputs.txt"], existing["inference_speed.txt"],
                       existing["logits.bin"], existing["run.log"], code)


def check(tmp_path: Path, files: RunnerFiles, max_new: int, ids: list[int] = IDS):
    return check_generation(files, str(tmp_path / "ids.raw"), len(ids), max_new, EOS, "S1")


@pytest.mark.parametrize("mode", [HYBRID_MODE, KV_MODE])
@pytest.mark.parametrize("max_new", [1, 12, 59])
def test_seq_len_is_prompt_plus_new_tokens(tmp_path, mode, max_new):
    seq_len = plan_seq_len(FACTS, P, max_new, mode)
    assert seq_len == P + max_new
    gen = check(tmp_path, run(tmp_path, seq_len, mode), max_new)
    assert gen.produced == max_new and gen.eos_piece is None
    want = "".join(f" t{3 + p % 61}" for p in range(P - 1, P - 1 + max_new))
    assert gen.result.text == want


def test_the_old_off_by_one_would_be_caught(tmp_path):
    """``--seq_len P + N - 1`` (what the plugin used to pass) gives N - 1 tokens: refused."""
    with pytest.raises(RunnerContractError, match=r"produced 11 tokens .* expected 12, or fewer "
                                                  r"ending at an EOS piece"):
        check(tmp_path, run(tmp_path, P + 12 - 1), 12)


def test_a_runner_one_token_short_is_caught(tmp_path):
    files = run(tmp_path, P + 12, runner=short_llama_runner.ShortRunner)
    with pytest.raises(RunnerContractError, match=r"produced 11 tokens \(observer generated_tokens "
                                                  r"10 \+ the prefill token\)"):
        check(tmp_path, files, 12)


REQUEST_ROWS = [
    # runner.cpp clamps S above the compiled context: fewer tokens would come back
    (P, 60, HYBRID_MODE, "need --seq_len 65, beyond the program's context of 64"),
    # prompt_processor.cpp: P <= context - prefill AR in hybrid mode
    (49, 2, HYBRID_MODE, "exceeds the 48 tokens the hybrid prompt processor takes"),
    (P, 0, HYBRID_MODE, "needs a prompt and new tokens"),
]


@pytest.mark.parametrize(("p", "n", "mode", "message"), REQUEST_ROWS)
def test_requests_the_runner_would_refuse_or_shorten(p, n, mode, message):
    with pytest.raises(RunnerRequestError, match=message):
        plan_seq_len(FACTS, p, n, mode)


def test_what_the_checks_refuse_upstream_really_does(tmp_path):
    """Holding each refusal against the stand-in: clamped, it returns fewer tokens; a 49-token
    hybrid prompt aborts; kv mode takes it (AR-1 prompt processing)."""
    clamped = run(tmp_path / "a", P + 60)
    assert "Clamping to 64" in clamped.run_log.read_text()
    assert check_generation(clamped, str(tmp_path / "a/ids.raw"), P, 59, EOS, "S").produced == 59
    long = [1] + [7] * 48
    assert run(tmp_path / "b", 51, ids=long).exit_code == 134
    assert plan_seq_len(FACTS, 49, 2, KV_MODE) == 51
    assert run(tmp_path / "c", 51, KV_MODE, ids=long).exit_code == 0


def test_decode_eos_stops_and_its_piece_is_removed(tmp_path):
    gen = check(tmp_path, run(tmp_path, P + 12, eos_at=(7,)), 12)
    assert gen.result.text == " t7 t8 t9" and gen.eos_piece == "</s>" and gen.produced == 4
    assert gen.result.perf.generated_tokens == 4  # observer 3 decode steps (EOS in) + prefill


def test_prefill_eos_does_not_stop(tmp_path):
    gen = check(tmp_path, run(tmp_path, P + 6, eos_at=(P - 1,)), 6)
    assert gen.produced == 6 and gen.eos_piece is None
    assert gen.result.text == "</s> t8 t9 t10 t11 t12"  # decode goes on from position P


def test_an_early_stop_without_an_eos_piece_is_refused(tmp_path):
    """EOS is read from outputs.txt (its piece is the last thing the runner wrote), never from log
    text: a run that stopped early whose output does not end at an EOS piece broke the contract,
    whatever its log says."""
    files = run(tmp_path, P + 12, eos_at=(7,))
    files.outputs_txt.write_text(files.outputs_txt.read_text().removesuffix("</s>"))
    with pytest.raises(RunnerContractError, match=r"produced 4 tokens .* or fewer ending at an "
                                                  r"EOS piece \('</s>',\); outputs.txt ends"):
        check(tmp_path, files, 12)


def test_an_early_eos_passes_without_a_log(tmp_path):
    """A release or Android build writes no ET_LOG line where the harness can read it: the early
    EOS is judged from outputs.txt and the observer line alone."""
    files = run(tmp_path, P + 12, eos_at=(7,))
    log = files.run_log.read_text()
    files.run_log.write_text("".join(line + "\n" for line in log.splitlines()
                                     if "PyTorchObserver" in line))
    generation = check(tmp_path, files, 12)
    assert generation.eos_piece == "</s>" and generation.produced == 4


def test_a_run_that_generated_nothing_is_refused(tmp_path):
    """With --tokenized_prompt upstream ignores a failed load: exit 0, an empty outputs.txt."""
    files = run(tmp_path, P + 4, extra=["--tokenizer_path", str(tmp_path / "missing.bin")])
    assert files.exit_code == 0 and files.outputs_txt.read_text() == ""
    with pytest.raises(RunnerContractError, match=r"exited 0 but generated nothing .*: E .*"
                                                  r"Failed to load tokenizer"):
        check(tmp_path, files, 4)


def test_the_runner_must_read_the_prompt_that_was_sent(tmp_path):
    files = run(tmp_path, P + 4, ids=IDS + [11])
    with pytest.raises(RunnerContractError, match="the runner read 6 prompt tokens, 5 were sent"):
        check(tmp_path, files, 4)


def test_kv_dump_rows_and_exact_ids(tmp_path):
    """device_evaluator.py layout: P prompt rows, then one per decode step; the argmax of rows
    P - 1 on is the generated ids."""
    files = run(tmp_path, P + 8, KV_MODE, dtype="uint16")
    rows = np.fromfile(files.logits_bin, dtype=np.uint16).reshape(-1, 64)
    assert rows.shape[0] == P + 8 - 1
    assert list(np.argmax(rows[P - 1:], axis=1)) == [3 + p % 61 for p in range(P - 1, P + 7)]


LOOKAHEAD_FACTS = ProgramFacts(context_len=64, prefill_ar=16, vocab_size=64,
                               quant=LogitsQuant(0.001, 32768), shared_buffer=False, decode_ar=16)
BUILT = Lookahead(window=4, ngram=3, gcap=4)  # (4 + 4) x (3 - 1) = 16 rows: an AR-16 graph


def test_a_lookahead_request_must_fit_the_programs_decode_graph() -> None:
    """Flags other than the build's that fill more rows than its decode graph has (the runner
    aborts) or fewer (it reads its attention map past the end: measured segfaults), a program
    built without lookahead (decode AR 1), and a request the lookahead loop would cut short at
    context - AR (lhd_token_generator.cpp: ``pos > context_len - ar_len``) are refused, one line
    each; the build's own flags plan as hybrid does."""
    assert plan_seq_len(LOOKAHEAD_FACTS, P, 12, LOOKAHEAD_MODE, BUILT) == P + 12
    assert plan_seq_len(LOOKAHEAD_FACTS, P, 12, LOOKAHEAD_MODE, Lookahead(6, 3, 2)) == P + 12
    with pytest.raises(RunnerRequestError, match=r"--ngram 4 --gcap 3 fills \(window \+ gcap\) x "
                                                 r"\(ngram - 1\) = 21 rows of a decode graph of 16: "
                                                 r"the runner aborts"):
        plan_seq_len(LOOKAHEAD_FACTS, P, 12, LOOKAHEAD_MODE, Lookahead(4, 4, 3))
    with pytest.raises(RunnerRequestError, match="= 14 rows of a decode graph of 16: the runner "
                                                 "reads its attention map past the end"):
        plan_seq_len(LOOKAHEAD_FACTS, P, 12, LOOKAHEAD_MODE, Lookahead(4, 3, 3))
    with pytest.raises(RunnerRequestError, match="16 rows of a decode graph of 1: "):
        plan_seq_len(FACTS, P, 12, LOOKAHEAD_MODE, BUILT)
    with pytest.raises(RunnerRequestError, match=r"reach position 50; the lookahead loop stops "
                                                 r"past context 64 - decode AR 16 = 48"):
        plan_seq_len(LOOKAHEAD_FACTS, P, 47, LOOKAHEAD_MODE, BUILT)
    assert plan_seq_len(LOOKAHEAD_FACTS, P, 45, LOOKAHEAD_MODE, BUILT) == P + 45
    for mode, flags in ((HYBRID_MODE, BUILT), (LOOKAHEAD_MODE, None)):
        with pytest.raises(RunnerRequestError, match="go with --eval_mode 2 only"):
            plan_seq_len(LOOKAHEAD_FACTS, P, 12, mode, flags)


def test_a_lookahead_run_may_overshoot_by_ngram_minus_one_and_no_more(tmp_path) -> None:
    """One lookahead step accepts up to ngram tokens, so a run asked for N may produce up to
    N + ngram - 1; one more, or one fewer than N without an EOS, breaks the contract."""
    files = run(tmp_path, P + 12)  # the stand-in produces exactly 12
    ok = check_generation(files, str(tmp_path / "ids.raw"), P, 10, EOS, "S", BUILT.overshoot)
    assert ok.produced == 12 and BUILT.overshoot == 2
    with pytest.raises(RunnerContractError, match=r"produced 12 tokens .* expected 9\.\.11 "
                                                  r"\(lookahead\)"):
        check_generation(files, str(tmp_path / "ids.raw"), P, 9, EOS, "S", BUILT.overshoot)
    with pytest.raises(RunnerContractError, match="produced 12 tokens .* expected 13..15"):
        check_generation(files, str(tmp_path / "ids.raw"), P, 13, EOS, "S", BUILT.overshoot)
    assert BUILT.flags() == ["--window", "4", "--ngram", "3", "--gcap", "4"]
