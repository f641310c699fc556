"""The first prompt pass's inputs built from metadata alone (what the gate gives upstream's
executor runner on a phone) are the host runner's own, and the prefill check fails when the
graph is fed wrong inputs (its negative control)."""
from __future__ import annotations

import numpy as np
import torch

from pytest_qnn_genai.checks import numerics
from pytest_qnn_genai.hybrid import PREFILL
from pytest_qnn_genai.runtime.host_runner import HybridRunner
from pytest_qnn_genai.runtime.prefill import first_chunk_inputs
from pytest_qnn_genai.runtime.programs import run_method
from pytest_qnn_genai.runtime.pte_info import inspect_pte
from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer


def _ids(case) -> list[int]:
    return encode(load_tokenizer(case.path("tokenizer_model")), case.eval_prompt)


def test_first_chunk_inputs_are_the_host_runners(qnn_pipeline, qnn_sdk, case,
                                                 sm8650_emulator) -> None:
    pte = qnn_pipeline.pte(case, sm8650_emulator).pte
    runner = HybridRunner(pte)
    runner._reset()
    ids = _ids(case)
    theirs = runner._inputs(runner.prefill, ids, 0)
    mine = first_chunk_inputs(inspect_pte(pte).methods[PREFILL], ids)
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert a.dtype == b.numpy().dtype and np.array_equal(a, b.numpy())


def test_a_prefill_fed_a_closed_mask_fails_the_check(qnn_pipeline, qnn_sdk, case,
                                                     sm8650_emulator) -> None:
    pte = qnn_pipeline.pte(case, sm8650_emulator).pte
    info = inspect_pte(pte)
    ids = _ids(case)
    qdq = qnn_pipeline.qdq_logits(case, sm8650_emulator, ids[:1], ids[1:] + [0])
    scale, zp = info.constants["get_logits_scale"], info.constants["get_logits_zero_point"]

    def cosine(inputs: list[np.ndarray]) -> float:
        out = run_method(pte, [torch.from_numpy(a) for a in inputs], PREFILL)[0]
        rows = (out.numpy().reshape(-1, qdq.shape[1])[:len(ids)].astype(np.float32) - zp) * scale
        return float(numerics.rowwise_cosine(qdq, rows).min())

    good = first_chunk_inputs(info.methods[PREFILL], ids)
    assert cosine(good) >= 0.995
    broken = [a.copy() for a in good]
    broken[1][...] = 0  # every position sees nothing, itself included
    assert cosine(broken) < 0.995
