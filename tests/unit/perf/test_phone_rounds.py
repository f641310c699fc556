"""Phone rounds on the floors' workload: upstream's inference speed, the seq_len each round ran,
and the runner's own inference_speed.txt held against its observer line (the runner stand-in is
upstream's formulas: runner.cpp print_performance_report, stats.h)."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from pytest_qnn_genai.devices.runner_output import parse_perf, read_inference_speed
from pytest_qnn_genai.golden.perf import GoldenWorkload
from pytest_qnn_genai.perf.benchmark import (
    BenchResult,
    Minimum,
    inference_speed,
    observed_inference_speed,
    top_up,
)
from pytest_qnn_genai.perf.minimum import measured_work
from pytest_qnn_genai.perf.phone import (
    PHONE_MAX_ROUNDS,
    PhoneRound,
    phone_generation,
    phone_minimum,
    phone_round,
    round_problems,
)
from pytest_qnn_genai.runtime.result import PerfStats, RunResult
from tests.support import llama_runner_standin
from tests.support.standin_backends import ToyBackend

WORKLOAD = GoldenWorkload("Once", 128, {}, "test")


def _perf(prompt: int = 2, generated: int = 126, prefill: float = 200.0,
          decode: float = 2000.0) -> PerfStats:
    return PerfStats(prompt_tokens=prompt, generated_tokens=generated, model_load_s=0.1,
                     prefill_tok_s=prefill, decode_tok_s=decode, ttft_s=prompt / prefill)


def _result(perf: PerfStats, text: str = " t5 t6", speed: float | None = -1.0) -> RunResult:
    extra = {} if speed is None else {
        "inference_speed_tok_s": observed_inference_speed(perf) if speed == -1.0 else speed}
    return RunResult(prompt_tokens=[1, 352], tokens=[], text=text, perf=perf, device="R5",
                     extra=extra)


def test_upstream_inference_speed_is_decode_steps_over_all_inference_time() -> None:
    s = _perf(prompt=2, generated=126, prefill=200.0, decode=2500.0)  # 10 ms + 50 ms
    assert observed_inference_speed(s) == pytest.approx(125 / 0.060)
    assert inference_speed(s) == observed_inference_speed(s)
    assert observed_inference_speed(_perf(generated=1, prefill=300.0)) == 300.0  # prompt rate
    work = measured_work([s, s], "inference_speed_tok_s")
    assert (work.tokens, work.seconds) == (250, pytest.approx(0.120))
    reported = PhoneRound(**s.to_dict(), runner_inference_speed=1234.0)
    assert inference_speed(reported) == 1234.0  # the runner's own figure is the gated one
    assert BenchResult([reported] * 3, 3).figures()["inference_speed_tok_s"] == 1234.0


def test_a_round_of_the_workload_has_no_problems() -> None:
    full = phone_round(_result(_perf(generated=126)), 128, "</s>")
    assert full.problems == () and full.runner_inference_speed == pytest.approx(125 / 0.0725)
    early_eos = phone_round(_result(_perf(generated=40), text=" t5</s>"), 128, "</s>")
    assert early_eos.problems == ()  # upstream stops at EOS too


@pytest.mark.parametrize("generated,text,expected", [
    (125, " t5 t6", "ran 2 prompt + 125 generated = 127 tokens, not the floors' workload "
                    "--seq_len 128 (prompt + output) and did not stop at EOS"),
    (127, " t5</s>", "= 129 tokens, not the floors' workload --seq_len 128 (prompt + output)"),
])
def test_a_round_of_another_length_is_named(generated: int, text: str, expected: str) -> None:
    [problem] = phone_round(_result(_perf(generated=generated), text=text), 128, "</s>").problems
    assert expected in problem


def test_a_missing_or_disagreeing_inference_speed_file_is_named() -> None:
    [missing] = phone_round(_result(_perf(), speed=None), 128, "</s>").problems
    assert "wrote no inference_speed.txt" in missing
    s = _perf()
    [stale] = phone_round(_result(s, speed=observed_inference_speed(s) * 1.05), 128,
                          "</s>").problems
    assert "inference_speed.txt says" in stale and "observer line gives" in stale
    near = phone_round(_result(s, speed=observed_inference_speed(s) * 1.004), 128, "</s>")
    assert near.problems == ()  # %g's 6 digits and the ms clock, not a disagreement


def test_problems_are_counted_over_rounds() -> None:
    bad = phone_round(_result(_perf(generated=125)), 128, "</s>")
    good = phone_round(_result(_perf()), 128, "</s>")
    [line] = round_problems([bad, good, bad])
    assert line.endswith("(2 of 3 rounds)")
    assert round_problems([good, _perf()]) == []


def test_the_stand_in_runners_inference_speed_agrees_with_its_observer_line(
        tmp_path: Path) -> None:
    """upstream's inference_speed.txt and our figure from the observer line, same run."""
    for name in ("m.pte", "tokenizer.bin"):
        (tmp_path / name).write_bytes(b"x")
    out, err = io.StringIO(), io.StringIO()
    speed_file = tmp_path / "inference_speed.txt"
    toy = ToyBackend(prefill_call_s=0.004, kv_call_s=0.0005)
    code = llama_runner_standin.run(
        ["--model_path", str(tmp_path / "m.pte"), "--tokenizer_path", str(tmp_path / "tokenizer.bin"),
         "--prompt", "Once", "--seq_len", "128", "--output_path", str(tmp_path / "out.txt"),
         "--performance_output_path", str(speed_file)], lambda request: toy, out, err, scale=1.0)
    assert code == 0, err.getvalue()
    perf = parse_perf(out.getvalue())
    result = RunResult([1, 352], [], (tmp_path / "out.txt").read_text()[len("Once"):], perf,
                       extra={"inference_speed_tok_s": read_inference_speed(speed_file)})
    round_ = phone_round(result, 128, "</s>")
    assert round_.problems == ()
    assert perf.prompt_tokens + perf.generated_tokens == 128  # 126 new tokens for "Once"
    assert round_.runner_inference_speed == pytest.approx(observed_inference_speed(perf),
                                                          rel=1e-4)


