"""Minimum measured work a perf figure must rest on."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.perf.minimum import Work, check_minimum, measured_work
from pytest_qnn_genai.runtime.result import PerfStats


def test_minimum_work() -> None:
    short = check_minimum(Work(48, 0.03), min_tokens=64, min_seconds=1.0, figure="decode_tok_s")
    assert short == ("decode_tok_s rests on too little work (48 tokens < 64; 0.030 s measured "
                     "< 1 s): not gated")
    assert "tokens" not in (check_minimum(Work(2000, 0.5), min_tokens=64, min_seconds=1.0) or "")
    assert check_minimum(Work(2000, 1.25), min_tokens=64, min_seconds=1.0) is None
    assert check_minimum(Work(10, 0.2), min_tokens=8, min_seconds=0.1) is None


def _stats(prompt: int, generated: int, prefill: float, decode: float) -> PerfStats:
    return PerfStats(prompt_tokens=prompt, generated_tokens=generated, model_load_s=0.1,
                     prefill_tok_s=prefill, decode_tok_s=decode, ttft_s=0.01)


def test_measured_work_pools_runs() -> None:
    runs = [_stats(4, 100, 400.0, 200.0), _stats(4, 300, 200.0, 100.0)]
    decode = measured_work(runs, "decode_tok_s")  # decode steps: the prefill token is not one
    assert (decode.tokens, decode.seconds) == (398, pytest.approx(99 / 200 + 299 / 100))
    assert decode.rate == pytest.approx(398 / 3.485)
    prefill = measured_work(runs, "prefill_tok_s")
    assert (prefill.tokens, prefill.seconds) == (8, pytest.approx(0.03))
    assert check_minimum(prefill, min_tokens=64, min_seconds=1.0,
                         figure="prefill_tok_s").startswith("prefill_tok_s rests on")
    assert measured_work([_stats(4, 10, 0.0, 0.0)], "decode_tok_s") == Work(0, 0.0)
    with pytest.raises(ValueError, match="got 'ttft_s'"):
        measured_work(runs, "ttft_s")
