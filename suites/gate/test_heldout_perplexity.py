"""Held-out perplexity at llama.py's three phases (fp32, QDQ, target), gated by the case's spec.

As ``llama.py --eval_methods tasks_eval`` measures it (``checks/perplexity.py``): word perplexity
of the held-out stories at fp32 (the calibration graph unquantized), on the QDQ graph and on the
target (the emulator's prompt processor, or a phone's kv-mode logits dump), each held to the
case's ceiling (``case.json`` ``gate.max_perplexity``; without one, a uniform guess over the
vocabulary, reported as the default floor), and the target's over fp32's to
``gate.max_target_perplexity_ratio``. KL divergence and top-1 agreement of QDQ and target against
fp32 (llama.cpp's ``--kl-divergence``) and token perplexities have no floor. Every one of these
figures is then held to the last accepted measurement (``golden/accepted/<case>.json``, at its
printed resolution: ``qnn_accepted``).
"""
from __future__ import annotations

from pytest_qnn_genai.checks import parity, perplexity


def test_heldout_perplexity(qnn_pipeline, qnn_case, qnn_target, qnn_pte, heldout_documents,
                            heldout_fp32, heldout_qdq, heldout_target, qnn_record, qnn_accepted) -> None:
    docs = heldout_documents
    qdq = heldout_qdq
    target = heldout_target(qnn_pipeline, qnn_case, qnn_target, qnn_pte.pte, docs,
                            qnn_pipeline.pte_entry(qnn_case, qnn_target).digest)
    scores = [perplexity.score(phase, docs, rows)
              for phase, rows in (("fp32", heldout_fp32), ("qdq", qdq), ("target", target))]
    vocab = int(qnn_case.params_dict["vocab_size"])
    checks = perplexity.gate_checks(qnn_case, scores, vocab, docs)
    against_fp32 = {"qdq": perplexity.kl_and_top1(heldout_fp32, qdq),
                    "target": perplexity.kl_and_top1(heldout_fp32, target)}
    for ppl in scores:
        checks += perplexity.info_rows(ppl, *against_fp32.get(ppl.phase, (None, None)))
    qnn_record("gate", checks)
    print(f"{qnn_case.name} {qnn_target.id} held-out word perplexity "
          + ", ".join(f"{p.phase} {p.word:.4f}" for p in scores)
          + "; KL, top-1 vs fp32 " + ", ".join(f"{k} {kl:.5f} {top1:.4f}"
                                                for k, (kl, top1) in against_fp32.items())
          + f" ({len(docs)} stories, {len(perplexity.all_windows(docs))} windows, "
            f"{scores[0].tokens} tokens)")
    assert all(c.ok for c in checks), parity.failures(checks)
    qnn_accepted.hold(checks)
