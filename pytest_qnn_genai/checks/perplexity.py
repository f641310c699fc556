"""Perplexity and distribution metrics of held-out text, as llama.py and llama.cpp report them.

**Perplexity** as ``llama.py --eval_methods tasks_eval`` computes it at its three phases (the fp32
module and the QDQ graph through ``run_lm_eval``, the device through ``TaskEval``'s kv-mode logits
dump), which is lm_eval's ``loglikelihood_rolling``: each document is encoded without special
tokens, cut into disjoint rolling windows (``utils.get_rolling_token_windows`` with
``context_len=1``, then ``make_disjoint_window``): the first window predicts the first
``max_len`` tokens after a prefix token, each later one the next ``max_len`` tokens after the
one before them; a window's log-likelihood is the sum of ``log_softmax`` of the model's row for
each predicted token. Word perplexity (what llama.py reports as ``wiki_ppl``, lm_eval's
``word_perplexity``) is ``exp(-Σ loglikelihood / Σ words)``, words counted as wikitext counts
them (``re.split(r"\\s+", text)``); token perplexity ``exp(-Σ ll / Σ tokens)`` is reported too.
:func:`rolling_windows` is held to lm_eval's own functions (``tests/unit/checks``).

The prefix token is what ``qnn_llama_runner`` puts before a text: the runner's ids for a document
are ``[bos] + ids`` for a tokenizer with BOS, so the first window predicts every token of the text
after BOS; a tokenizer whose runner adds no BOS (Qwen's) gives the text's first token as the
prefix, which is then not predicted (in every phase alike).

**KL divergence and top-1 agreement** as ``llama-perplexity --kl-divergence`` reports them: over
every scored position, the mean of ``KL(softmax(fp32) || softmax(other))`` and the share of
positions where both argmaxes are the same.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks import bounds
from pytest_qnn_genai.checks.parity import Check
from pytest_qnn_genai.models.spec import EXACT, ParityTolerance

if TYPE_CHECKING:
    from pytest_qnn_genai.models.case import ModelCase


@dataclass(frozen=True)
class Window:
    """One scored window: the model is fed ``context + continuation[:-1]`` and its rows from
    ``len(context) - 1`` on are the distributions of the ``continuation`` tokens."""

    context: tuple[int, ...]
    continuation: tuple[int, ...]

    @property
    def ids(self) -> list[int]:
        """What the model is fed."""
        return [*self.context, *self.continuation[:-1]]


def rolling_windows(tokens: Sequence[int], prefix: int, max_len: int) -> list[Window]:
    """lm_eval's ``get_rolling_token_windows(tokens, prefix, max_len, context_len=1)``, each made
    disjoint (``make_disjoint_window``): every token predicted once, no window longer than
    ``max_len`` tokens of input."""
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    tokens = [int(t) for t in tokens]
    if not tokens:
        return []
    first = min(max_len, len(tokens))
    out = [Window((int(prefix),), tuple(tokens[:first]))]
    predicted = first
    while predicted < len(tokens):
        n = min(len(tokens) - predicted, max_len)
        end = predicted + n
        given = tokens[end - max_len - 1:end - 1]
        out.append(Window(tuple(given[:len(given) - (n - 1)]), tuple(tokens[end - n:end])))
        predicted = end
    return out


def count_words(text: str) -> int:
    """Words as lm_eval's wikitext task counts them (``len(re.split(r"\\s+", page))``)."""
    return len(re.split(r"\s+", text))


@dataclass(frozen=True)
class Document:
    """A held-out text, its word count and its windows."""

    text: str
    words: int
    windows: tuple[Window, ...]


def documents(texts: Sequence[str], runner_ids: Callable[[str], list[int]],
              max_len: int) -> list[Document]:
    """Each text as the runner encodes it (``runner_ids``: BOS first where the runner adds one),
    the first id the prefix, cut into windows of at most ``max_len`` input tokens."""
    docs = []
    for text in texts:
        ids = runner_ids(text)
        if len(ids) < 2:
            raise ValueError(f"held-out text {text[:40]!r} encodes to {len(ids)} token(s)")
        docs.append(Document(text, count_words(text),
                             tuple(rolling_windows(ids[1:], ids[0], max_len))))
    return docs


