"""Contract tests for the qnn_llama_runner stand-in: each row pins one upstream ExecuTorch rule.

Citations are file:function in pytorch/executorch at 1.5.1 (the wheel's sources;
release/1.4 identical for every rule here except the observer keys). The backend is the
model-free ``standin_backends.ToyBackend``: no QNN, no executorch, seconds to run.
ToyBackend: the prompt "hello big world now" is BOS + 4 words = 5 tokens; the row of position p
predicts token 3 + p % 61 (piece " t<id>") or EOS ("</s>") when p is in ``eos_at``.
"""
from __future__ import annotations

import io
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.support import executor_runner_standin as ex
from tests.support import llama_runner_standin as ll
from tests.support import standin_backends as sb

PROMPT = "hello big world now"
P = 5


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    dir: Path
    backend: sb.ToyBackend

    @property
    def text(self) -> str | None:
        path = self.dir / "outputs.txt"
        return path.read_text() if path.exists() else None

    @property
    def speed(self) -> str | None:
        path = self.dir / "inference_speed.txt"
        return path.read_text() if path.exists() else None

    @property
    def observers(self) -> list[dict]:
        return [json.loads(line[len("PyTorchObserver "):]) for line in self.stdout.splitlines()
                if line.startswith("PyTorchObserver ")]

    def new_pieces(self, prompt: str = PROMPT) -> list[str]:
        assert self.text is not None and self.text.startswith(prompt)
        return re.findall(r" t\d+|</s>", self.text[len(prompt):])


