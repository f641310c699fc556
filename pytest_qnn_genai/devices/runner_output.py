"""Parse what ``qnn_llama_runner`` leaves behind into :class:`~pytest_qnn_genai.results.RunResult`.

Formats (ExecuTorch ``extension/llm/runner/stats.h`` and ``examples/qualcomm/oss_scripts/llama``
at 1.5.1):

* the run log has ``PyTorchObserver {json}`` (``printf``) with ``prompt_tokens``,
  ``generated_tokens``, ``*_ms`` timestamps and, only when the interval is positive,
  ``prefill_token_per_sec = prompt_tokens / (prompt_eval_end - inference_start)`` and
  ``decode_token_per_sec = generated_tokens / (inference_end - prompt_eval_end)``; then
  ``ET_LOG`` lines ``Prompt evaluation: X (seconds) Rate: Y (tokens/second)`` and
  ``Generated N tokens: X (seconds) Rate: Y (tokens/second)`` (the fallback; ``ET_LOG`` lines
  exist only in a build that logs to stderr: not an Android build, not a release build);
* ``outputs.txt`` holds the echoed prompt (the ``--tokenized_prompt`` file's path when the prompt
  came as ids), the prefill token's piece, then every decode step's piece, the EOS piece included
  (``</s>`` for a llama2.c tokenizer); an EOS from prefill is printed and generation goes on;
* ``inference_speed.txt`` holds one float: decode steps over total inference time (the prompt
  rate when nothing was decoded) — not the generated tokens' rate;
* ``--dump_logits_path`` writes the raw logits tensors back to back, no header: every prefill
  chunk (``ar_len`` rows each, padding rows included), then one row per decode step. Elements
  are uint16 (quantized) or float32 when the model's logits are 32-bit. The runner refuses the
  flag unless ``--eval_mode 0`` (kv), where ``ar_len`` is 1.

In that layout generated token 0 comes from prefill row ``P - 1`` (``P`` prompt tokens) and
generated token ``k >= 1`` from decode row ``k - 1``.

qnn_llama_runner's ``generated_tokens`` counts decode steps only, EOS included; the token that
prefill produced is not in it. ``PerfStats.generated_tokens`` here counts every produced token
(observer value + 1), as the x86 host runner does; the decode rate is the observer's (decode
steps / decode time).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from pytest_qnn_genai.runtime.result import PerfStats, RunResult

OBSERVER_PREFIX = "PyTorchObserver "
_NUMBER = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_PROMPT_EVAL = re.compile(r"Prompt evaluation:\s*" + _NUMBER + r"\s*\(seconds\)\s*Rate:\s*" + _NUMBER)
_GENERATED = re.compile(r"Generated\s+(\d+)\s+tokens:\s*" + _NUMBER + r"\s*\(seconds\)\s*Rate:\s*"
                        + _NUMBER)
_MODEL_LOAD = re.compile(r"Model Load Time:\s*" + _NUMBER + r"\s*\(seconds\)")
_FIRST_TOKEN = re.compile(r"Time to first generated token:\s*" + _NUMBER + r"\s*\(seconds\)")
_TOKEN_COUNTS = re.compile(r"Prompt Tokens:\s*(\d+)\s+Generated Tokens:\s*(\d+)")


class RunnerOutputError(ValueError):
    """The runner's files are missing something the parser needs."""


@dataclass(frozen=True)
class RunnerFiles:
    """Files pulled back from one runner invocation (``None`` when the runner wrote none)."""

    local_dir: Path
    outputs_txt: Path | None
    inference_speed_txt: Path | None
    logits_bin: Path | None
    run_log: Path | None
    exit_code: int


@dataclass(frozen=True)
class LogitsQuant:
    """How to turn the dumped logits into floats: ``(q - zero_point) * scale``."""

    scale: float
    zero_point: int
    dtype: str = "uint16"  # "float32" when the model's logits are not quantized