def heldout_documents(case: ModelCase) -> list[Document]:
    """The held-out documents (:func:`~pytest_qnn_genai.models.heldout.documents_of`: the
    project's stories, or the case's own text) as ``case``'s runner
    encodes them, in windows no longer than its prompt processor takes (``max_context_len -
    prompt_ar_len``): one window is one prompt pass on the target."""
    from pytest_qnn_genai.models import heldout
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

    tokenizer = load_tokenizer(case.path("tokenizer_model"))
    return documents(heldout.documents_of(case), lambda text: encode(tokenizer, text),
                     case.max_context_len - case.prompt_ar_len)


def all_windows(docs: Sequence[Document]) -> list[Window]:
    """Every window of ``docs``, in order (the order logits arrays are given in)."""
    return [w for d in docs for w in d.windows]


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    x = np.asarray(rows, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    out: np.ndarray = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return out


def log_likelihood(rows: np.ndarray, continuation: Sequence[int]) -> float:
    """Σ log p(token) of ``continuation`` under ``rows`` (one row per token)."""
    rows = np.asarray(rows)
    if rows.shape[0] != len(continuation):
        raise ValueError(f"{rows.shape[0]} logits rows for {len(continuation)} tokens")
    logp = _log_softmax(rows)
    return float(logp[np.arange(len(continuation)), list(continuation)].sum())


@dataclass(frozen=True)
class Perplexity:
    """One phase's score of the held-out documents."""

    phase: str  # fp32, qdq, target
    nll: float  # -Σ log-likelihood
    tokens: int
    words: int

    @property
    def word(self) -> float:
        return math.exp(self.nll / self.words)

    @property
    def token(self) -> float:
        return math.exp(self.nll / self.tokens)


def score(phase: str, docs: Sequence[Document], rows: Sequence[np.ndarray]) -> Perplexity:
    """``phase``'s perplexity from its ``rows``: one array per window, in the documents' order."""
    windows = all_windows(docs)
    if len(rows) != len(windows):
        raise ValueError(f"{len(rows)} logits arrays for {len(windows)} windows")
    nll = -sum(log_likelihood(r, w.continuation) for r, w in zip(rows, windows))
    return Perplexity(phase, nll, sum(len(w.continuation) for w in windows),
                      sum(d.words for d in docs))


def uniform_word_perplexity(docs: Sequence[Document], vocab_size: int) -> float:
    """The word perplexity of a model that learned nothing (uniform over the vocabulary)."""
    tokens = sum(len(w.continuation) for d in docs for w in d.windows)
    return math.exp(tokens * math.log(vocab_size) / sum(d.words for d in docs))


def kl_and_top1(reference: Sequence[np.ndarray], other: Sequence[np.ndarray]) -> tuple[float, float]:
    """Mean over positions of ``KL(softmax(reference) || softmax(other))`` (nats) and the share of
    positions whose argmax is the same, over the windows' rows."""
    ref = np.concatenate([np.asarray(r) for r in reference])
    oth = np.concatenate([np.asarray(o) for o in other])
    if ref.shape != oth.shape:
        raise ValueError(f"logits of shape {ref.shape} vs {oth.shape}")
    lp, lq = _log_softmax(ref), _log_softmax(oth)
    kl = float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=-1)))
    top1 = float(np.mean(np.argmax(ref, axis=-1) == np.argmax(oth, axis=-1)))
    return kl, top1


def ceiling_check(ppl: Perplexity, ceiling: float, judge: str) -> Check:
    """``ppl``'s word perplexity held to ``ceiling`` (``judge`` names it and its source)."""
    return Check(f"{ppl.phase} word perplexity (held-out)", "", round(ppl.word, 4),
                 ok=ppl.word <= ceiling, judge=judge, name=f"{ppl.phase}_word_perplexity",
                 bound=ceiling, rule=figures.AT_MOST, better=figures.LOWER,
                 detail=f"{ppl.tokens} tokens, {ppl.words} words, token perplexity "
                        f"{ppl.token:.4f}")


