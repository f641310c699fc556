"""``prefill_forward`` judged on the target itself, whatever the target.

The generation's logits judge ``prefill_forward`` only on the emulator: a phone's (and upstream's
x86 runner's) logits come from the kv-mode run, which feeds the prompt through ``kv_forward`` at
AR-1, so there the check "tokens are the argmax of their logits" could not fail for the prefill
graph. Here the target runs ``prefill_forward`` once on the eval prompt's first chunk (empty KV
cache: ``runtime.prefill.first_chunk_inputs``), in this process on the emulator, through
upstream's ``qnn_executor_runner`` elsewhere, and its logits at every prompt position are held to
the QDQ graph's (teacher-forced on the prompt), with the gate's thresholds for target logits,
then held to the last accepted measurement (``golden/accepted/<case>.json``: ``qnn_accepted``).
"""
from __future__ import annotations

import torch

from pytest_qnn_genai.checks import agreement, bounds, parity
from pytest_qnn_genai.devices.runner_output import LogitsQuant, dequantize
from pytest_qnn_genai.hybrid import PREFILL
from pytest_qnn_genai.runtime.prefill import first_chunk_inputs
from pytest_qnn_genai.runtime.pte_info import inspect_pte
from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer


def test_prefill_graph_runs_the_qdq_graph_on_the_target(qnn_pipeline, qnn_case, qnn_target,
                                                        qnn_pte, qnn_record, qnn_accepted) -> None:
    info = inspect_pte(qnn_pte.pte)
    meta = info.methods[PREFILL]
    ar = meta.inputs[0].shape[-1]
    ids = encode(load_tokenizer(qnn_case.path("tokenizer_model")), qnn_case.eval_prompt)[:ar]
    inputs = [torch.from_numpy(a) for a in first_chunk_inputs(meta, ids)]
    outputs = qnn_pipeline.run_method(qnn_target, qnn_pte.pte, inputs,
                                      qnn_pipeline.pte_entry(qnn_case, qnn_target).digest,
                                      method=PREFILL)
    raw = outputs[0].numpy().reshape(ar, -1)[:len(ids)]
    c = info.constants
    target = dequantize(raw, LogitsQuant(float(c["get_logits_scale"]),
                                         int(c["get_logits_zero_point"]), meta.outputs[0].dtype))
    # the QDQ graph's logits at every prompt position (position i predicts token i + 1; the last
    # row's own next token does not change the row)
    qdq = qnn_pipeline.qdq_logits(qnn_case, qnn_target, ids[:1], ids[1:] + [0])
    assert qdq.shape == target.shape
    cosine = bounds.bound(qnn_case, "min_target_row_cosine")  # the target runs the QDQ graph
    sqnr = bounds.bound(qnn_case, "min_target_sqnr_db")
    checks = agreement.logits_follow_qdq(qdq, target, cosine.value, sqnr.value, what="prefill",
                                         rows="position", sources=(cosine.source, sqnr.source))
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), parity.failures(checks)
    qnn_accepted.hold(checks)
