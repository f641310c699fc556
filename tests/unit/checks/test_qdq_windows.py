"""The QDQ-window figures (checks/qdq_windows.py): metrics on known rows and each pair's bounds,
each judged figure failing when its fault is injected."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks import perplexity, qdq_windows


def _windows() -> qdq_windows.Windows:
    docs = perplexity.documents(["a b c d"], lambda text: [1, 2, 3, 4, 5], max_len=3)
    return qdq_windows.Windows(tuple(docs), (1, 2), (3, 4))


def _fp32(windows: qdq_windows.Windows, vocab: int = 6) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.normal(size=(len(w.continuation), vocab)).astype(np.float32) * 3
            for w in windows.all]


def test_identical_rows_have_no_divergence() -> None:
    w = _windows()
    fp32 = _fp32(w)
    m = qdq_windows.metrics(w, fp32, fp32)
    assert m.mean_kl == pytest.approx(0.0, abs=1e-12) and m.p99_kl == pytest.approx(0, abs=1e-12)
    assert m.top1 == 1.0 and m.first_divergence == -1 and m.sqnr_db == float("inf")


def test_a_changed_argmax_is_the_first_divergence() -> None:
    w = _windows()
    fp32 = _fp32(w)
    other = [r.copy() for r in fp32]
    row = other[-1][1]
    row[(int(np.argmax(row)) + 1) % row.size] = row.max() + 5  # the eval window's 2nd position
    m = qdq_windows.metrics(w, fp32, other)
    assert m.first_divergence == 1 and m.top1 < 1 and m.mean_kl > 0 and m.p99_kl >= m.mean_kl


def test_misaligned_rows_are_refused() -> None:
    w = _windows()
    fp32 = _fp32(w)
    with pytest.raises(ValueError, match="not the same windows"):
        qdq_windows.metrics(w, fp32, fp32[:-1])


def test_windows_rows_keep_the_continuation_rows() -> None:
    w = _windows()
    full = [np.arange(len(ids) * 2).reshape(len(ids), 2) for ids in w.ids()]
    rows = w.rows(full)
    assert [len(r) for r in rows] == [len(x.continuation) for x in w.all]


def _metrics(**kw: float) -> qdq_windows.Metrics:
    base = dict(sqnr_db=20.0, mean_kl=0.002, p99_kl=0.03, top1=0.99, first_divergence=-1,
                word_perplexity=1.25)
    base.update(kw)
    return qdq_windows.Metrics(**base)


@pytest.mark.parametrize(("bounds", "fault"), [
    ({"min_sqnr_db": 12.0}, {"sqnr_db": 11.0}),
    ({"max_sqnr_db_drop": 0.001}, {"sqnr_db": 19.9}),
    ({"max_mean_kl": 0.01}, {"mean_kl": 0.02}),
    ({"max_mean_kl_ratio": 1.001}, {"mean_kl": 0.0021}),
    ({"max_p99_kl": 0.1}, {"p99_kl": 0.2}),
    ({"min_top1": 0.98}, {"top1": 0.97}),
    ({"max_word_perplexity_ratio": 1.02}, {"word_perplexity": 1.3}),
])
def test_each_bound_fails_its_fault_and_passes_the_reference(bounds, fault) -> None:
    ref = _metrics()
    assert all(c.ok for c in qdq_windows.pair_checks("p", ref, ref, bounds, "src"))
    checks = qdq_windows.pair_checks("p", ref, _metrics(**fault), bounds, "src")
    bad = [c for c in checks if not c.ok]
    assert len(bad) == 1 and "(src)" in bad[0].judge and not bad[0].info


def test_unbounded_figures_are_info() -> None:
    checks = qdq_windows.pair_checks("p", _metrics(), _metrics(sqnr_db=1.0), {}, "src")
    assert all(c.info and c.verdict == "info" for c in checks)


def test_bounds_file(tmp_path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"toy": {"a_vs_b": {"min_top1": 0.9, "notes": "measured"},
                                        "notes": "x"}}))
    assert qdq_windows.load_bounds(path, "toy") == {"a_vs_b": {"min_top1": 0.9}}
    with pytest.raises(KeyError, match="no bounds for other"):
        qdq_windows.load_bounds(path, "other")


def test_table_has_one_column_per_flow() -> None:
    text = qdq_windows.table({"legacy": _metrics(), "staged": _metrics(), "genai": _metrics()})
    assert text.splitlines()[0].split()[-3:] == ["legacy", "staged", "genai"]


def test_a_program_off_its_qdq_graph_fails_its_floor() -> None:
    """The program's rows against its QDQ graph's: the same rows pass any floor; rows with one
    window's logits scaled by 1.5 (a wrong output scale on the target) fall below 20 dB."""
    rng = np.random.default_rng(0)
    qdq = [rng.normal(size=(4, 16)).astype(np.float32) for _ in range(3)]
    same = qdq_windows.agreement_check("p", "p_sqnr", qdq, [r.copy() for r in qdq], 60.0, "src")
    assert same.ok and same.rule == figures.AT_LEAST
    off = [qdq[0] * 1.5, qdq[1], qdq[2]]
    check = qdq_windows.agreement_check("p", "p_sqnr", qdq, off, 20.0, "src")
    assert not check.ok and isinstance(check.new, float) and check.new < 20.0 and "(src)" in check.judge
    with pytest.raises(ValueError, match="not the same windows"):
        qdq_windows.agreement_check("p", "p_sqnr", qdq, off[:2], 20.0, "src")