def ratio_check(ppl: Perplexity, fp32: Perplexity, ceiling: float, judge: str) -> Check:
    """``ppl``'s word perplexity over fp32's held to ``ceiling``."""
    ratio = ppl.word / fp32.word
    return Check(f"{ppl.phase} / fp32 word perplexity", round(fp32.word, 4), round(ratio, 4),
                 ok=ratio <= ceiling, judge=judge, name=f"{ppl.phase}_fp32_perplexity_ratio",
                 bound=ceiling, rule=figures.AT_MOST, better=figures.LOWER)


def info_rows(ppl: Perplexity, kl: float | None = None, top1: float | None = None,
              ) -> list[Check]:
    """What nothing judges: the token perplexity and, against fp32, KL and top-1 agreement."""
    rows = [Check(f"{ppl.phase} token perplexity (held-out)", "", round(ppl.token, 4), info=True,
                  name=f"{ppl.phase}_token_perplexity", better=figures.LOWER)]
    if kl is not None and top1 is not None:
        rows += [Check(f"{ppl.phase} vs fp32 mean KL divergence (nats)", "fp32", round(kl, 6),
                       info=True, name=f"{ppl.phase}_kl_vs_fp32", better=figures.LOWER),
                 Check(f"{ppl.phase} vs fp32 top-1 agreement", "fp32", round(top1, 4),
                       info=True, name=f"{ppl.phase}_top1_vs_fp32", better=figures.HIGHER)]
    return rows


PARITY_RTOL = 0.02  # a pair with a case's reasoned tolerance: new may exceed legacy by this share


def parity_checks(legacy: Perplexity, new: Perplexity, legacy_kl_top1: tuple[float, float],
                  new_kl_top1: tuple[float, float], tolerance: ParityTolerance = EXACT,
                  ) -> list[Check]:
    """Legacy's and the new flow's programs on the same held-out text and target: the same word
    perplexity (bit-equal outputs score the same), or, under a case's reasoned ``tolerance``, at
    most :data:`PARITY_RTOL` above legacy's; KL and top-1 agreement against fp32 side by side
    (info)."""
    (lkl, ltop), (nkl, ntop) = legacy_kl_top1, new_kl_top1
    if tolerance.exact:
        limit, ok = legacy.word, new.word == legacy.word
        judge, rule = "identical to legacy's", figures.EQUAL
    else:
        limit = legacy.word * (1 + PARITY_RTOL)
        ok, rule = new.word <= limit, figures.AT_MOST
        judge = f"≤ legacy × {1 + PARITY_RTOL:g} (case tolerance: {tolerance.reason})"
    return [Check("target word perplexity (held-out)", round(legacy.word, 4), round(new.word, 4),
                  f"{new.word - legacy.word:+.4g}", ok=ok, judge=judge,
                  name="target_word_perplexity", bound=round(limit, 4), rule=rule,
                  better=figures.LOWER, tolerance=tolerance.reason),
            Check("target vs fp32 mean KL divergence (nats)", round(lkl, 6), round(nkl, 6),
                  f"{nkl - lkl:+.6f}", info=True, name="target_kl_vs_fp32",
                  better=figures.LOWER),
            Check("target vs fp32 top-1 agreement", round(ltop, 4), round(ntop, 4),
                  f"{ntop - ltop:+.4f}", info=True, name="target_top1_vs_fp32",
                  better=figures.HIGHER)]


def gate_checks(case: ModelCase, scores: Sequence[Perplexity], vocab_size: int,
                docs: Sequence[Document]) -> list[Check]:
    """Each phase's word perplexity held to the case's ceiling (default: a uniform guess over
    the vocabulary), and the target's over fp32's to the case's ratio ceiling."""
    uniform = uniform_word_perplexity(docs, vocab_size)
    checks = []
    for ppl in scores:
        b = bounds.bound(case, "max_perplexity", phase=ppl.phase, default=uniform)
        why = f", a uniform guess over {vocab_size} tokens" if b.is_default else ""
        checks.append(ceiling_check(ppl, b.value, b.judge(f"≤ {b.value:.4g}{why}")))
    by_phase = {p.phase: p for p in scores}
    if "target" in by_phase and "fp32" in by_phase:
        b = bounds.bound(case, "max_target_perplexity_ratio")
        checks.append(ratio_check(by_phase["target"], by_phase["fp32"], b.value,
                                  b.judge(f"≤ {b.value:g}")))
    return checks