class ObserverStats(TypedDict, total=False):
    """One ``PyTorchObserver`` JSON object of the runner's log (the fields read here)."""

    prompt_tokens: int
    generated_tokens: int
    model_load_start_ms: float
    model_load_end_ms: float
    inference_start_ms: float
    prompt_eval_end_ms: float
    first_token_ms: float
    inference_end_ms: float
    prefill_token_per_sec: float
    decode_token_per_sec: float


def observer_stats(log_text: str) -> list[ObserverStats]:
    """Every ``PyTorchObserver`` JSON object in the log, in order (one per generate call)."""
    found = []
    for line in log_text.splitlines():
        start = line.find(OBSERVER_PREFIX)
        if start < 0:
            continue
        payload = line[start + len(OBSERVER_PREFIX):].strip()
        try:
            found.append(json.loads(payload))
        except json.JSONDecodeError as exc:
            raise RunnerOutputError(f"malformed PyTorchObserver line: {line!r}") from exc
    return found


def _rate(count: float, start_ms: float, end_ms: float) -> float:
    span = end_ms - start_ms
    return count / span * 1000.0 if span > 0 else 0.0


def perf_from_observer(stats: ObserverStats) -> PerfStats:
    """PerfStats from one ``PyTorchObserver`` object (rates recomputed when the runner omitted them)."""
    try:
        prompt = int(stats["prompt_tokens"])
        decode_steps = int(stats["generated_tokens"])
        start = float(stats["inference_start_ms"])
        prompt_end = float(stats["prompt_eval_end_ms"])
        end = float(stats["inference_end_ms"])
    except KeyError as exc:
        raise RunnerOutputError(f"PyTorchObserver stats lack {exc.args[0]!r}: {stats}") from exc
    prefill = stats.get("prefill_token_per_sec", _rate(prompt, start, prompt_end))
    decode = stats.get("decode_token_per_sec", _rate(decode_steps, prompt_end, end))
    load_ms = float(stats.get("model_load_end_ms", 0)) - float(stats.get("model_load_start_ms", 0))
    first = float(stats.get("first_token_ms", prompt_end))
    return PerfStats(prompt_tokens=prompt, generated_tokens=decode_steps + 1,
                     model_load_s=max(load_ms, 0.0) / 1000.0, prefill_tok_s=float(prefill),
                     decode_tok_s=float(decode), ttft_s=max(first - start, 0.0) / 1000.0)


def perf_from_report_lines(log_text: str) -> PerfStats | None:
    """PerfStats from the human-readable ``print_report`` lines, or None if they are absent."""
    prompt_eval = _PROMPT_EVAL.findall(log_text)
    generated = _GENERATED.findall(log_text)
    if not prompt_eval or not generated:
        return None
    prompt_s, prompt_rate = (float(v) for v in prompt_eval[-1])
    n_generated, _gen_s, gen_rate = generated[-1]
    counts = _TOKEN_COUNTS.findall(log_text)
    prompt_tokens = int(counts[-1][0]) if counts else round(prompt_s * prompt_rate)
    load = _MODEL_LOAD.findall(log_text)
    first = _FIRST_TOKEN.findall(log_text)
    return PerfStats(prompt_tokens=prompt_tokens, generated_tokens=int(n_generated) + 1,
                     model_load_s=float(load[-1]) if load else 0.0, prefill_tok_s=prompt_rate,
                     decode_tok_s=float(gen_rate), ttft_s=float(first[-1]) if first else prompt_s)


def parse_perf(log_text: str) -> PerfStats:
    """Perf of the last generate call: the JSON line if present, else the report lines."""
    stats = observer_stats(log_text)
    if stats:
        return perf_from_observer(stats[-1])
    perf = perf_from_report_lines(log_text)
    if perf is None:
        raise RunnerOutputError("run log has neither a PyTorchObserver line nor "
                                "'Prompt evaluation'/'Generated N tokens' report lines")
    return perf


def read_inference_speed(path: Path) -> float:
    """The single float in ``inference_speed.txt`` (generated tokens / total inference s)."""
    text = path.read_text().strip()
    try:
        return float(text)
    except ValueError as exc:
        raise RunnerOutputError(f"{path} does not hold one number: {text[:80]!r}") from exc


