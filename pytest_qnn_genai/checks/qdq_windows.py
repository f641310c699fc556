"""Different QDQ graphs of one model held to fp32 on the same teacher-forced token windows.

llama.py's QDQ graph (``static_llama``), the staged flow's (the same graph, built by this
project) and genai_pipeline's (the Hugging Face modelling, quantized by upstream's new front
half) are different graphs, so they are compared where they must agree: each is fed the same
token windows (the held-out stories' windows, :mod:`.perplexity`, and the eval prompt followed by
fp32's greedy continuation) and its logits rows are held to transformers' fp32 rows of the same
windows: SQNR (dB), mean and 99th-percentile KL(fp32 || QDQ) per position, top-1 agreement, the
first eval-window position whose argmax leaves fp32's (teacher-forced: later positions still see
the true tokens), and held-out word perplexity.

Each pair of flows has its own bounds (:func:`pair_checks`), read from a committed JSON file
(``golden/genai/qdq_windows.json``: per case and pair, with the measurement they were set
from), never from the run under test: genai vs legacy is a different quantization
(bounded by what was measured), staged vs legacy the same one (bounded tightly).

Hazard: the rows of the three flows and of fp32 must be the same windows in the same order;
:func:`metrics` refuses rows of different shapes rather than comparing misaligned positions.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks import numerics, perplexity
from pytest_qnn_genai.checks.parity import Check

ROWS_FILE = "rows.npz"
EVAL = "eval"  # the eval-prompt window's name


@dataclass(frozen=True)
class Windows:
    """The teacher-forced windows: the held-out documents' and the eval prompt's."""

    docs: tuple[perplexity.Document, ...]
    eval_context: tuple[int, ...]  # the eval prompt's ids
    eval_continuation: tuple[int, ...]  # fp32's greedy tokens after it

    @property
    def all(self) -> list[perplexity.Window]:
        """Every window, held-out ones first, the eval window last."""
        return [*perplexity.all_windows(self.docs),
                perplexity.Window(self.eval_context, self.eval_continuation)]

    def ids(self) -> list[list[int]]:
        """What a graph is fed, one list per window."""
        return [w.ids for w in self.all]

    def rows(self, full: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Each window's rows that predict its continuation, from a graph's rows of :meth:`ids`."""
        return [np.asarray(r)[len(w.context) - 1:] for r, w in zip(full, self.all, strict=True)]


def save_rows(rows: Sequence[np.ndarray], out: Path) -> None:
    np.savez(out / ROWS_FILE, *[np.asarray(r, dtype=np.float32) for r in rows])


def load_rows(folder: Path) -> list[np.ndarray]:
    with np.load(folder / ROWS_FILE) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


@dataclass(frozen=True)
class Metrics:
    """One QDQ graph against fp32 over every window."""

    sqnr_db: float
    mean_kl: float
    p99_kl: float
    top1: float
    first_divergence: int  # eval-window position of the first argmax change; -1: none
    word_perplexity: float  # held-out windows only

    def as_dict(self) -> dict[str, float]:
        return {"sqnr_db": self.sqnr_db, "mean_kl": self.mean_kl, "p99_kl": self.p99_kl,
                "top1": self.top1, "first_divergence": float(self.first_divergence),
                "word_perplexity": self.word_perplexity}


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    out: np.ndarray = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return out


def metrics(windows: Windows, fp32: Sequence[np.ndarray], qdq: Sequence[np.ndarray]) -> Metrics:
    """``qdq``'s continuation rows (:meth:`Windows.rows`) against ``fp32``'s."""
    if len(fp32) != len(qdq) or any(np.shape(a) != np.shape(b) for a, b in zip(fp32, qdq)):
        raise ValueError("fp32 and QDQ rows are not the same windows")
    ref, got = np.concatenate(fp32), np.concatenate(qdq)
    lp, lq = _log_softmax(ref), _log_softmax(got)
    kl = np.sum(np.exp(lp) * (lp - lq), axis=-1)
    eval_ref, eval_got = np.argmax(fp32[-1], axis=-1), np.argmax(qdq[-1], axis=-1)
    differ = np.flatnonzero(eval_ref != eval_got)
    held = len(perplexity.all_windows(windows.docs))
    ppl = perplexity.score("qdq", windows.docs, list(qdq[:held]))
    return Metrics(numerics.sqnr_db(ref, got), float(kl.mean()), float(np.percentile(kl, 99)),
                   float(np.mean(np.argmax(ref, -1) == np.argmax(got, -1))),
                   int(differ[0]) if differ.size else -1, ppl.word)