class _Runs:
    """What phone_generation calls: ``run(prompt, max_new_tokens)``."""

    def __init__(self, generated: int) -> None:
        self.generated, self.calls = generated, []

    def __call__(self, prompt, max_new_tokens):  # noqa: ANN001
        self.calls.append((prompt, max_new_tokens))
        return _result(_perf(generated=self.generated))


def test_phone_generation_asks_for_seq_len_minus_the_prompt(case) -> None:
    runs = _Runs(generated=126)
    round_ = phone_generation(runs, case.path("tokenizer_model"), WORKLOAD)()
    assert runs.calls == [("Once", 126)]  # "Once" is BOS + 1 token: 128 - 2
    assert round_.problems == ()
    short = phone_generation(_Runs(generated=125), case.path("tokenizer_model"), WORKLOAD)()
    assert "= 127 tokens" in short.problems[0]


class _Settings:
    perf_rounds, perf_min_tokens, perf_min_seconds = 5, 64, 2.0


def test_phone_minimum_tops_up_past_four_times_the_rounds_on_the_floors_figures() -> None:
    minimum = phone_minimum(_Settings(), ("decode_tok_s", "inference_speed_tok_s"))
    assert minimum.max_rounds == PHONE_MAX_ROUNDS and minimum.gated == (
        "decode_tok_s", "inference_speed_tok_s")
    at_floor = _perf(generated=126, decode=1600.0, prefill=200.0)  # 78 ms of decode a round
    result = top_up([at_floor] * 5, lambda: at_floor, minimum, 5)
    assert len(result.rounds) == 26 and result.shortfall == []  # 26 x 78.1 ms >= 2 s
    assert Minimum.from_settings(_Settings()).max_rounds == 20  # would have stopped short
    prefill_gated = phone_minimum(_Settings(), ("prefill_tok_s",))
    capped = top_up([at_floor] * 5, lambda: at_floor, prefill_gated, 5)
    assert len(capped.rounds) == PHONE_MAX_ROUNDS and "prefill_tok_s rests on" in \
        capped.shortfall[0]


def test_a_device_that_runs_the_simulator_gets_info_never_a_floor() -> None:
    """The loopback phone (its builds are the emulator's) is the simulator: its 30 tok/s is info;
    a rate of 0 is no measurement and fails; a phone is not the simulator."""
    from pytest_qnn_genai.perf.phone import simulated, simulator_figures
    from pytest_qnn_genai.targets import EMULATOR, Target, soc

    loopback, emulator = Target(soc("SM8650"), device="LOOP1"), Target(soc("SM8650"))
    assert simulated(lambda t: emulator, loopback)
    assert not simulated(lambda t: t, loopback)  # a phone: its own builds
    assert not simulated(lambda t: t, emulator)  # the emulator is judged as the emulator
    figures = simulator_figures({"decode_tok_s": 30.0, "prefill_tok_s": 80.0, "load_s": 0.0})
    assert [f.verdict for f in figures] == ["info", "info", "info"]
    assert "no phone floor" in figures[0].label and EMULATOR == emulator.device
    [dead] = simulator_figures({"decode_tok_s": 0.0})
    assert dead.failed and str(dead).endswith("which fails a measurement is > 0.")
