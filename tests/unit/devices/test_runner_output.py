"""Parsing of qnn_llama_runner output files (crafted text in the runner's exact formats)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.devices.runner_output import (
    LogitsQuant,
    RunnerFiles,
    RunnerOutputError,
    generated_token_logits,
    observer_stats,
    parse_perf,
    parse_runner_files,
    read_inference_speed,
    read_logits,
)

# stats_to_json_string() output: 32 prompt tokens in 126 ms, 64 generated in 1224 ms.
OBSERVER = ('PyTorchObserver {"prefill_token_per_sec":253.968,"decode_token_per_sec":52.2876,'
            '"prompt_tokens":32,"generated_tokens":64,"model_load_start_ms":1700000000000,'
            '"model_load_end_ms":1700000000350,"inference_start_ms":1700000000400,'
            '"inference_end_ms":1700000001750,"model_execution_start_ms":0,'
            '"model_execution_end_ms":0,"prompt_eval_end_ms":1700000000526,'
            '"first_token_ms":1700000000530,"aggregate_sampling_time_ms":10,'
            '"aggregate_model_execution_time_ms":0,"SCALING_FACTOR_UNITS_PER_SECOND":1000}')
# print_report()'s ET_LOG lines, deliberately with other figures than the JSON above.
REPORT = "".join(line + "\n" for line in [
    "I 00:00:02.100000 executorch:stats.h:161] "
    "\tPrompt Tokens: 30    Generated Tokens: 60",
    "I 00:00:02.100010 executorch:stats.h:167] "
    "\tModel Load Time:\t\t0.250000 (seconds)",
    "I 00:00:02.100020 executorch:stats.h:177] "
    "\tTotal inference time:\t\t1.500000 (seconds)\t\t Rate: \t40.000000 (tokens/second)",
    "I 00:00:02.100030 executorch:stats.h:185] "
    "\t\tPrompt evaluation:\t0.150000 (seconds)\t\t Rate: \t200.000000 (tokens/second)",
    "I 00:00:02.100040 executorch:stats.h:196] "
    "\t\tGenerated 60 tokens:\t1.350000 (seconds)\t\t Rate: \t44.444444 (tokens/second)",
    "I 00:00:02.100050 executorch:stats.h:204] "
    "\tTime to first generated token:\t0.160000 (seconds)",
    "I 00:00:02.100060 executorch:stats.h:211] "
    "\tSampling time over 90 tokens:\t0.010000 (seconds)",
])


def test_observer_json_is_preferred_over_report_lines() -> None:
    perf = parse_perf("I runner: loading\n" + OBSERVER + "\n" + REPORT)
    assert (perf.prompt_tokens, perf.generated_tokens) == (32, 65)  # + the token prefill produced
    assert perf.prefill_tok_s == pytest.approx(253.968)
    assert perf.decode_tok_s == pytest.approx(52.2876)
    assert perf.model_load_s == pytest.approx(0.35)
    assert perf.ttft_s == pytest.approx(0.130)


def test_rates_missing_from_json_are_recomputed_like_stats_h() -> None:
    line = OBSERVER.replace('"prefill_token_per_sec":253.968,"decode_token_per_sec":52.2876,', "")
    perf = parse_perf(line)
    assert perf.prefill_tok_s == pytest.approx(32 / 0.126)
    assert perf.decode_tok_s == pytest.approx(64 / 1.224)


def test_zero_length_phase_gives_zero_rate_not_a_crash() -> None:
    line = OBSERVER.replace('"prefill_token_per_sec":253.968,', "").replace(
        '"inference_start_ms":1700000000400', '"inference_start_ms":1700000000526')
    assert parse_perf(line).prefill_tok_s == 0.0


def test_last_observer_line_wins() -> None:
    second = OBSERVER.replace('"generated_tokens":64', '"generated_tokens":7')
    assert len(observer_stats(OBSERVER + "\n" + second)) == 2
    assert parse_perf(OBSERVER + "\n" + second).generated_tokens == 8


def test_report_lines_are_the_fallback() -> None:
    perf = parse_perf(REPORT)
    assert (perf.prompt_tokens, perf.generated_tokens) == (30, 61)
    assert perf.prefill_tok_s == 200.0 and perf.decode_tok_s == pytest.approx(44.444444)
    assert (perf.model_load_s, perf.ttft_s) == (0.25, 0.16)


def test_fallback_with_only_the_two_rate_lines() -> None:
    text = ("Prompt evaluation: 0.126000 (seconds)  Rate: 2031.746032 (tokens/second)\n"
            "Generated 64 tokens: 1.224000 (seconds)  Rate: 52.287582 (tokens/second)\n")
    perf = parse_perf(text)
    assert (perf.prompt_tokens, perf.generated_tokens) == (256, 65)
    assert perf.decode_tok_s == pytest.approx(52.287582)
    assert perf.ttft_s == pytest.approx(0.126)


def test_malformed_or_missing_stats_are_errors() -> None:
    with pytest.raises(RunnerOutputError, match="malformed"):
        parse_perf('PyTorchObserver {"prompt_tokens":3,')
    with pytest.raises(RunnerOutputError, match="neither"):
        parse_perf("E runner: failed to load model\n")
    with pytest.raises(RunnerOutputError, match="inference_end_ms"):
        parse_perf('PyTorchObserver {"prompt_tokens":1,"generated_tokens":1,'
                   '"inference_start_ms":0,"prompt_eval_end_ms":5}')


def test_uint16_logits_are_dequantized(tmp_path: Path) -> None:
    raw = np.array([[0, 32768, 65535], [100, 200, 300]], dtype=np.uint16)
    path = tmp_path / "logits.bin"
    raw.tofile(path)
    rows = read_logits(path, 3, LogitsQuant(scale=0.5, zero_point=32768))
    assert rows.dtype == np.float32
    np.testing.assert_allclose(rows, (raw.astype(np.float64) - 32768) * 0.5)


def test_float32_logits_pass_through(tmp_path: Path) -> None:
    raw = np.arange(8, dtype=np.float32).reshape(2, 4) - 3.5
    raw.tofile(tmp_path / "l.bin")
    rows = read_logits(tmp_path / "l.bin", 4, LogitsQuant(1.0, 0, dtype="float32"))
    np.testing.assert_array_equal(rows, raw)


def test_logits_not_a_whole_number_of_rows_is_an_error(tmp_path: Path) -> None:
    np.zeros(10, dtype=np.uint16).tofile(tmp_path / "l.bin")
    with pytest.raises(RunnerOutputError, match="vocab size 4"):
        read_logits(tmp_path / "l.bin", 4, LogitsQuant(1.0, 0))


def test_generated_rows_skip_prefill_padding() -> None:
    rows = np.arange(11, dtype=np.float32)[:, None] * np.ones((1, 2), dtype=np.float32)
    # 6 prompt tokens in AR-4 chunks -> 8 prefill rows (2 padding), then 3 decode rows
    picked = generated_token_logits(rows, prompt_tokens=6, prefill_ar_len=4)
    assert list(picked[:, 0]) == [5, 8, 9, 10]
    assert list(generated_token_logits(rows, prompt_tokens=3)[:, 0]) == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    with pytest.raises(RunnerOutputError):
        generated_token_logits(rows, prompt_tokens=12)


def _files(tmp_path: Path, outputs: str, log: str, speed: str | None = "47.4074") -> RunnerFiles:
    (tmp_path / "outputs.txt").write_text(outputs)
    (tmp_path / "run.log").write_text(log)
    speed_path = None
    if speed is not None:
        speed_path = tmp_path / "inference_speed.txt"
        speed_path.write_text(speed)
    return RunnerFiles(tmp_path, tmp_path / "outputs.txt", speed_path, None, tmp_path / "run.log", 0)


def test_run_result_text_drops_the_echoed_prompt(tmp_path: Path) -> None:
    files = _files(tmp_path, "Once upon a time, there was", OBSERVER)
    result = parse_runner_files(files, "Once", device="R5CX", tokens=[1, 2])
    assert result.text == " upon a time, there was"
    assert result.extra["outputs_txt"] == "Once upon a time, there was"
    assert result.extra["inference_speed_tok_s"] == pytest.approx(47.4074)
    assert (result.device, result.tokens, result.logits) == ("R5CX", [1, 2], None)
    assert result.perf.generated_tokens == 65


def test_missing_run_outputs_or_bad_speed_file_are_errors(tmp_path: Path) -> None:
    with pytest.raises(RunnerOutputError, match="run.log"):
        parse_runner_files(RunnerFiles(tmp_path, None, None, None, None, 1), "x", device="d")
    (tmp_path / "s.txt").write_text("fast")
    with pytest.raises(RunnerOutputError):
        read_inference_speed(tmp_path / "s.txt")


def test_logits_dump_must_agree_with_the_stats(tmp_path: Path) -> None:
    files = _files(tmp_path, "Once upon", OBSERVER)  # 32 prompt tokens, 65 generated
    np.zeros((32 + 64, 4), dtype=np.uint16).tofile(tmp_path / "logits.bin")
    quant = LogitsQuant(0.1, 0)
    good = RunnerFiles(tmp_path, files.outputs_txt, None, tmp_path / "logits.bin", files.run_log, 0)
    logits = parse_runner_files(good, "Once", device="d", vocab_size=4, quant=quant).logits
    assert logits is not None and logits.shape == (65, 4)
    np.zeros((32 + 10, 4), dtype=np.uint16).tofile(tmp_path / "logits.bin")
    with pytest.raises(RunnerOutputError, match="11 generated rows"):
        parse_runner_files(good, "Once", device="d", vocab_size=4, quant=quant)