def load_bounds(path: Path, case: str) -> dict[str, dict[str, float]]:
    """``case``'s per-pair bounds from the committed file (KeyError names what is missing)."""
    data = json.loads(path.read_text())
    if case not in data:
        raise KeyError(f"{path}: no bounds for {case} (known: {', '.join(sorted(data))})")
    return {pair: {k: float(v) for k, v in b.items() if k != "notes"}
            for pair, b in data[case].items() if isinstance(b, dict)}


# figure -> (label, rule, better, digits)
_FIGURES = {
    "sqnr_db": ("logits SQNR vs fp32 (dB)", figures.AT_LEAST, figures.HIGHER, 3),
    "mean_kl": ("mean KL vs fp32 (nats)", figures.AT_MOST, figures.LOWER, 6),
    "p99_kl": ("p99 KL vs fp32 (nats)", figures.AT_MOST, figures.LOWER, 6),
    "top1": ("top-1 agreement vs fp32", figures.AT_LEAST, figures.HIGHER, 4),
    "first_divergence": ("first greedy divergence (eval window, -1 none)", "", None, 0),
    "word_perplexity": ("held-out word perplexity", figures.AT_MOST, figures.LOWER, 4),
}


def _bound(name: str, ref: float, bounds: dict[str, float]) -> float | None:
    """The bound of figure ``name`` for a pair: absolute (``min_``/``max_<name>``), or relative to
    the reference flow's figure (``max_<name>_ratio``, ``max_<name>_drop``)."""
    if f"min_{name}" in bounds:
        return bounds[f"min_{name}"]
    if f"max_{name}" in bounds:
        return bounds[f"max_{name}"]
    if f"max_{name}_ratio" in bounds:
        return ref * bounds[f"max_{name}_ratio"]
    if f"max_{name}_drop" in bounds:
        return ref - bounds[f"max_{name}_drop"]
    return None


def pair_checks(pair: str, ref: Metrics, test: Metrics, bounds: dict[str, float],
                source: str) -> list[Check]:
    """``test`` beside ``ref`` (the pair ``ref_vs_test``), each figure judged by the pair's bound
    when it has one (``source`` names the file), else info."""
    rows = []
    a, b = ref.as_dict(), test.as_dict()
    for name, (label, rule, better, digits) in _FIGURES.items():
        bound = _bound(name, a[name], bounds)
        value = round(b[name], digits)
        if bound is None or not rule:
            rows.append(Check(f"{pair}: {label}", round(a[name], digits), value,
                              round(b[name] - a[name], digits), info=True,
                              name=f"{pair}_{name}", better=better))
            continue
        ok = b[name] >= bound if rule == figures.AT_LEAST else b[name] <= bound
        sign = "≥" if rule == figures.AT_LEAST else "≤"
        rows.append(Check(f"{pair}: {label}", round(a[name], digits), value,
                          round(b[name] - a[name], digits), ok=ok,
                          judge=f"{sign} {bound:.{max(digits, 3)}g} ({source})",
                          name=f"{pair}_{name}", bound=round(bound, 6), rule=rule,
                          better=better))
    return rows


def agreement_check(label: str, name: str, reference: Sequence[np.ndarray],
                    test: Sequence[np.ndarray], floor: float, source: str) -> Check:
    """``test``'s rows against ``reference``'s of the same windows (a program against its own QDQ
    graph): their logits SQNR (dB), at least ``floor`` (``source`` names where it is set)."""
    if len(reference) != len(test) or any(np.shape(a) != np.shape(b)
                                          for a, b in zip(reference, test)):
        raise ValueError(f"{label}: the rows are not the same windows")
    value = numerics.sqnr_db(np.concatenate(reference), np.concatenate(test))
    return Check(f"{label}: logits SQNR (dB)", "", round(value, 3), ok=value >= floor,
                 judge=f"≥ {floor:.4g} ({source})", name=name, bound=floor,
                 rule=figures.AT_LEAST, better=figures.HIGHER)


def table(by_flow: dict[str, Metrics]) -> str:
    """The flows' figures side by side (one column per flow)."""
    names = list(by_flow)
    lines = ["figure".ljust(48) + "".join(n.rjust(14) for n in names)]
    for key, (label, _, _, digits) in _FIGURES.items():
        cells = "".join(f"{by_flow[n].as_dict()[key]:14.{digits}f}" for n in names)
        lines.append(label.ljust(48) + cells)
    return "\n".join(lines)
