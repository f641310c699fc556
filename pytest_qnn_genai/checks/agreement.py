"""The gate's accuracy judgements as :class:`~pytest_qnn_genai.checks.parity.Check` rows.

The QDQ graph against fp32 (does quantisation keep the model?), the target against the QDQ graph
(does the hardware run the graph it was given?), a model against an implementation it shares no
code with (transformers), the generation's own sanity and the .pte's size against its bound. Each
row carries its value, its threshold and its verdict, so the assertion a suite makes and the figure
the run report records (:meth:`Check.figure`) are the same object. In every row ``legacy`` names
the reference the value is held to.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks import numerics, ties
from pytest_qnn_genai.checks.parity import Check

if TYPE_CHECKING:
    from pytest_qnn_genai.checks.numerics import Values


def _source(source: str) -> str:
    return f" ({source})" if source else ""


def _sqnr(name: str, label: str, reference: str, sqnr: float, floor: float,
          source: str = "") -> Check:
    return Check(label, reference, round(sqnr, 3), ok=sqnr >= floor,
                 judge=f"≥ {floor:g} dB{_source(source)}",
                 name=name, bound=floor, rule=figures.AT_LEAST, better=figures.HIGHER)


def _share(name: str, label: str, reference: str, share: float, floor: float,
           source: str = "") -> Check:
    return Check(label, reference, round(share, 4), ok=share >= floor,
                 judge=f"≥ {floor:g} of steps{_source(source)}", name=name, bound=floor,
                 rule=figures.AT_LEAST, better=figures.HIGHER)


def greedy_agreement(reference: np.ndarray, test: np.ndarray) -> float:
    """The share of rows (steps) whose argmax is the same in both ``[steps, vocab]`` arrays."""
    return float(np.mean(np.argmax(reference, axis=1) == np.argmax(test, axis=1)))


def qdq_keeps_fp32(fp32: np.ndarray, qdq: np.ndarray, min_sqnr_db: float,
                   min_agreement: float, sources: tuple[str, str] = ("", "")) -> list[Check]:
    """QDQ logits teacher-forced on fp32's continuation: SQNR and greedy agreement with fp32
    (``sources``: whose floors they are, e.g. the case's spec or the default floor)."""
    return [_sqnr("qdq_sqnr_db", "QDQ vs fp32 logits SQNR dB", "fp32",
                  numerics.sqnr_db(fp32, qdq), min_sqnr_db, sources[0]),
            _share("qdq_greedy_agreement", "QDQ vs fp32 greedy agreement", "fp32",
                   greedy_agreement(fp32, qdq), min_agreement, sources[1])]


def logits_follow_qdq(qdq: np.ndarray, logits: np.ndarray, min_row_cosine: float,
                      min_sqnr_db: float, what: str = "target", rows: str = "step",
                      sources: tuple[str, str] = ("", "")) -> list[Check]:
    """``what``'s logits against the QDQ graph's, row by row (``rows``: a decode step, a prompt
    position): the smallest row cosine and the SQNR (figures ``{what}_min_row_cosine``,
    ``{what}_sqnr_db``; ``sources``: whose floors they are)."""
    cos = numerics.rowwise_cosine(qdq, logits)
    return [Check(f"{what} vs QDQ per-{rows} cosine (min of {len(cos)})", "QDQ graph",
                  round(float(cos.min()), 6), ok=float(cos.min()) >= min_row_cosine,
                  detail=f"per {rows}: {np.round(cos, 4).tolist()}",
                  judge=f"≥ {min_row_cosine:g}{_source(sources[0])}",
                  name=f"{what}_min_row_cosine", bound=min_row_cosine, rule=figures.AT_LEAST,
                  better=figures.HIGHER),
            _sqnr(f"{what}_sqnr_db", f"{what} vs QDQ logits SQNR dB", "QDQ graph",
                  numerics.sqnr_db(qdq, logits), min_sqnr_db, sources[1])]


def target_runs_qdq(qdq: np.ndarray, logits: np.ndarray, tokens: Sequence[int],
                    min_row_cosine: float, min_sqnr_db: float,
                    sources: tuple[str, str] = ("", "")) -> list[Check]:
    """The target's logits against the QDQ graph's, teacher-forced on the target's tokens: the
    smallest per-step cosine, the SQNR, and the target's tokens = the QDQ graph's greedy path but
    at near ties (:mod:`.ties`): the number of steps where they part (judged by the accepted
    record alone, at its value: 0 for a case that parts nowhere) and the widest swap's error."""
    apart = ties.partings(qdq, logits, tokens)
    widest = max((p.sigmas for p in apart), default=0.0)
    return [*logits_follow_qdq(qdq, logits, min_row_cosine, min_sqnr_db, sources=sources),
            Check("steps where target tokens leave the QDQ greedy path", f"{len(qdq)} steps",
                  len(apart), "" if not apart else f"steps {[p.step for p in apart]}", info=True,
                  name="target_greedy_partings", better=figures.LOWER,
                  detail="\n".join(p.describe() for p in apart)),
            Check("widest of those swaps, in σ√2 of its row's noise", "", round(widest, 3),
                  ok=widest <= ties.NEAR_TIE_SIGMAS,
                  judge=f"≤ {ties.NEAR_TIE_SIGMAS:g} (a near tie, checks/ties.py)",
                  name="target_parting_sigmas", bound=ties.NEAR_TIE_SIGMAS, rule=figures.AT_MOST,
                  better=figures.LOWER,
                  detail="\n".join(p.describe() for p in apart if not p.near_tie))]


def keeps_reference(accuracy: Mapping[str, float], reference: str, min_sqnr_db: float,
                    min_agreement: float, prefix: str,
                    sources: tuple[str, str] = ("", "")) -> list[Check]:
    """:func:`numerics.accuracy_vs_reference`'s figures held to floors (``prefix`` names them;
    ``sources`` says whose floors)."""
    return [_sqnr(f"{prefix}_sqnr_db", f"target vs {reference} logits SQNR dB", reference,
                  accuracy["sqnr_db"], min_sqnr_db, sources[0]),
            _share(f"{prefix}_greedy_agreement", f"target vs {reference} greedy agreement",
                   reference, accuracy["greedy_agreement"], min_agreement, sources[1])]


def same_model(want: np.ndarray, got: np.ndarray, max_abs_diff: float, reference: str,
               prefix: str) -> list[Check]:
    """Two fp32 implementations of one model: logits within float rounding, identical argmax."""
    diff = float(np.abs(np.asarray(want) - np.asarray(got)).max())
    agreement = greedy_agreement(want, got)
    return [Check(f"fp32 vs {reference} logits max |diff|", reference, diff,
                  ok=diff <= max_abs_diff, judge=f"≤ {max_abs_diff:g}", name=f"{prefix}_max_abs",
                  bound=max_abs_diff, rule=figures.AT_MOST, better=figures.LOWER),
            _share(f"{prefix}_greedy_agreement", f"fp32 vs {reference} greedy agreement",
                   reference, agreement, 1.0)]


def not_degenerate(tokens: Sequence[int], max_new_tokens: int) -> list[Check]:
    """A generation long enough to judge (``min(16, max_new_tokens)`` tokens) and not a loop (at
    least a quarter of its tokens distinct)."""
    least = min(16, max_new_tokens)
    distinct = len(set(tokens))
    return [Check("generated tokens", "", len(tokens), ok=len(tokens) >= least,
                  judge=f"≥ {least}", name="generated_tokens", bound=least,
                  rule=figures.AT_LEAST),
            Check("distinct generated tokens", "", distinct, ok=distinct >= len(tokens) // 4,
                  judge=f"≥ {len(tokens) // 4} (a quarter)", name="distinct_tokens",
                  bound=len(tokens) // 4, rule=figures.AT_LEAST)]


def within_steps(qdq: Values, out: Values, bits: int, max_steps: float) -> Check:
    """The target's output against the QDQ reference in quantisation steps of the output's range
    (``bits``-bit): the HTP kernels round a few ops differently from the QDQ graph."""
    q, o = np.asarray(qdq, dtype=np.float64), np.asarray(out, dtype=np.float64)
    step = float(q.max() - q.min()) / (2 ** bits - 1)
    steps = numerics.max_abs(q, o) / step if step > 0 else float(numerics.max_abs(q, o) > 0)
    return Check(f"target vs QDQ max |diff| in {bits}-bit steps", "QDQ graph", round(steps, 3),
                 ok=steps <= max_steps, judge=f"≤ {max_steps:g} steps", name="target_qdq_steps",
                 bound=max_steps, rule=figures.AT_MOST, better=figures.LOWER)


def loses_no_more(fp32: Values, qdq: Values, out: Values, max_loss_db: float,
                  min_qdq_db: float) -> list[Check]:
    """The QDQ graph is sane (SQNR vs fp32 above ``min_qdq_db``) and the target loses at most
    ``max_loss_db`` more against fp32 than the QDQ graph does."""
    qdq_db, out_db = numerics.sqnr_db(fp32, qdq), numerics.sqnr_db(fp32, out)
    floor = qdq_db - max_loss_db
    return [_sqnr("qdq_sqnr_db", "QDQ vs fp32 SQNR dB", "fp32", qdq_db, min_qdq_db),
            Check("target vs fp32 SQNR dB", round(qdq_db, 3), round(out_db, 3),
                  round(out_db - qdq_db, 3), ok=out_db >= floor,
                  judge=f"≥ the QDQ graph's - {max_loss_db:g} dB", name="target_sqnr_db",
                  bound=round(floor, 3), rule=figures.AT_LEAST, better=figures.HIGHER)]


def close_to_fp32(fp32: Values, out: Values, min_sqnr_db: float) -> Check:
    """An unquantised (fp16) program's output against fp32."""
    return _sqnr("target_sqnr_db", "target vs fp32 SQNR dB", "fp32",
                 numerics.sqnr_db(fp32, out), min_sqnr_db)


def pte_size(size_bytes: int, max_bytes: int, source: str) -> Check:
    """The .pte's size against its bound (``source`` says whose bound it is)."""
    return Check(".pte size bytes", "", size_bytes, ok=0 < size_bytes <= max_bytes,
                 judge=f"≤ {max_bytes} bytes ({source})", name="pte_bytes", bound=max_bytes,
                 rule=figures.AT_MOST, better=figures.LOWER)


def ab_accuracy(a: str, b: str, kept_a: Mapping[str, float], kept_b: Mapping[str, float],
                max_sqnr_loss_db: float, max_agreement_loss: float, source: str) -> list[Check]:
    """How much of the fp32 model each side of an A/B pair keeps (``kept_*``:
    :func:`numerics.accuracy_vs_reference`), B held to A's: B's logits SQNR against fp32 at most
    ``max_sqnr_loss_db`` under A's, its greedy agreement at most ``max_agreement_loss`` under
    (``source``: where the bounds come from). A figure that is not a number (no steps, NaN)
    fails: it is no measurement."""
    rows = []
    for key, label, name, loss, unit in (
            ("sqnr_db", "logits SQNR vs fp32 dB", "sqnr_vs_fp32_db", max_sqnr_loss_db, " dB"),
            ("greedy_agreement", "greedy agreement with fp32", "greedy_agreement_vs_fp32",
             max_agreement_loss, "")):
        va, vb = float(kept_a[key]), float(kept_b[key])
        delta = vb - va
        measured = kept_a.get("steps", 0) >= 1 and kept_b.get("steps", 0) >= 1
        rows.append(Check(f"A/B {a} vs {b}: {label}", va, vb, round(delta, 4),
                          ok=measured and delta >= -loss,
                          judge=f"B − A ≥ −{loss:g}{unit} ({source})", name=f"ab_{b}_vs_{a}_{name}",
                          bound=-loss, rule=figures.AT_LEAST, better=figures.HIGHER,
                          detail="" if measured else f"steps: {a} {kept_a.get('steps')}, "
                                                     f"{b} {kept_b.get('steps')}"))
    return rows
