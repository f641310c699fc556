"""What licenses keeping a program's emulator outputs (``pipeline/outputs.py``): the emulator is
deterministic, and a kept output is handed back only for the program and inputs it came from.

The default case's staged program, on the SM8650 emulator: two generations and two prompt passes
of one program are bit-identical; a judged generation is run once and then found, for a copy of
the program's bytes too, while a program with other bytes (the fault: an output reused for a
program it did not come from) and another prompt each get a run of their own.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.pipeline import Pipeline, outputs
from pytest_qnn_genai.runtime.run import prompt_logits, run

N_NEW = 16


@pytest.fixture(scope="module")
def program(qnn_pipeline, qnn_sdk, case, sm8650_emulator) -> Path:
    return qnn_pipeline.pte(case, sm8650_emulator).pte


def test_two_runs_of_one_program_are_bit_identical(qnn_pipeline, program, case,
                                                   sm8650_emulator) -> None:
    version = qnn_pipeline.decoder_model_version(case)
    a, b = (run(program, case.path("tokenizer_model"), case.eval_prompt, sm8650_emulator, N_NEW,
                decoder_model_version=version) for _ in range(2))
    assert a.logits is not None and b.logits is not None and len(a.tokens) > 1
    assert a.tokens == b.tokens and a.logits.tobytes() == b.logits.tobytes()
    ids = a.prompt_tokens + a.tokens
    first, second = (prompt_logits(program, sm8650_emulator, ids) for _ in range(2))
    assert first.shape == (len(ids), a.logits.shape[1]) and first.tobytes() == second.tobytes()


def test_a_judged_run_is_kept_for_its_program_and_inputs(qnn_pipeline, program, case,
                                                         sm8650_emulator, tmp_path, monkeypatch):
    cache = ArtifactCache(tmp_path / "cache", qnn_pipeline.cache.versions)
    pipeline = Pipeline(cache)
    version = qnn_pipeline.decoder_model_version(case)

    def judged(pte: Path, prompt: str = case.eval_prompt):
        return outputs.generation(pipeline, case, sm8650_emulator, pte, prompt, N_NEW, version)

    first = judged(program)
    assert cache.stats.builds == 1 and first.logits is not None
    again = judged(program)
    assert cache.stats.builds == 1 and again.extra["outputs_from"].startswith("target-run ")
    assert again.tokens == first.tokens and again.text == first.text
    assert again.logits is not None and again.logits.tobytes() == first.logits.tobytes()
    copy = tmp_path / "copy.pte"
    shutil.copyfile(program, copy)
    judged(copy)  # the same bytes elsewhere: the same run
    assert cache.stats.builds == 1
    real = outputs.file_digest
    monkeypatch.setattr(outputs, "file_digest",
                        lambda pte: "0" * 64 if Path(pte) == copy else real(pte))
    judged(copy)  # other bytes: a run of its own
    assert cache.stats.builds == 2
    judged(program, "Once upon a time there was")  # another prompt: a run of its own
    assert cache.stats.builds == 3
    ids = first.prompt_tokens + first.tokens
    rows = outputs.prompt_logits(pipeline, sm8650_emulator, program, ids)
    assert np.array_equal(rows, outputs.prompt_logits(pipeline, sm8650_emulator, program, ids))
    assert cache.stats.builds == 4
