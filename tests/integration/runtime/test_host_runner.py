"""The Python hybrid runner on the x86 HTP emulator, judged against the legacy CPU QDQ reference."""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from pytest_qnn_genai.checks.numerics import rowwise_cosine
from pytest_qnn_genai.flows.legacy import LegacyArtifacts
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.runtime.host_runner import HybridRunner, HybridRunnerError
from pytest_qnn_genai.runtime.result import RunResult
from pytest_qnn_genai.targets import Target, soc

if TYPE_CHECKING:
    import torch

N_NEW = 24
MIN_COSINE = 0.99


SM8650_EMULATOR = Target(soc("SM8650"))


@pytest.fixture(scope="module")
def runner(legacy: LegacyArtifacts, qnn_sdk) -> HybridRunner:
    return HybridRunner(legacy.pte)


@pytest.fixture(scope="module")
def tokenizer(case: ModelCase):
    from pytest_qnn_genai.runtime.tokenizer import load_tokenizer

    return load_tokenizer(case.path("tokenizer_model"))


@pytest.fixture(scope="module")
def prompt(case: ModelCase, tokenizer) -> list[int]:
    return [tokenizer.bos_id] + tokenizer.encode(case.eval_prompt)


@pytest.fixture(scope="module")
def result(runner: HybridRunner, prompt: list[int]) -> RunResult:
    return runner.generate(prompt, N_NEW)


class _FrozenCacheRunner(HybridRunner):
    """Negative control: the KV cache is never written, so decode steps see no history."""

    def _write_cache(self, outputs, n_past, n_update) -> None:
        return None


@functools.lru_cache(maxsize=2)
def _qdq_program(qdq_path: Path) -> torch.export.ExportedProgram:
    import executorch.backends.qualcomm.quantizer.quantizer  # noqa: F401  (quantized ops)
    import torch

    return torch.export.load(str(qdq_path))


def qdq_logits(qdq_path: Path, tokens: Sequence[int]) -> np.ndarray:
    """CPU logits of the legacy QDQ decoder for every position of ``tokens`` (one causal pass)."""
    import torch

    ep = _qdq_program(qdq_path)
    example = ep.example_inputs[0]
    width = example[0].shape[-1]
    assert len(tokens) <= width
    ids = torch.zeros_like(example[0])
    ids[0, :len(tokens)] = torch.tensor(list(tokens), dtype=ids.dtype)
    masked = float(example[1].min())  # the graph's "masked" value (llama's PADDING_MASK_VALUE)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    mask = torch.full((width, width), masked).masked_fill(causal, 0.0).expand_as(example[1])
    pos = torch.arange(width, dtype=example[2].dtype).view_as(example[2])
    with torch.no_grad():
        logits = ep.module()(ids, mask.contiguous(), pos, *example[3:])[0][0]
    return logits[:len(tokens)].float().numpy()


def reference_for(legacy: LegacyArtifacts, run: RunResult) -> np.ndarray:
    """The QDQ logits that predicted each generated token (teacher-forced on the run's tokens)."""
    seq = run.prompt_tokens + run.tokens[:-1]
    first = len(run.prompt_tokens) - 1
    return qdq_logits(legacy.decode_qdq, seq)[first:first + len(run.tokens)]


def test_generation_is_deterministic(runner: HybridRunner, prompt: list[int],
                                     result: RunResult) -> None:
    again = runner.generate(prompt, N_NEW)
    assert again.tokens == result.tokens
    assert np.array_equal(again.logits, result.logits)


def test_generates_real_tokens(result: RunResult, runner: HybridRunner) -> None:
    assert len(result.tokens) == N_NEW or result.extra["stop_reason"] == "eos"
    assert all(0 <= t < runner.vocab_size for t in result.tokens)
    assert len(set(result.tokens)) > 1, "greedy output is one repeated token"
    assert result.logits.dtype == np.float32
    assert result.logits.shape == (len(result.tokens), runner.vocab_size)
    # greedy on raw quantized logits == greedy on the dequantized ones
    assert result.logits.argmax(-1).tolist() == result.tokens


def test_emulator_matches_the_cpu_qdq_reference(result: RunResult,
                                                legacy: LegacyArtifacts) -> None:
    ref = reference_for(legacy, result)
    cos = rowwise_cosine(ref, result.logits)
    assert cos.min() >= MIN_COSINE, f"per-step cosine {np.round(cos, 4).tolist()}"
    assert ref.argmax(-1).tolist() == result.tokens


def test_chunked_prefill_matches_the_reference(runner: HybridRunner, tokenizer,
                                               legacy: LegacyArtifacts) -> None:
    text = "Once upon a time, there was a little girl named Lily. She loved to play outside."
    ids = [tokenizer.bos_id] + tokenizer.encode(" ".join([text] * 4))
    ids = ids[:runner.prefill_ar_len * 2 + 7]  # three prefill chunks, the last one partial
    run = runner.generate(ids, 8)
    assert run.extra["prefill_chunks"] == 3
    assert len(run.extra["execute_s"]["prefill_forward"]) == 3
    cos = rowwise_cosine(reference_for(legacy, run), run.logits)
    assert cos.min() >= MIN_COSINE, f"per-step cosine {np.round(cos, 4).tolist()}"


