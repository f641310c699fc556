"""Perplexity, KL divergence and top-1 agreement held to the implementations they follow:
lm_eval's rolling windows and word-perplexity aggregation (what llama.py's tasks_eval runs),
torch's cross entropy and KL divergence; the gate's checks fail past their bounds and say whose
bound judged them."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pytest_qnn_genai.checks import bounds, perplexity
from pytest_qnn_genai.models import registry, spec
from pytest_qnn_genai.models.spec import ParityTolerance

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("n,max_len", [(1, 4), (4, 4), (5, 4), (9, 4), (17, 5), (200, 96),
                                       (96, 96), (97, 96), (30, 1)])
def test_windows_are_lm_evals(n: int, max_len: int) -> None:
    from lm_eval import utils

    tokens = [int(t) for t in RNG.integers(3, 500, size=n)]
    want = [utils.make_disjoint_window(w) for w in utils.get_rolling_token_windows(
        token_list=tokens, prefix_token=1, max_seq_len=max_len, context_len=1)]
    got = perplexity.rolling_windows(tokens, 1, max_len)
    assert [(list(w.context), list(w.continuation)) for w in got] == want
    assert [t for w in got for t in w.continuation] == tokens  # every token predicted once
    assert all(len(w.ids) <= max_len for w in got)


def test_word_perplexity_is_lm_evals_weighted_perplexity() -> None:
    from lm_eval.api.metrics import weighted_perplexity

    texts = ["Once upon a time there was a cat.", "Tom  ran\nhome and  slept well today."]
    ids = {t: [1, *RNG.integers(3, 50, size=len(t) // 2).tolist()] for t in texts}
    docs = perplexity.documents(texts, ids.__getitem__, max_len=6)
    rows = [RNG.normal(size=(len(w.continuation), 50)).astype(np.float32)
            for w in perplexity.all_windows(docs)]
    ppl = perplexity.score("qdq", docs, rows)
    # lm_eval: per document (Σ loglikelihood over its windows, words), torch for each window
    items, k = [], 0
    for d in docs:
        ll = 0.0
        for w in d.windows:
            ll -= float(F.cross_entropy(torch.from_numpy(rows[k]).double(),
                                        torch.tensor(w.continuation), reduction="sum"))
            k += 1
        items.append((ll, len(d.text.split())))
    assert [d.words for d in docs] == [8, 7]
    assert ppl.word == pytest.approx(weighted_perplexity(items), rel=1e-9)
    assert ppl.token == pytest.approx(math.exp(-sum(i[0] for i in items) / ppl.tokens), rel=1e-9)


def test_kl_and_top1_are_torchs() -> None:
    ref = [RNG.normal(size=(7, 30)), RNG.normal(size=(5, 30))]
    other = [r + RNG.normal(scale=0.5, size=r.shape) for r in ref]
    kl, top1 = perplexity.kl_and_top1(ref, other)
    p, q = (torch.from_numpy(np.concatenate(x)).double() for x in (ref, other))
    want = F.kl_div(F.log_softmax(q, -1), F.log_softmax(p, -1), log_target=True,
                    reduction="batchmean")
    assert kl == pytest.approx(float(want), rel=1e-9)
    assert top1 == pytest.approx(float((p.argmax(-1) == q.argmax(-1)).double().mean()))
    assert perplexity.kl_and_top1(ref, ref) == (pytest.approx(0.0, abs=1e-12), 1.0)


def _scores(fp32: float, qdq: float, target: float) -> list[perplexity.Perplexity]:
    words = 100  # nll = words * ln(ppl)
    return [perplexity.Perplexity(p, words * math.log(v), 150, words)
            for p, v in (("fp32", fp32), ("qdq", qdq), ("target", target))]


def _docs() -> list[perplexity.Document]:
    return perplexity.documents(["a b c d"], lambda t: [1, 5, 6, 7, 8, 9], max_len=8)


def test_the_gate_holds_each_phase_to_the_case_spec() -> None:
    case = replace(registry.available()["stories260k"], gate=spec.GateSpec(
        max_perplexity={"fp32": 3.0, "qdq": 3.3, "target": 3.3}, max_target_perplexity_ratio=1.1))
    ok = perplexity.gate_checks(case, _scores(2.95, 3.2, 3.2), 512, _docs())
    assert [c.ok for c in ok] == [True] * 4
    assert ok[1].judge == "≤ 3.3 (stories260k spec)" and ok[1].figure().verdict == "pass"
    worse = perplexity.gate_checks(case, _scores(2.9, 3.4, 3.25), 512, _docs())
    assert [c.name for c in worse if not c.ok] == ["qdq_word_perplexity",
                                                   "target_fp32_perplexity_ratio"]
    assert worse[1].figure().verdict == "fail" and worse[3].new == pytest.approx(1.1207, 1e-3)


def test_without_a_spec_the_default_judges_and_says_so() -> None:
    case = replace(registry.available()["stories260k"], gate=spec.GateSpec())
    docs = _docs()  # 5 tokens predicted over 4 words: uniform = 512 ** (5 / 4)
    checks = perplexity.gate_checks(case, _scores(2.0, 2.1, 2.2), 512, docs)
    assert checks[0].bound == pytest.approx(512 ** 1.25)
    assert checks[0].judge.endswith("a uniform guess over 512 tokens (default floor)")
    assert checks[3].judge == "≤ 1.25 (default floor)" and all(c.ok for c in checks)
    assert not perplexity.gate_checks(case, _scores(2.0, 2.1, 2.8), 512, docs)[3].ok
    unlearned = perplexity.gate_checks(case, _scores(2.0, 2.1, 3000.0), 512, docs)
    assert not unlearned[2].ok  # worse than guessing


def test_bounds_come_from_the_spec_else_the_defaults() -> None:
    case = registry.available()["stories260k"]
    bare = replace(case, gate=spec.GateSpec())
    assert bounds.bound(bare, "min_qdq_sqnr_db") == bounds.Bound(15.0, "default floor")
    declared = replace(case, gate=spec.GateSpec(min_qdq_sqnr_db=18.0))
    assert bounds.bound(declared, "min_qdq_sqnr_db") == bounds.Bound(18.0, "stories260k spec")
    size = case.path("checkpoint").stat().st_size
    assert bounds.pte_bytes(bare) == bounds.Bound(2 * size, "default floor")
    with pytest.raises(KeyError, match="no default"):
        bounds.bound(bare, "max_perplexity", phase="qdq")
    assert bounds.bound(bare, "min_target_sqnr_db") == bounds.Bound(30.0, "default floor")
    assert bounds.bound(bare, "min_target_row_cosine") == bounds.Bound(0.995, "default floor")
    # the target vs transformers floor: its own when declared, else the QDQ floor, whoever's
    assert bounds.target_reference_sqnr(bare) == bounds.Bound(15.0, "default floor")
    assert bounds.target_reference_sqnr(declared) == bounds.Bound(18.0, "stories260k spec")
    own = replace(case, gate=spec.GateSpec(min_qdq_sqnr_db=18.0, min_target_reference_sqnr_db=12.0))
    assert bounds.target_reference_sqnr(own) == bounds.Bound(12.0, "stories260k spec")


def test_parity_rows_fail_when_the_new_program_scores_worse() -> None:
    legacy, new = _scores(2.0, 2.0, 3.0)[2], _scores(2.0, 2.0, 3.1)[2]
    same = perplexity.parity_checks(legacy, legacy, (0.01, 0.9), (0.01, 0.9))
    assert same[0].ok and [c.verdict for c in same[1:]] == ["info", "info"]
    worse = perplexity.parity_checks(legacy, new, (0.01, 0.9), (0.02, 0.8))
    assert not worse[0].ok and worse[0].figure().verdict == "fail"
    # identity by default: the smallest difference of the score fails, better or worse
    nudged = replace(legacy, nll=legacy.nll * (1 - 1e-12))
    assert not perplexity.parity_checks(legacy, nudged, (0.01, 0.9), (0.01, 0.9))[0].ok
    # a case's reasoned tolerance: within PARITY_RTOL of legacy, the reason in the verdict
    loose = ParityTolerance(reason="another recipe", max_encoding_steps=1)
    slightly = _scores(2.0, 2.0, 3.0 * (1 + perplexity.PARITY_RTOL / 4))[2]
    [row, *_] = perplexity.parity_checks(legacy, slightly, (0.01, 0.9), (0.01, 0.9), loose)
    assert row.ok and row.verdict == "ok (tolerance: another recipe)"
    assert not perplexity.parity_checks(legacy, new, (0.01, 0.9), (0.01, 0.9), loose)[0].ok
