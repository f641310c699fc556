"""What licenses judging the emulator's speed by counted work (``runtime/work.py``,
``perf/work.py``): one program counts the same instructions in two processes, a count is kept for
its program and workload, and a program that truly does more (stories260k's 16-bit KV cache
against the case's 8-bit one: more bytes through every attention op) counts more and fails the
judge against the staged program, naming the kernels that grew; against an accepted program
(exact) a program that counts fewer fails too, until accepted.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.perf import work
from pytest_qnn_genai.pipeline import Pipeline, outputs
from pytest_qnn_genai.runtime.work import count_work

STEPS = 2


@pytest.fixture(scope="module")
def program(qnn_pipeline, qnn_sdk, case, sm8650_emulator) -> Path:
    return qnn_pipeline.pte(case, sm8650_emulator).pte


@pytest.fixture(scope="module")
def ids(case, program) -> list[int]:
    return work.workload(case, [program])[0]


def test_one_program_counts_equal_work_in_two_processes_and_is_kept(
        qnn_pipeline, program, ids, sm8650_emulator, tmp_path) -> None:
    pipeline = Pipeline(ArtifactCache(tmp_path / "cache", qnn_pipeline.cache.versions))
    kept = outputs.program_work(pipeline, sm8650_emulator, program, ids, STEPS)
    assert pipeline.cache.stats.builds == 1
    again = outputs.program_work(pipeline, sm8650_emulator, program, ids, STEPS)
    assert pipeline.cache.stats.builds == 1 and again == kept  # found, not counted again
    fresh = count_work(program, ids, STEPS)  # another process under valgrind
    assert (fresh.prefill.calls, fresh.decode.calls) == (kept.prefill.calls, kept.decode.calls)
    assert len(kept.decode.calls) == STEPS and min(kept.figures.values()) > 10_000_000


def test_a_program_that_does_more_counts_more_and_fails_naming_kernels(
        qnn_pipeline, program, ids, case, sm8650_emulator) -> None:
    kv16 = qnn_pipeline.pte(case.variant("kv16"), sm8650_emulator).pte
    new, more = (qnn_pipeline.program_work(case, sm8650_emulator, p, ids, STEPS)
                 for p in (program, kv16))
    prefill, decode = work.judge("new", new, "kv16", more)
    assert not prefill.passed and not decode.passed, (str(prefill), str(decode))
    assert 1.0 < decode.b_count / decode.a_count < 1.1  # a few per cent, caught exactly
    assert decode.grown and all(b > a for _, a, b in decode.grown)
    assert "the kernels whose instructions grew most" in str(decode)
    assert all(v.passed for v in work.judge("kv16", more, "new", new))  # the other way round
    # against the accepted program every other count fails: fewer too, until it is accepted
    fewer = work.judge("accepted", more, "today", new, exact=True)
    assert not any(v.passed for v in fewer)
    assert all("runs fewer instructions than accepted, a change of the program: accept it"
               in str(v) for v in fewer)
    assert [v.row().rule for v in fewer] == ["equal", "equal"]
    assert all(v.passed for v in work.judge("accepted", new, "today", new, exact=True))