def llama(tmp_path: Path, *args: str, prompt: str | None = PROMPT, scale: float | None = None,
          **toy) -> Run:
    """Run the llama stand-in in-process on a ToyBackend (context 64, prefill AR 4)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "m.pte").touch()
    (tmp_path / "tok.bin").touch()
    backend = sb.ToyBackend(**{"context_len": 64, "prefill_ar": 4, **toy})
    argv = ["--model_path", str(tmp_path / "m.pte"), "--tokenizer_path", str(tmp_path / "tok.bin"),
            "--output_path", str(tmp_path / "outputs.txt"),
            "--performance_output_path", str(tmp_path / "inference_speed.txt"), *args]
    if prompt is not None:
        argv += ["--prompt", prompt]
    out, err = io.StringIO(), io.StringIO()
    code = ll.run(argv, lambda request: backend, out, err, scale)
    return Run(code, out.getvalue(), err.getvalue(), tmp_path, backend)


# (eval_mode, --seq_len, new tokens in outputs.txt, observer generated_tokens)
SEQ_LEN_ROWS = [
    # runner.cpp:generate_from_prompt_or_file + token_generator.cpp:TokenGenerator::generate:
    # prefill makes 1 token, the loop `while (pos < seq_len - 1)` from pos P makes S - 1 - P
    ("1", "20", 15, 14),
    ("1", "6", 1, 0),  # P == S - 1: only the prefill token
    ("0", "20", 15, 14),  # kv mode: AR-1 prompt processing, same arithmetic
    ("2", "20", 15, 14),  # lhd_token_generator.cpp:LhdTokenGenerator::generate, same bound
    ("1", "500", 59, 58),  # runner.cpp:generate_from_prompt_or_file clamps S to context 64
    ("1", "0", 59, 58),  # ... and S <= 0 means the compiled context
]


@pytest.mark.parametrize(("mode", "seq_len", "new", "decoded"), SEQ_LEN_ROWS)
def test_seq_len_counts_prompt_plus_output(tmp_path, mode, seq_len, new, decoded):
    r = llama(tmp_path, "--eval_mode", mode, "--seq_len", seq_len)
    assert r.code == 0, r.stderr
    assert len(r.new_pieces()) == new
    assert r.observers[-1]["generated_tokens"] == decoded
    assert r.observers[-1]["prompt_tokens"] == P
    if int(seq_len) > 64:
        assert "Requested seq_len (500) exceeds compiled max_context_len (64) without attention " \
               "sink. Clamping to 64." in r.stderr


ABORT_ROWS = [
    # runner.cpp:generate_from_prompt_or_file: cur_pos + P < seq_len or ET_CHECK_MSG -> abort
    (["--seq_len", str(P)], {}, "sequence length exceeded - please increase the seq_len value"),
    (["--seq_len", "3"], {}, "sequence length exceeded - please increase the seq_len value"),
    # prompt_processor.cpp:PromptProcessor::prefill: P <= context - prefill AR (10 > 16 - 8)
    (["--seq_len", "16", "--prompt", "a b c d e f g h i"], {"context_len": 16, "prefill_ar": 8},
     "The sequence length exceeds the maximum limit that the prompt processor can handle."),
    # qnn_llama_runner.cpp:main: logits only in kv mode
    (["--eval_mode", "1", "--dump_logits_path", "x.bin"], {},
     "Only TokenGenerator(kv) mode is supported to dump all logits."),
    (["--eval_mode", "2", "--dump_logits_path", "x.bin"], {},
     "Only TokenGenerator(kv) mode is supported to dump all logits."),
    (["--tokenized_prompt", "t.raw"], {}, "Only provide prompt or tokenized_input but not both."),
    # runner.cpp:Runner::Runner
    (["--decoder_model_version", "llama9"], {}, "Unsupported Decoder Model"),
    # runner.cpp:generate_from_prompt_or_file
    (["--prompt", ""], {}, "prompt cannot be null"),
]


@pytest.mark.parametrize(("args", "toy", "message"), ABORT_ROWS)
def test_fatal_checks_abort(tmp_path, args, toy, message):
    prompt = None if "--prompt" in args else PROMPT
    r = llama(tmp_path, *args, prompt=prompt, **toy)
    assert r.code == ll.common.ABORT_EXIT == 134  # std::abort(): SIGABRT
    assert re.search(r"^F .*assert failed .*: " + re.escape(message) + "$", r.stderr, re.M)
    assert "PyTorchObserver" not in r.stdout and r.speed is None
    assert not (tmp_path / "x.bin").exists()
    assert r.text in (None, "")  # start_runner writes outputs.txt only at a normal end


def test_prefill_eos_is_not_checked_decode_eos_stops(tmp_path):
    # token_generator.cpp:TokenGenerator::generate checks EOS only after decode steps and
    # writes the EOS piece; generated_tokens counts it
    stop = llama(tmp_path / "a", "--seq_len", "20", eos_at=(7,))
    assert stop.text == PROMPT + " t7 t8 t9</s>"
    assert stop.observers[0]["generated_tokens"] == 3
    assert stop.stdout.startswith("\n") and "Reached to the end of generation" in stop.stderr
    first = llama(tmp_path / "b", "--seq_len", "20", eos_at=(P - 1,))
    assert first.new_pieces()[0] == "</s>" and len(first.new_pieces()) == 15


def test_truncation_warning(tmp_path):
    # token_generator.cpp:TokenGenerator::generate, no EOS before the seq_len limit
    r = llama(tmp_path, "--seq_len", "20")
    assert ("Warning: Generation stopped at seq_len limit (20) without reaching EOS token. "
            "Response may be incomplete.") in r.stderr
    assert "- seq_len (20) is less than compiled max_context_len (64). Consider increasing " \
           "--seq_len (up to 64)." in r.stderr


ECHO_ROWS = [
    # qnn_llama_runner.cpp:get_formatted_prompt; runner.cpp echoes the formatted prompt
    ([], PROMPT),
    (["--decoder_model_version", "llama3", "--system_prompt", "Be brief"],
     "<|start_header_id|>system<|end_header_id|>\n\nBe brief<|eot_id|><|start_header_id|>user"
     f"<|end_header_id|>\n\n{PROMPT}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
    (["--decoder_model_version", "qwen3"],
     f"<|im_start|>user\n{PROMPT}<|im_end|>\n<|im_start|>assistant"),
]


@pytest.mark.parametrize(("args", "echo"), ECHO_ROWS)
def test_output_echoes_formatted_prompt(tmp_path, args, echo):
    r = llama(tmp_path, "--seq_len", "60", *args)
    assert r.code == 0 and r.text.startswith(echo) and r.text != echo


def test_turns_share_positions(tmp_path):
    # qnn_llama_runner.cpp:start_runner loops num_iters x prompts; runner.cpp keeps cur_pos_
    # and adds BOS only at position 0
    r = llama(tmp_path, "--seq_len", "20", "--num_iters", "2", eos_at=(7,))
    assert r.text.startswith(PROMPT + " t7 t8 t9</s>" + PROMPT + " t14 t15")
    assert [o["prompt_tokens"] for o in r.observers] == [P, P - 1]
    assert len(r.backend.calls) > 0 and ("prefill_forward", 4, 8) in r.backend.calls
    over = llama(tmp_path / "b", "--seq_len", "20", "--num_iters", "2")
    assert over.code == 134 and "sequence length exceeded" in over.stderr  # 19 + 4 >= 20


def test_tokenized_prompt_echoes_the_path(tmp_path):
    # runner.cpp:generate_from_prompt_or_file echoes `prompt`, here the file name
    raw = tmp_path / "t.raw"
    np.array([1, 5, 6], dtype=np.uint64).tofile(raw)
    r = llama(tmp_path, "--tokenized_prompt", str(raw), "--seq_len", "8", prompt=None)
    assert r.code == 0 and r.text.startswith(str(raw)) and r.observers[0]["prompt_tokens"] == 3


COSTS = {"prefill_call_s": 0.1, "kv_call_s": 0.05}


@pytest.mark.parametrize(("seq_len", "scale"), [("20", None), ("20", 10.0), ("6", None)])
def test_inference_speed_file(tmp_path, seq_len, scale):
    # runner.cpp:print_performance_report: decode steps / total inference ms * 1000, or the
    # prompt rate when nothing was decoded; written with ostream's default (%g) format
    r = llama(tmp_path, "--seq_len", seq_len, scale=scale, **COSTS)
    o = r.observers[0]
    if o["generated_tokens"]:
        want = o["generated_tokens"] / (o["inference_end_ms"] - o["inference_start_ms"]) * 1000
    else:
        want = P / (o["prompt_eval_end_ms"] - o["inference_start_ms"]) * 1000
    assert r.speed == f"{want:g}"
    if seq_len == "20":  # 2 prefill calls (0.2 s) + 14 decode calls (0.7 s), times the scale
        assert float(r.speed) == pytest.approx(14 / 0.9 / (scale or 1), rel=0.02)
        assert o["decode_token_per_sec"] == pytest.approx(20 / (scale or 1), rel=0.02)


def test_observer_line_and_stat_lines(tmp_path):
    # extension/llm/runner/stats.h:stats_to_json_string (key order) and print_report
    r = llama(tmp_path, "--seq_len", "20", **COSTS)
    assert list(r.observers[0]) == [
        "prefill_token_per_sec", "decode_token_per_sec", "prompt_tokens", "generated_tokens",
        "model_load_start_ms", "model_load_end_ms", "inference_start_ms", "inference_end_ms",
        "model_execution_start_ms", "model_execution_end_ms", "prompt_eval_end_ms",
        "first_token_ms", "aggregate_sampling_time_ms", "aggregate_model_execution_time_ms",
        "SCALING_FACTOR_UNITS_PER_SECOND"]
    assert re.search(r"^I \d\d:\d\d:\d\d\.\d{6} executorch:stats\.h:\d+\] \tPrompt Tokens: 5    "
                     r"Generated Tokens: 14$", r.stderr, re.M)
    assert re.search(r"\t\tPrompt evaluation:\t0\.2\d+ \(seconds\)\t\t Rate: \t\d+\.\d{6} "
                     r"\(tokens/second\)", r.stderr)
    assert re.search(r"\t\tGenerated 14 tokens:\t0\.7\d+ \(seconds\)\t\t Rate: \t", r.stderr)
    # rates are left out when their interval is 0 ms
    st = dict.fromkeys(ll.OBSERVER_KEYS, 0)
    assert ll.observer_json(st).startswith('{"prompt_tokens":0,')


DUMP_ROWS = [
    # runner.cpp:save_logits: prefill rows (AR-1 in kv mode: P rows) then one row per decode
    # step, raw dtype; device_evaluator.py:post_process_logits reads the first P rows
    ("uint16", "12", P + 6),
    ("float32", "12", P + 6),
    ("uint16", str(P + 1), P),
]


@pytest.mark.parametrize(("dtype", "seq_len", "rows"), DUMP_ROWS)
def test_dump_logits_in_kv_mode(tmp_path, dtype, seq_len, rows):
    dump = tmp_path / "logits.bin"
    r = llama(tmp_path, "--eval_mode", "0", "--seq_len", seq_len, "--dump_logits_path", str(dump),
              dtype=dtype)
    assert r.code == 0, r.stderr
    data = np.fromfile(dump, dtype=dtype).reshape(-1, 64)
    assert data.shape[0] == rows
    assert int(data[P - 1].argmax()) == 7  # the prefill token " t7"
    assert [f" t{t}" for t in data[P:].argmax(axis=1)] == r.new_pieces()[1:]
    assert not (tmp_path / "none").exists()


def test_no_dump_without_the_flag(tmp_path):
    r = llama(tmp_path, "--eval_mode", "0", "--seq_len", "12")
    assert r.code == 0 and list(tmp_path.glob("*.bin")) == [tmp_path / "tok.bin"]


UPSTREAM_LLAMA_FLAGS = {  # qnn_llama_runner.cpp DEFINE_*
    "decoder_model_version": "llama2", "model_path": "kv_llama_qnn.pte",
    "attention_sink_rope_path": "", "output_path": "outputs.txt",
    "performance_output_path": "inference_speed.txt", "dump_logits_path": "",
    "tokenizer_path": "tokenizer.bin", "prompt": "The answer to the ultimate question is",
    "tokenized_prompt": "", "system_prompt": "", "temperature": 0.0, "seq_len": 128,
    "eval_mode": 1, "shared_buffer": False, "num_iters": 1, "ngram": 0, "window": 0, "gcap": 0}


def test_llama_flags_and_gflags_syntax(tmp_path):
    assert {k: d for k, (_, d) in ll.FLAGS.items()} == UPSTREAM_LLAMA_FLAGS
    values, explicit, _ = ex.parse_gflags(["--seq_len=7", "-eval_mode", "0", "--shared_buffer",
                                           "--temperature", "0.5"], ll.FLAGS)
    assert (values["seq_len"], values["eval_mode"], values["shared_buffer"]) == (7, 0, True)
    assert ex.parse_gflags(["--noshared_buffer"], ll.FLAGS)[0]["shared_buffer"] is False
    assert explicit == {"seq_len", "eval_mode", "shared_buffer", "temperature"}
    bad = llama(tmp_path, "--bogus", "1")
    assert bad.code == 1 and "ERROR: unknown command line flag 'bogus'" in bad.stderr


@pytest.mark.parametrize("args", [[], ["--prompt=" + PROMPT]])
def test_prompts_only_from_separate_prompt_args(tmp_path, args):
    # qnn_llama_runner.cpp:CollectPrompts takes only `--prompt VALUE`: nothing is generated
    r = llama(tmp_path, *args, prompt=None)
    assert r.code == 0 and r.text == "" and r.observers == []


def test_load_failures(tmp_path):
    # runner.cpp:Runner::load returns an error; start_runner's Result::get() aborts (CheckOk)
    (tmp_path / "tok.bin").touch()
    r = llama(tmp_path, "--tokenizer_path", str(tmp_path / "missing.bin"))
    assert r.code == 134 and "Failed to load tokenizer with" in r.stderr
    assert "In function CheckOk(), assert failed: hasValue_" in r.stderr
    # ... but the tokenized-prompt path only ignores the returned error: exit 0, empty output
    quiet = llama(tmp_path / "b", "--tokenized_prompt", "t.raw", "--tokenizer_path", "nope",
                  prompt=None)
    assert quiet.code == 0 and quiet.text == "" and quiet.observers == []


def test_real_process_aborts_through_a_shell(tmp_path):
    """The launcher runs the stand-in as a process: a real SIGABRT, shell status 134."""
    launcher = ll.write_launcher(tmp_path / "qnn_llama_runner",
                                 env={sb.TOY_ENV: json.dumps({"context_len": 64})})
    (tmp_path / "m.pte").touch()
    (tmp_path / "t.bin").touch()
    base = f"cd {tmp_path} && ./qnn_llama_runner --model_path m.pte --tokenizer_path t.bin " \
           f"--prompt '{PROMPT}'"
    ok = subprocess.run(["bash", "-c", f"{base} --seq_len 8 > run.log 2>&1"], timeout=60)
    log = (tmp_path / "run.log").read_text()
    assert ok.returncode == 0 and "PyTorchObserver {" in log and launcher.exists()
    bad = subprocess.run(["bash", "-c", f"{base} --seq_len 5 > run.log 2>&1"], timeout=60)
    log = (tmp_path / "run.log").read_text()
    assert bad.returncode == 134 and "sequence length exceeded" in log
    assert "PyTorchObserver" not in log and (tmp_path / "outputs.txt").read_text() == ""

