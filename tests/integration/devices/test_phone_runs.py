"""A phone generation through the real adb client, the loopback server and the upstream-rule
runner stand-in on its toy backend (seconds, no QNN): the two runs, their flags, the exact ids
from the kv-mode dump, and a defective runner caught and never re-run.

Toy backend: position p predicts token 3 + p % 61 (piece " t<id>"), or EOS ("</s>") where asked.
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.checks.generation import judged_generation
from pytest_qnn_genai.devices import llama_runs
from pytest_qnn_genai.devices.adb import AdbDevice
from pytest_qnn_genai.devices.llama_runs import ProgramFacts, RunnerContractError
from pytest_qnn_genai.devices.runner_output import LogitsQuant
from pytest_qnn_genai.devices.workspace import DeviceWorkspace, RunnerFailedError
from pytest_qnn_genai.runtime.tokenizer import load_tokenizer
from tests.support import short_llama_runner
from tests.support.fake_device import FakeDevice
from tests.support.llama_runner_standin import write_launcher
from tests.support.standin_backends import TOY_ENV

pytest_plugins = ["tests.support.adb_fixtures"]

PROMPT_IDS = [1, 352, 353, 261, 328]  # "Once upon a time" with the stories260k tokenizer
P, N = len(PROMPT_IDS), 12


def facts(shared_buffer: bool = True, context_len: int = 64) -> ProgramFacts:
    return ProgramFacts(context_len=context_len, prefill_ar=16, vocab_size=64,
                        quant=LogitsQuant(0.001, 32768),
                        shared_buffer=shared_buffer)


@pytest.fixture
def phone_run(adb_device: AdbDevice, tmp_path: Path, case) -> Callable[..., object]:
    """``phone_run(runner=..., **generate options)``: llama_runs.generate on the fake phone."""
    workspace = DeviceWorkspace(adb_device, "gen")
    (tmp_path / "m.pte").write_bytes(b"pte")
    tokenizer = load_tokenizer(case.path("tokenizer_model"))

    def go(runner: Path | None = None, program: ProgramFacts | None = None, max_new: int = N,
           logits: bool = True, toy: dict | None = None):  # noqa: ANN202
        env = {TOY_ENV: json.dumps({"context_len": 64, "prefill_ar": 16, **(toy or {})})}
        runner = runner or write_launcher(tmp_path / "qnn_llama_runner", env=env)
        return llama_runs.generate(workspace, runner, tmp_path / "m.pte", "d1",
                                   case.path("tokenizer_bin"), tokenizer, "Once upon a time",
                                   PROMPT_IDS, max_new, tmp_path / "runs", 60, serial="S1",
                                   logits=logits, facts=program or facts())
    return go


def _runner_calls(device: FakeDevice) -> list[list[str]]:
    return [shlex.split(c.split("./qnn_llama_runner ", 1)[1].split(" > ")[0])
            for c in device.shell_commands if "./qnn_llama_runner " in c]


def test_hybrid_then_kv_run_with_upstreams_flags(phone_run, fake_device) -> None:
    result = phone_run()
    hybrid, kv = _runner_calls(fake_device)
    for call in (hybrid, kv):
        assert call[call.index("--seq_len") + 1] == str(P + N)
        assert call[call.index("--tokenized_prompt") + 1].startswith("artifacts/")
        assert "--shared_buffer" in call and "--prompt" not in call
    assert hybrid[hybrid.index("--eval_mode") + 1] == "1" and "--dump_logits_path" not in hybrid
    assert kv[kv.index("--eval_mode") + 1] == "0" and "--dump_logits_path" in kv
    want = [3 + p % 61 for p in range(P - 1, P - 1 + N)]
    assert result.tokens == want and result.logits.shape == (N, 64)
    assert [int(t) for t in np.argmax(result.logits, axis=1)] == want
    assert result.text == "".join(f" t{t}" for t in want) == result.extra["hybrid_text"]
    assert result.perf.generated_tokens == N and result.perf.prompt_tokens == P
    assert result.prompt_tokens == PROMPT_IDS and "argmax" in result.extra["tokens_source"]


def test_a_kv_mode_program_runs_once_in_kv_mode(phone_run, fake_device) -> None:
    """A kv-mode program (``kv_forward`` alone): one ``--eval_mode 0`` run gives text and logits,
    as upstream's runner takes the prompt through ``kv_forward`` too."""
    kv_program = facts()
    kv_program = ProgramFacts(kv_program.context_len, 1, kv_program.vocab_size, kv_program.quant,
                              kv_program.shared_buffer, kv_mode=True)
    result = phone_run(program=kv_program)
    (call,) = _runner_calls(fake_device)
    assert call[call.index("--eval_mode") + 1] == "0" and "--dump_logits_path" in call
    want = [3 + p % 61 for p in range(P - 1, P - 1 + N)]
    assert result.tokens == want and [int(t) for t in np.argmax(result.logits, axis=1)] == want
    assert result.text == _toy_text(want) and result.extra["eval_mode"] == 0


