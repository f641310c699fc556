"""The gate: every stage of the pipeline checked for each model case × target.

QDQ vs fp32 (does quantisation keep the model?), the .pte itself (methods, metadata, IO,
QnnBackend-only), the target vs QDQ (does the hardware run the graph it was given?), and the
generated text against its committed golden continuation. Every judged number goes into the run
report (``qnn_record``) from the same Check row or figure the test asserts on.

Every check applies on a phone too. There the text and perf come from ``qnn_llama_runner``'s
hybrid run and the logits (and the exact generated ids) from a second, kv-mode run of the same
program, the only mode that dumps them, as upstream's device evaluator does;
:func:`test_text_is_the_judged_generation` holds the two runs to each other.
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import agreement, generation, parity
from pytest_qnn_genai.golden import continuation
from pytest_qnn_genai.hybrid import GRAPH_METHODS
from pytest_qnn_genai.runtime.pte_info import inspect_pte
from pytest_qnn_genai.sdk.context_binary import check_target, describe_pte

# Measured for stories260k on SM8650 (16a4w, 8-bit KV): QDQ vs fp32 logits 20.4 dB SQNR, greedy
# (teacher-forced) agreement 46/48; over 20 held-out stories the SQNR was 16.6 dB at worst. The
# floors leave room for another SoC's quantizer choices.
MIN_QDQ_SQNR_DB = 15.0
MIN_QDQ_GREEDY_AGREEMENT = 0.9
# The HTP simulator runs the QDQ graph's fixed-point math: measured per-step cosine >= 0.9997 and
# 41.6 dB SQNR against the CPU QDQ graph, greedy tokens identical.
MIN_TARGET_ROW_COSINE = 0.995
MIN_TARGET_SQNR_DB = 30.0
MAX_PTE_BYTES = 2_020_000  # ExecuTorch's own bound for stories260k (test_llama_stories_260k)

EXPECTED_CONSTANTS = {"get_max_seq_len": "max_seq_len", "get_max_context_len": "max_context_len",
                      "get_kv_io_bit_width": "kv_io_bit_width"}


def test_qdq_keeps_the_fp32_model(fp32_reference, qdq_on_fp32_tokens, qnn_record) -> None:
    fp32, qdq = fp32_reference.logits, qdq_on_fp32_tokens
    assert qdq.shape == fp32.shape
    checks = agreement.qdq_keeps_fp32(fp32, qdq, MIN_QDQ_SQNR_DB, MIN_QDQ_GREEDY_AGREEMENT)
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_context_binary_is_for_the_target(qnn_pte, qnn_target, qnn_sdk) -> None:
    """QNN's own system library describes each context binary inside the .pte: its SoC model and
    HTP arch must be the target's (a .pte for SM8650 must not carry a v79 binary)."""
    infos = describe_pte(qnn_pte.pte)
    check_target(infos, qnn_target.soc, qnn_target.backend)


def test_pte_program(qnn_pte, qnn_qdq, qnn_case, qnn_record) -> None:
    info = inspect_pte(qnn_pte.pte)
    assert tuple(info.graph_methods) == GRAPH_METHODS
    for name in GRAPH_METHODS:
        method = info.methods[name]
        assert method.delegates == ("QnnBackend",), f"{name}: {method.delegates}"
        assert method.cpu_operators == (), f"{name} left ops on CPU: {method.cpu_operators}"
    assert info.delegates == {"QnnBackend"}
    params = qnn_case.params_dict
    constants = info.constants
    for constant, attr in EXPECTED_CONSTANTS.items():
        assert constants[constant] == getattr(qnn_case, attr), constant
    assert constants["get_n_layers"] == params["n_layers"]
    assert constants["get_vocab_size"] == params["vocab_size"]
    assert constants["get_n_kv_heads"] == params["n_kv_heads"]
    assert (constants["get_bos_id"], constants["get_eos_id"]) == (1, 2)
    assert constants["get_logits_scale"] == pytest.approx(qnn_qdq.metadata["get_logits_scale"])
    layers, kv_heads = params["n_layers"], params["n_kv_heads"]
    head_dim = params["dim"] // params["n_heads"]
    ctx, ar = qnn_case.max_context_len, qnn_case.prefill_ar_len
    for name, n in (("prefill_forward", ar), ("kv_forward", 1)):
        ins, outs = info.methods[name].inputs, info.methods[name].outputs
        assert [(t.dtype, t.shape) for t in ins[:3]] == [
            ("int32", (1, n)), ("uint16", (1, 1, n, ctx)), ("int32", (1, n))]
        assert [(t.dtype, t.shape) for t in ins[3:]] == (
            [("uint8", (1, kv_heads, head_dim, ctx - n))] * layers
            + [("uint8", (1, kv_heads, ctx - n, head_dim))] * layers)
        assert (outs[0].dtype, outs[0].shape) == ("uint16", (1, n, params["vocab_size"]))
        assert len(outs) == 1 + 2 * layers
    size = agreement.pte_size(info.size_bytes, MAX_PTE_BYTES, "ExecuTorch's stories260k bound")
    qnn_record("gate", [size])
    assert size.ok, parity.failures([size])


def test_target_runs_the_qdq_graph(qnn_run, qdq_on_run_tokens, qnn_record) -> None:
    run, qdq = qnn_run, qdq_on_run_tokens
    assert run.logits is not None and run.logits.shape == qdq.shape
    checks = agreement.target_runs_qdq(qdq, run.logits, run.tokens, MIN_TARGET_ROW_COSINE,
                                       MIN_TARGET_SQNR_DB)
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_text_is_the_judged_generation(qnn_run, qnn_target, qnn_record) -> None:
    """The text the gate reports is the generation whose logits it judged: the tokens are the
    greedy path of the logits and, on a phone, the hybrid run wrote the same text as the kv-mode
    run that dumped the logits (checks/generation.py)."""
    checks = generation.judged_generation(qnn_run, on_phone=not qnn_target.is_emulator)
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_generation_is_not_degenerate(qnn_run, qnn_case, qnn_record) -> None:
    checks = agreement.not_degenerate(qnn_run.tokens, qnn_case.max_new_tokens)
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), f"{parity.failures(checks)}\n{qnn_run.text}"


def test_continuation_matches_golden(qnn_run, qnn_case, qnn_settings, qnn_record) -> None:
    path = continuation.path_for(qnn_case.golden_dir or qnn_settings.golden_dir, qnn_case.name)
    got = continuation.Continuation(qnn_case.eval_prompt, qnn_run.prompt_tokens, qnn_run.tokens,
                                    qnn_run.text)
    if qnn_settings.update_golden:
        diff = continuation.update(path, got, allow_write=True)
        print(diff or f"{path}: unchanged")
    try:
        expected = continuation.load(path)
    except continuation.GoldenContinuationError as e:
        pytest.fail(str(e), pytrace=False)
    assert expected.prompt_tokens == qnn_run.prompt_tokens, "the prompt tokenizes differently"
    judged = continuation.judge(expected, qnn_run.tokens, f"golden/{path.parent.name}/{path.name}")
    qnn_record("gate", [judged])
    problem = continuation.mismatch(expected, qnn_run.tokens, qnn_run.text)
    assert judged.passed and problem is None, problem
