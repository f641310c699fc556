"""The gate: every stage of the pipeline checked for each model case × target.

QDQ vs fp32 (does quantisation keep the model?), the .pte itself (methods, metadata, IO,
QnnBackend-only), the target vs QDQ (does the hardware run the graph it was given?), and the
generated text against its committed golden continuation. Every judged number goes into the run
report (``qnn_record``) from the same Check row or figure the test asserts on.

Each figure is judged twice: against the case's floors (its spec, the outer wall), then against
the last accepted measurement of this case × SoC × target (``golden/accepted/<case>.json``,
``qnn_accepted``: :mod:`pytest_qnn_genai.golden.accepted`), at its printed resolution: any
change fails naming old and new, and only ``--qnn-update-golden`` accepts a new value.

Every check applies on a phone too. There the perf comes from ``qnn_llama_runner``'s hybrid run
and the judged generation (logits, exact ids, text) from a second, kv-mode run of the same
program, the only mode that dumps them, as upstream's device evaluator does;
:func:`test_text_is_the_judged_generation` holds the judged ids to what the runner itself wrote
and the hybrid run's text to them. The golden continuation is the emulator's (the host runner's
hybrid generation); another target's run follows it, or parts from it at a near tie of its own
row (:mod:`pytest_qnn_genai.checks.ties`).
"""
from __future__ import annotations

import numpy as np
import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks import agreement, bounds, generation, parity, program, ties
from pytest_qnn_genai.compat import llama_example
from pytest_qnn_genai.golden import continuation
from pytest_qnn_genai.golden.accepted import Measured
from pytest_qnn_genai.hybrid import GRAPH_METHODS
from pytest_qnn_genai.runtime.pte_info import inspect_pte
from pytest_qnn_genai.runtime.tokenizer import decode_continuation, load_tokenizer
from pytest_qnn_genai.sdk.context_binary import check_target, describe_pte

# A case's floors and ceilings (QDQ vs fp32, target vs QDQ, the .pte size) come from its gate
# spec, else the defaults: checks/bounds.py.
KV_IO_DTYPES = {8: "uint8", 16: "uint16"}  # kv_io_bit_width -> the KV cache IO tensors' dtype

EXPECTED_CONSTANTS = {"get_max_seq_len": "max_seq_len", "get_max_context_len": "max_context_len",
                      "get_kv_io_bit_width": "kv_io_bit_width"}


def test_qdq_keeps_the_fp32_model(fp32_reference, qdq_on_fp32_tokens, qnn_case, qnn_record,
                                  qnn_accepted) -> None:
    """QDQ vs fp32 on fp32's own continuation: held to the case's floors, then the SQNR, the
    greedy agreement and the QDQ graph's greedy tokens to the accepted measurement."""
    fp32, qdq = fp32_reference.logits, qdq_on_fp32_tokens
    assert qdq.shape == fp32.shape
    sqnr = bounds.bound(qnn_case, "min_qdq_sqnr_db")
    greedy = bounds.bound(qnn_case, "min_qdq_greedy_agreement")
    checks = agreement.qdq_keeps_fp32(fp32, qdq, sqnr.value, greedy.value,
                                      (sqnr.source, greedy.source))
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), parity.failures(checks)
    qnn_accepted.hold(checks, Measured(
        "qdq_greedy_tokens", tuple(int(t) for t in np.argmax(qdq, axis=1)),
        label="QDQ greedy tokens (teacher-forced on fp32's continuation)"))


def test_context_binary_is_for_the_target(qnn_pte, qnn_target, qnn_sdk) -> None:
    """QNN's own system library describes each context binary inside the .pte: its SoC model and
    HTP arch must be the target's (a .pte for SM8650 must not carry a v79 binary)."""
    infos = describe_pte(qnn_pte.pte)
    check_target(infos, qnn_target.soc, qnn_target.backend)


def test_pte_program(qnn_pipeline, qnn_pte, qnn_qdq, qnn_case, qnn_target, qnn_record,
                     qnn_accepted) -> None:
    info = inspect_pte(qnn_pte.pte)
    assert tuple(info.graph_methods) == GRAPH_METHODS
    delegation = program.qnn_only(info, GRAPH_METHODS)
    assert not delegation, "\n".join(delegation)
    assert info.delegates == {program.QNN}
    params = qnn_case.params_dict
    exact = {constant: getattr(qnn_case, attr) for constant, attr in EXPECTED_CONSTANTS.items()}
    exact |= {"get_n_layers": params["n_layers"], "get_vocab_size": params["vocab_size"],
              "get_n_kv_heads": params["n_kv_heads"]}
    # what upstream's static_llama wrote into the model it built (its get_metadata())
    exact |= {constant: qnn_qdq.metadata[constant] for constant in ("get_bos_id", "get_eos_id")}
    problems = program.constant_problems(
        info.constants, exact, {"get_logits_scale": qnn_qdq.metadata["get_logits_scale"]})
    shape = program.HybridShape(
        prefill_ar=qnn_case.prefill_ar_len, context=qnn_case.max_context_len,
        layers=params["n_layers"], kv_heads=params["n_kv_heads"],
        # ExecuTorch's ModelArgs: params' head_dim (Qwen3: wider than dim / n_heads), else that
        head_dim=llama_example.static_llama().ModelArgs(**params).head_dim,
        vocab=params["vocab_size"], kv_dtype=KV_IO_DTYPES[qnn_case.kv_io_bit_width])
    problems += program.io_problems(info, shape)
    assert not problems, "\n".join(problems)
    ceiling = bounds.pte_bytes(qnn_case)
    size = agreement.pte_size(info.size_bytes, int(ceiling.value), ceiling.source)
    qnn_record("gate", [size])
    assert size.ok, parity.failures([size])
    qnn_accepted.hold([size], program=qnn_pipeline.pte_entry(qnn_case, qnn_target))