def read_raw_logits(path: Path, vocab_size: int, dtype: str = "uint16") -> np.ndarray:
    """All dumped rows as the runner wrote them, shape ``[rows, vocab_size]``."""
    raw = np.fromfile(path, dtype=np.dtype(dtype))
    if raw.size % vocab_size:
        raise RunnerOutputError(f"{path}: {raw.size} {dtype} values is not a whole number of "
                                f"rows of vocab size {vocab_size}")
    return raw.reshape(-1, vocab_size)


def dequantize(rows: np.ndarray, quant: LogitsQuant) -> np.ndarray:
    """``(q - zero_point) * scale`` as float32 (device_evaluator.py:post_process_logits); float
    rows are copied as they are."""
    if rows.dtype == np.float32:
        return rows.astype(np.float32, copy=True)
    return (rows.astype(np.float32) - np.float32(quant.zero_point)) * np.float32(quant.scale)


def read_logits(path: Path, vocab_size: int, quant: LogitsQuant) -> np.ndarray:
    """All dumped rows, dequantized to float32, shape ``[rows, vocab_size]``."""
    return dequantize(read_raw_logits(path, vocab_size, quant.dtype), quant)


def generated_token_logits(rows: np.ndarray, prompt_tokens: int, prefill_ar_len: int = 1) -> np.ndarray:
    """Rows that produced each generated token: prefill row ``P - 1``, then every decode row."""
    if prompt_tokens < 1 or prefill_ar_len < 1:
        raise ValueError("prompt_tokens and prefill_ar_len must be positive")
    prefill_rows = -(-prompt_tokens // prefill_ar_len) * prefill_ar_len
    if rows.shape[0] < prefill_rows:
        raise RunnerOutputError(f"logits dump has {rows.shape[0]} rows, fewer than the "
                                f"{prefill_rows} prefill rows of a {prompt_tokens}-token prompt")
    return np.concatenate([rows[prompt_tokens - 1:prompt_tokens], rows[prefill_rows:]], axis=0)


def parse_runner_files(files: RunnerFiles, prompt: str, *, device: str,
                       vocab_size: int | None = None, quant: LogitsQuant | None = None,
                       prefill_ar_len: int = 1, prompt_tokens: list[int] | None = None,
                       tokens: list[int] | None = None) -> RunResult:
    """Build a RunResult from the pulled files.

    The runner does not report token ids: ``text`` (``outputs.txt`` less the echoed prompt)
    is authoritative and the caller may re-tokenize; pass ``prompt_tokens``/``tokens`` if
    known. Logits are parsed only when ``logits.bin`` exists and ``vocab_size``/``quant``
    are given.
    """
    if files.run_log is None or files.outputs_txt is None:
        raise RunnerOutputError(f"runner left no run.log/outputs.txt in {files.local_dir}")
    log_text = files.run_log.read_text(errors="replace")
    perf = parse_perf(log_text)
    full_text = files.outputs_txt.read_text(errors="replace")
    text = full_text[len(prompt):] if full_text.startswith(prompt) else full_text
    extra: dict[str, object] = {"outputs_txt": full_text, "run_log": str(files.run_log),
                             "observer": observer_stats(log_text)}
    if files.inference_speed_txt is not None:
        extra["inference_speed_tok_s"] = read_inference_speed(files.inference_speed_txt)
    logits = None
    if files.logits_bin is not None and vocab_size is not None and quant is not None:
        rows = read_logits(files.logits_bin, vocab_size, quant)
        logits = generated_token_logits(rows, perf.prompt_tokens, prefill_ar_len)
        if logits.shape[0] != perf.generated_tokens:
            raise RunnerOutputError(f"logits dump gives {logits.shape[0]} generated rows but the "
                                    f"stats report {perf.generated_tokens} generated tokens")
        if tokens is not None and len(tokens) != logits.shape[0]:
            raise RunnerOutputError(f"{len(tokens)} tokens but {logits.shape[0]} logits rows")
    return RunResult(prompt_tokens=list(prompt_tokens or []), tokens=list(tokens or []), text=text,
                     perf=perf, logits=logits, device=device, extra=extra)
