"""How a check reads its bound from a case's gate spec, or falls back to a default and says so.

A case's ``case.json`` may declare its floors and ceilings (:mod:`pytest_qnn_genai.models.spec`).
A check asks :func:`bound` for one: the case's value, labelled ``<case> spec``, else the default
here, labelled :data:`DEFAULT_SOURCE`. The label goes into the figure's judge
(``≥ 15 dB (default floor)``), so the report tells a judged-by-default figure from a judged-by-spec
one; no check is skipped for want of a spec.

The defaults live here and not beside the spec's parser on purpose: they judge and build
nothing, and ``models/`` is in the code every build's cache key digests.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_qnn_genai.models.spec import EXACT, ParityTolerance

if TYPE_CHECKING:
    from pytest_qnn_genai.models.case import ModelCase

DEFAULT_SOURCE = "default floor"  # a bound the case did not declare (ceilings too)
# What a check uses when the case declares nothing. The SQNR and greedy-agreement floors are
# those the gate held every case to before cases had specs (stories260k measured 20.4 dB, 46/48
# steps, and 16.6 dB at worst over 20 held-out stories).
DEFAULTS: dict[str, float] = {
    "min_qdq_sqnr_db": 15.0,
    "min_qdq_greedy_agreement": 0.9,
    "max_target_perplexity_ratio": 1.25,
    # The HTP simulator runs the QDQ graph's fixed-point math: the toys measure a per-step cosine
    # >= 0.9997 and 34-42 dB against the CPU QDQ graph, greedy tokens identical.
    "min_target_sqnr_db": 30.0,
    "min_target_row_cosine": 0.995,
}
# The .pte ceiling of a case that declares none: this many times its checkpoint's bytes. A 16a4w
# program holds its weights in about an eighth of their fp32 bytes, twice (prefill and decode
# graphs), plus the context binaries' fixed cost, which dominates a toy: measured .pte /
# checkpoint bytes 1.28 (stories260k), 0.86 (llama3_2_toy), 0.96 (qwen3_toy).
DEFAULT_PTE_CHECKPOINT_RATIO = 2.0


@dataclass(frozen=True)
class Bound:
    """A floor or ceiling and where it comes from (``<case> spec`` or :data:`DEFAULT_SOURCE`)."""

    value: float
    source: str

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_SOURCE

    def judge(self, words: str) -> str:
        """``words`` (``≥ 15 dB``) with the bound's source, as a figure's judge."""
        return f"{words} ({self.source})"


def bound(case: ModelCase, name: str, *, phase: str | None = None,
          default: float | None = None) -> Bound:
    """``case``'s bound ``name`` (``phase``'s, for ``max_perplexity``), else ``default``, else
    :data:`DEFAULTS`' (KeyError when there is none: the caller must derive one)."""
    declared = getattr(case.gate, name)
    if phase is not None:
        declared = declared.get(phase)
    if declared is not None:
        return Bound(float(declared), f"{case.name} spec")
    value = default if default is not None else DEFAULTS.get(name)
    if value is None:
        raise KeyError(f"gate spec field {name}{'.' + phase if phase else ''} has no default")
    return Bound(float(value), DEFAULT_SOURCE)


def target_reference_sqnr(case: ModelCase) -> Bound:
    """The target vs transformers SQNR floor: the case's ``min_target_reference_sqnr_db``, else
    the floor QDQ is held to against fp32 (the target keeps the model as well as QDQ must)."""
    declared = case.gate.min_target_reference_sqnr_db
    if declared is not None:
        return Bound(float(declared), f"{case.name} spec")
    return bound(case, "min_qdq_sqnr_db")


def pte_bytes(case: ModelCase) -> Bound:
    """The .pte ceiling: the case's ``max_pte_bytes``, else
    :data:`DEFAULT_PTE_CHECKPOINT_RATIO` × its checkpoint's bytes."""
    size = case.path("checkpoint").stat().st_size
    return bound(case, "max_pte_bytes", default=round(DEFAULT_PTE_CHECKPOINT_RATIO * size))


def parity_tolerance(case: ModelCase, a: str, b: str) -> ParityTolerance:
    """How far builds ``a`` and ``b`` of ``case`` may differ: its spec's ``parity["a:b"]``, else
    :data:`~pytest_qnn_genai.models.spec.EXACT` (identical encodings, bit-equal outputs)."""
    return case.gate.parity.get(f"{a}:{b}", EXACT)