def test_target_runs_the_qdq_graph(qnn_run, qdq_on_run_tokens, qnn_case, qnn_record,
                                   qnn_accepted) -> None:
    run, qdq = qnn_run, qdq_on_run_tokens
    assert run.logits is not None and run.logits.shape == qdq.shape
    cosine = bounds.bound(qnn_case, "min_target_row_cosine")
    sqnr = bounds.bound(qnn_case, "min_target_sqnr_db")
    checks = agreement.target_runs_qdq(qdq, run.logits, run.tokens, cosine.value, sqnr.value,
                                       (cosine.source, sqnr.source))
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), parity.failures(checks)
    qnn_accepted.hold(checks)


def test_text_is_the_judged_generation(qnn_run, qdq_on_run_tokens, qnn_case, qnn_target,
                                       qnn_record) -> None:
    """The text the gate reports is the generation whose logits it judged, by what upstream's
    runner itself wrote: its kv-mode text is the judged ids decoded, its observer counted as
    many, and the hybrid run wrote the same text, or parted from it at a near tie of the kv-mode
    run's row, judged by that row's noise against the QDQ graph (checks/generation.py)."""
    if qnn_target.is_emulator:
        pytest.skip(f"{qnn_target.id}: the host runner in this process reports its own argmax and "
                    "its decoding of it, nothing independent of the judged logits; upstream's "
                    "runner is held to them on the x86-runner target and on a phone")
    tokenizer = load_tokenizer(qnn_case.path("tokenizer_model"))
    prompt = list(qnn_run.prompt_tokens)
    body = prompt[1:] if prompt and prompt[0] == tokenizer.bos_id else prompt

    def decode(ids: list[int]) -> str:
        return decode_continuation(tokenizer, body, ids)

    checks = generation.judged_generation(qnn_run, decode(list(qnn_run.tokens)), decode,
                                          ties.row_noise(qdq_on_run_tokens, qnn_run.logits))
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_generation_is_not_degenerate(qnn_run, qnn_case, qnn_record) -> None:
    checks = agreement.not_degenerate(qnn_run.tokens, qnn_case.max_new_tokens)
    qnn_record("gate", checks)
    assert all(c.ok for c in checks), f"{parity.failures(checks)}\n{qnn_run.text}"


def test_continuation_matches_golden(qnn_run, qdq_on_run_tokens, qnn_case, qnn_target,
                                     qnn_settings, qnn_record) -> None:
    path = continuation.path_for(qnn_case.golden_dir or qnn_settings.golden_dir, qnn_case.name)
    got = continuation.Continuation(qnn_case.eval_prompt, qnn_run.prompt_tokens, qnn_run.tokens,
                                    qnn_run.text)
    if qnn_settings.update_golden and qnn_target.is_emulator:  # written, not judged: "updated"
        made = continuation.update(path, got, allow_write=True)
        print(made.diff or f"{path}: unchanged")
        if made.changed:
            where = f"golden/{path.parent.name}/{path.name}"
            qnn_record("gate", [figures.updated(figures.info(
                "continuation_tokens_as_golden", len(got.tokens)), where)])
            return
    try:
        expected = continuation.load(path)
    except continuation.GoldenContinuationError as e:
        pytest.fail(str(e), pytrace=False)
    assert expected.prompt_tokens == qnn_run.prompt_tokens, "the prompt tokenizes differently"
    # the emulator wrote the golden: it must say it again; another target's run may part from
    # it at a near tie of its own row
    noise = None if qnn_target.is_emulator else ties.row_noise(qdq_on_run_tokens, qnn_run.logits)
    apart = ties.first_parting(expected.tokens, qnn_run.tokens, qnn_run.logits, noise)
    excuse = apart.describe() if apart is not None and apart.near_tie else ""
    judged = continuation.judge(expected, qnn_run.tokens, f"golden/{path.parent.name}/{path.name}",
                                excuse)
    qnn_record("gate", [judged])
    assert judged.passed, continuation.mismatch(expected, qnn_run.tokens, qnn_run.text,
                                                apart.describe() if apart else "")
