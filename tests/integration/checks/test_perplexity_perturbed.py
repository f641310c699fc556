"""The perplexity gate fails when calibration breaks: stories260k's calibration graph quantized on
its first calibration prompt only (instead of all eight) scores the held-out stories past the
case's QDQ ceiling (``case.json`` ``gate.max_perplexity.qdq``), while the staged flow's QDQ graph,
calibrated as llama.py calibrates, stays under it. Only the calibration graph is quantized
(``tests/support/perturbed.py``, the entry the parity perturbation test shares).
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import perplexity
from tests.support.perturbed import one_prompt_calibration_module


@pytest.fixture(scope="session")
def one_prompt_graph(qnn_pipeline, qnn_sdk, case, sm8650_emulator):  # noqa: ANN201
    """stories260k's calibration graph calibrated on one prompt, loaded."""
    return one_prompt_calibration_module(qnn_pipeline, case, sm8650_emulator)


def test_one_prompt_calibration_fails_the_qdq_perplexity_ceiling(
        qnn_pipeline, case, sm8650_emulator, one_prompt_graph) -> None:
    from pytest_qnn_genai.models import heldout
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer
    from pytest_qnn_genai.stages.reference import teacher_forced

    tokenizer = load_tokenizer(case.path("tokenizer_model"))
    docs = perplexity.documents(heldout.stories(), lambda text: encode(tokenizer, text),
                                case.max_context_len - case.prefill_ar_len)
    windows = perplexity.all_windows(docs)
    prepared = qnn_pipeline.prepared(case)
    vocab = int(case.params_dict["vocab_size"])
    staged = [qnn_pipeline.qdq_logits(case, sm8650_emulator, list(w.context),
                                      list(w.continuation)) for w in windows]
    fp32 = [qnn_pipeline.fp32_logits(case, list(w.context), list(w.continuation))
            for w in windows]
    broken = [teacher_forced(one_prompt_graph, prepared, list(w.context),
                             list(w.continuation)).logits for w in windows]
    good = perplexity.gate_checks(case, [perplexity.score("qdq", docs, staged)], vocab, docs)
    bad = perplexity.gate_checks(case, [perplexity.score("qdq", docs, broken)], vocab, docs)
    kl = [perplexity.kl_and_top1(fp32, rows) for rows in (staged, broken)]
    print(f"QDQ word perplexity: staged {good[0].new} vs one-prompt calibration {bad[0].new} "
          f"(KL/top-1 vs fp32 {kl[0]} vs {kl[1]}) "
          f"(ceiling {good[0].bound}, {good[0].judge})")
    assert case.gate.max_perplexity.get("qdq"), "stories260k's spec must declare a QDQ ceiling"
    assert good[0].ok, good[0]
    assert not bad[0].ok, bad[0]
    assert bad[0].judge.endswith("(stories260k spec)")
    assert bad[0].figure().verdict == "fail"