def test_shared_buffer_only_when_compiled_with_it(phone_run, fake_device) -> None:
    phone_run(program=facts(shared_buffer=False), logits=False)
    (call,) = _runner_calls(fake_device)
    assert "--shared_buffer" not in call


def test_decode_eos_ends_the_ids_and_leaves_the_text(phone_run) -> None:
    result = phone_run(toy={"eos_at": [7]})
    assert result.tokens == [7, 8, 9, 2] and result.text == " t7 t8 t9"
    assert result.extra["eos_piece"] == "</s>" and result.perf.generated_tokens == 4


def test_a_runner_one_token_short_fails_once(phone_run, fake_device, tmp_path) -> None:
    env = {TOY_ENV: json.dumps({"context_len": 64, "prefill_ar": 16})}
    short = short_llama_runner.write_launcher(tmp_path / "short" / "qnn_llama_runner", env=env)
    with pytest.raises(RunnerContractError, match=f"produced {N - 1} tokens .* expected {N}"):
        phone_run(runner=short)
    assert len(_runner_calls(fake_device)) == 1  # neither re-run nor followed by the kv run


def test_request_beyond_the_context_never_reaches_the_phone(phone_run, fake_device) -> None:
    with pytest.raises(llama_runs.RunnerRequestError, match="beyond the program's context"):
        phone_run(program=facts(context_len=P + N - 1))
    assert _runner_calls(fake_device) == []


def test_abort_is_one_line_with_its_assert(phone_run, fake_device) -> None:
    """The program says 64 but the runner's model has 8: upstream aborts, the F line is kept."""
    with pytest.raises(RunnerFailedError) as info:
        phone_run(toy={"context_len": 16})
    assert info.value.exit_code == 134
    assert info.value.summary.startswith("qnn_llama_runner exited 134 (abort): F ")
    assert "The sequence length exceeds the maximum limit" in info.value.summary
    assert len(_runner_calls(fake_device)) == 1


def _toy_text(tokens: list[int]) -> str:
    """The judged ids decoded as the toy backend's tokenizer decodes them."""
    return "".join(f" t{t}" for t in tokens)


def test_a_hybrid_run_that_disagrees_with_the_kv_run_fails_the_judged_check(phone_run) -> None:
    """The gate's phone check on real (toy) phone output: a program whose prefill graph predicts
    other tokens than its kv graph makes the two runs write different text; ids that are not
    what the runner wrote (decoded one token off) fail the first row."""
    good = phone_run()
    assert all(c.ok for c in judged_generation(good, _toy_text(good.tokens)))
    bad = phone_run(toy={"prefill_shift": 1})
    checks = judged_generation(bad, _toy_text(bad.tokens))
    assert [c.ok for c in checks] == [True, False]
    assert bad.extra["hybrid_text"].startswith(" t8") and bad.text.startswith(" t7")
    shifted = judged_generation(good, _toy_text([t + 1 for t in good.tokens]))
    assert [c.ok for c in shifted] == [False, True] and shifted[0].delta == "char 2"
