"""A stand-in for ``qnn_llama_runner`` on a sandbox device: same flags, same output files.

The generation itself is delegated to a Python callable named by the environment variable
``QNN_GENAI_FAKE_RUNNER_BACKEND`` (``"module:function"``), called with a
:class:`RunnerRequest` and returning a :class:`RunnerReply`. This script then writes what the
real runner writes: ``--output_path`` (echoed prompt + text), ``--performance_output_path``
(generated tokens / total inference seconds), ``--dump_logits_path`` (raw rows, runner
layout) and a ``PyTorchObserver {json}`` line plus the report lines on stdout/stderr.

The x86 emulator host runner plugs in by providing such a callable (e.g.
``pytest_qnn_genai.runtime.host_runner:run_as_device_runner``) that loads ``model_path`` and
``tokenizer_path``, generates greedily and returns the raw (quantized) logits rows; then
``write_launcher(path, backend="pytest_qnn_genai.runtime.host_runner:run_as_device_runner")``
makes the executable that the device workspace pushes as ``qnn_llama_runner``.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BACKEND_ENV = "QNN_GENAI_FAKE_RUNNER_BACKEND"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class RunnerRequest:
    """The runner's command line, parsed."""

    model_path: str
    tokenizer_path: str
    prompts: list[str]
    seq_len: int
    eval_mode: int
    temperature: float
    dump_logits: bool


@dataclass(frozen=True)
class RunnerReply:
    """What a backend generated.

    ``generated_tokens`` counts decode steps as ExecuTorch's Stats does (the token produced
    by prefill is not counted); ``logits`` holds every dumped row in runner layout (prefill
    rows, then one per decode step), uint16 or float32.
    """

    text: str
    prompt_tokens: int
    generated_tokens: int
    prefill_s: float
    decode_s: float
    model_load_s: float = 0.0
    logits: np.ndarray | None = None


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="qnn_llama_runner")
    parser.add_argument("--model_path", default="kv_llama_qnn.pte")
    parser.add_argument("--tokenizer_path", default="tokenizer.bin")
    parser.add_argument("--prompt", action="append", default=[])
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--eval_mode", type=int, default=1)
    parser.add_argument("--output_path", default="outputs.txt")
    parser.add_argument("--performance_output_path", default="inference_speed.txt")
    parser.add_argument("--dump_logits_path", default="")
    for flag in ("--decoder_model_version", "--system_prompt", "--tokenized_prompt",
                 "--attention_sink_rope_path"):
        parser.add_argument(flag, default="")
    for flag in ("--num_iters", "--ngram", "--window", "--gcap"):
        parser.add_argument(flag, type=int, default=0)
    parser.add_argument("--shared_buffer", action="store_true")
    return parser.parse_args(argv)


def load_backend(spec: str) -> Callable[[RunnerRequest], RunnerReply]:
    """Import ``module:function``."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{BACKEND_ENV} must look like 'package.module:function', got {spec!r}")
    backend: Callable[[RunnerRequest], RunnerReply] = getattr(importlib.import_module(module_name), attr)
    return backend


def _observer_json(reply: RunnerReply, load_start: int) -> dict[str, float]:
    load_end = load_start + round(reply.model_load_s * 1000)
    start = load_end
    prompt_end = start + round(reply.prefill_s * 1000)
    end = prompt_end + round(reply.decode_s * 1000)
    stats: dict[str, float] = {}
    if prompt_end > start:
        stats["prefill_token_per_sec"] = reply.prompt_tokens / (prompt_end - start) * 1000
    if end > prompt_end:
        stats["decode_token_per_sec"] = reply.generated_tokens / (end - prompt_end) * 1000
    stats.update(prompt_tokens=reply.prompt_tokens, generated_tokens=reply.generated_tokens,
                 model_load_start_ms=load_start, model_load_end_ms=load_end,
                 inference_start_ms=start, inference_end_ms=end, model_execution_start_ms=0,
                 model_execution_end_ms=0, prompt_eval_end_ms=prompt_end,
                 first_token_ms=prompt_end, aggregate_sampling_time_ms=0,
                 aggregate_model_execution_time_ms=0, SCALING_FACTOR_UNITS_PER_SECOND=1000)
    return stats


def main(argv: list[str] | None = None) -> int:
    """Run like qnn_llama_runner; returns the process exit code."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.dump_logits_path and args.eval_mode != 0:
        print("Only TokenGenerator(kv) mode is supported to dump all logits.", file=sys.stderr)
        return 1
    for path in (args.model_path, args.tokenizer_path):
        if not os.path.isfile(path):
            print(f"E runner: failed to open {path}", file=sys.stderr)
            return 1
    spec = os.environ.get(BACKEND_ENV)
    if not spec:
        print(f"E runner: {BACKEND_ENV} is not set", file=sys.stderr)
        return 1
    request = RunnerRequest(args.model_path, args.tokenizer_path, args.prompt or [""],
                            args.seq_len, args.eval_mode, args.temperature,
                            bool(args.dump_logits_path))
    load_start = int(time.time() * 1000)
    reply = load_backend(spec)(request)
    stats = _observer_json(reply, load_start)
    Path(args.output_path).write_text(request.prompts[-1] + reply.text)
    total_s = (stats["inference_end_ms"] - stats["inference_start_ms"]) / 1000
    rate = reply.generated_tokens / total_s if total_s > 0 else 0.0
    Path(args.performance_output_path).write_text(f"{rate:g}")
    if args.dump_logits_path and reply.logits is not None:
        Path(args.dump_logits_path).write_bytes(np.ascontiguousarray(reply.logits).tobytes())
    print("PyTorchObserver " + json.dumps(stats, separators=(",", ":")), flush=True)
    print(f"I 00:00:00.000 executorch:stats.h:100] \tPrompt Tokens: {reply.prompt_tokens}    "
          f"Generated Tokens: {reply.generated_tokens}", file=sys.stderr)
    return 0


def scripted_backend(request: RunnerRequest) -> RunnerReply:
    """Deterministic plumbing backend (no model): vocab 16, 3 decode steps, row r peaks at r % 16.

    The prompt counts one token per word plus BOS. Used only to test transport and parsing.
    """
    vocab, steps = 16, 3
    prompt_tokens = len(request.prompts[-1].split()) + 1
    rows = np.full((prompt_tokens + steps, vocab), 100, dtype=np.uint16)
    rows[np.arange(rows.shape[0]), np.arange(rows.shape[0]) % vocab] = 60000
    return RunnerReply(text=" and then some", prompt_tokens=prompt_tokens, generated_tokens=steps,
                       prefill_s=0.05, decode_s=0.3, model_load_s=0.02,
                       logits=rows if request.dump_logits else None)


def write_launcher(path: Path, backend: str = "tests.support.fake_runner:scripted_backend",
                   python: str = sys.executable) -> Path:
    """Write an executable that runs this stand-in with ``backend``; push it as the runner."""
    path.write_text("#!/bin/sh\n"
                    f"export {BACKEND_ENV}='{backend}'\n"
                    f"export PYTHONPATH='{REPO_ROOT}'${{PYTHONPATH:+:$PYTHONPATH}}\n"
                    f"exec '{python}' -m tests.support.fake_runner \"$@\"\n")
    path.chmod(0o755)
    return path


if __name__ == "__main__":
    sys.exit(main())