def test_negative_control_frozen_kv_cache(result: RunResult, legacy: LegacyArtifacts,
                                          prompt: list[int], runner: HybridRunner) -> None:
    broken = _FrozenCacheRunner(legacy.pte).generate(prompt, N_NEW)
    ref = reference_for(legacy, broken)
    good = rowwise_cosine(reference_for(legacy, result), result.logits)
    bad = rowwise_cosine(ref, broken.logits)
    # the first token comes from prefill (within-call attention) and is unaffected
    assert bad[0] >= MIN_COSINE
    assert bad[1:].mean() < good[1:].mean() - 0.05 and bad[1:].min() < MIN_COSINE - 0.05, (
        f"frozen cache cosine {np.round(bad, 3).tolist()}")


def test_perf_figures_are_consistent(result: RunResult, prompt: list[int]) -> None:
    perf, extra = result.perf, result.extra
    assert perf.prompt_tokens == len(prompt) == len(result.prompt_tokens)
    assert perf.generated_tokens == len(result.tokens)
    assert perf.model_load_s > 0 and perf.prefill_tok_s > 0 and perf.ttft_s > 0
    assert perf.decode_tok_s > 0
    assert math.isclose(perf.prefill_tok_s, len(prompt) / extra["prefill_s"])
    assert math.isclose(perf.decode_tok_s, (len(result.tokens) - 1) / extra["decode_s"])
    assert perf.ttft_s == extra["prefill_s"]
    times = extra["execute_s"]
    assert len(times["prefill_forward"]) == extra["prefill_chunks"] == 1
    assert len(times["kv_forward"]) == len(result.tokens) - 1
    assert sum(times["prefill_forward"]) <= extra["prefill_s"]
    assert sum(times["kv_forward"]) <= extra["decode_s"]
    assert extra["runner_overhead_s"] >= 0


def test_stops_at_eos(runner: HybridRunner, prompt: list[int], result: RunResult,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    stop_token = result.tokens[5]
    monkeypatch.setattr(runner, "eos_ids", frozenset({stop_token}))
    run = runner.generate(prompt, N_NEW)
    assert run.tokens == result.tokens[:result.tokens.index(stop_token) + 1]
    assert run.extra["stop_reason"] == "eos"
    assert runner.generate(prompt, N_NEW, stop_at_eos=False).tokens == result.tokens


def test_stops_at_the_context_as_the_runner_does(runner: HybridRunner, tokenizer) -> None:
    """qnn_llama_runner clamps --seq_len to the compiled context and decodes while pos < seq_len
    - 1: P + generated = context (it never reads get_max_seq_len)."""
    n_prompt = runner.max_prompt_len
    ids = ([tokenizer.bos_id] + tokenizer.encode("Once upon a time " * 60))[:n_prompt]
    run = runner.generate(ids, 1000, stop_at_eos=False)
    assert run.extra["stop_reason"] == "context"
    assert len(ids) + len(run.tokens) == runner.context_len


def test_rejects_requests_beyond_the_program(runner: HybridRunner) -> None:
    with pytest.raises(HybridRunnerError, match=f"exceeds the {runner.max_prompt_len} "):
        runner.generate([1] * (runner.max_prompt_len + 1), 4)
    with pytest.raises(HybridRunnerError, match="outside the vocabulary"):
        runner.generate([1, runner.vocab_size], 4)
    with pytest.raises(HybridRunnerError, match="empty"):
        runner.generate([], 4)


def test_run_stage_on_the_emulator(legacy: LegacyArtifacts, case: ModelCase, runner: HybridRunner,
                                   tokenizer) -> None:
    from pytest_qnn_genai.runtime.run import run

    out = run(legacy.pte, case.path("tokenizer_model"), case.eval_prompt, SM8650_EMULATOR, 12)
    ids = [tokenizer.bos_id] + tokenizer.encode(case.eval_prompt)
    assert out.prompt_tokens == ids
    assert out.tokens == runner.generate(ids, 12).tokens
    full = tokenizer.decode(ids[1:] + out.tokens)
    assert out.text and full == tokenizer.decode(ids[1:]) + out.text
    assert out.device == SM8650_EMULATOR.device and out.extra["target"] == SM8650_EMULATOR.id


def test_run_stage_never_runs_a_phone_target_on_the_host(legacy: LegacyArtifacts,
                                                          case: ModelCase) -> None:
    from pytest_qnn_genai.runtime.run import RunStageError, run

    with pytest.raises(RunStageError, match="SM8650-htp-SERIAL1: not the emulator target"):
        run(legacy.pte, case.path("tokenizer_model"), "Once", Target(soc("SM8650"),
                                                                     device="SERIAL1"), 4)


def test_prompt_logits_are_the_prompt_processors_rows(runner: HybridRunner, prompt: list[int],
                                                      result: RunResult) -> None:
    """Teacher forcing (perplexity) reads the same prefill rows generation does: the last row of
    a prompt is the distribution the first generated token was chosen from, bit for bit, and a
    longer text (several AR chunks) keeps its earlier rows."""
    rows = runner.prompt_logits(prompt)
    assert rows.shape == (len(prompt), runner.vocab_size) and result.logits is not None
    assert np.array_equal(rows[-1], result.logits[0])
    longer = prompt + result.tokens[:40]  # crosses the 32-token prefill chunk
    more = runner.prompt_logits(longer)
    assert np.array_equal(more[:len(prompt)], rows)
    assert [int(t) for t in np.argmax(more[len(prompt) - 1:-1], axis=1)] == result.tokens[:40]
