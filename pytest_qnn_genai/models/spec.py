"""A model case's gate spec: the floors and ceilings its gate checks hold it to.

Like upstream's ``LlmSpecs`` (``backends/qualcomm/tests/test_qnn_delegate.py``: per model a .pte
size, a wikitext perplexity, an SQNR and per-SoC speed floors), a ``case.json`` may declare
``"gate": {...}`` with any of :data:`FIELDS`. A check whose bound the case does not declare runs
against a default and its figure says so: the judge reads ``(default floor)`` instead of
``(<case> spec)`` (:mod:`pytest_qnn_genai.checks.bounds`, where the defaults live: they judge,
they build nothing, so they stay out of the modules every build's cache key digests; this one
is in them, through ``models/case.py``). Nothing is skipped silently.

The per-SoC prefill/decode floors stay where they already are per case and per SoC:
``golden/perf/<case>.json`` (:mod:`pytest_qnn_genai.golden.perf`), with their provenance.

Two builds that claim one recipe (legacy llama.py and the staged flow, ``legacy:new``) are held
to identity: identical QDQ encodings and bit-equal outputs. ``"parity": {"legacy:new": {...}}``
opts one pair into a tolerance (:class:`ParityTolerance`), never without a ``reason``, which the
parity table and the report print beside the verdict.

A malformed spec (an unknown field, a value of the wrong type or sign, a perplexity phase that
does not exist) is one :class:`GateSpecError` line naming the field; ``load_case`` prefixes the
case.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields

PHASES = ("fp32", "qdq", "target")  # where perplexity is measured (llama.py's tasks_eval's three)
FLOWS = ("legacy", "new", "genai")  # the builds a parity pair may name


class GateSpecError(ValueError):
    """A ``case.json``'s ``gate`` spec is malformed (one line naming the field)."""


@dataclass(frozen=True)
class ParityTolerance:
    """How far two builds of one recipe may differ (the default, :data:`EXACT`: not at all).

    ``max_encoding_steps``: each QDQ tensor's range endpoints, in quantisation steps;
    ``min_logits_sqnr_db``/``min_row_cosine``: the program outputs on the same inputs (None: bit
    equal); ``reason``: why this pair may differ, printed with every verdict it relaxes."""

    reason: str = ""
    max_encoding_steps: float = 0.0
    min_logits_sqnr_db: float | None = None
    min_row_cosine: float | None = None

    @property
    def exact(self) -> bool:
        return (self.max_encoding_steps == 0 and self.min_logits_sqnr_db is None
                and self.min_row_cosine is None)


EXACT = ParityTolerance()
TOLERANCE_FIELDS = ("reason", "max_encoding_steps", "min_logits_sqnr_db", "min_row_cosine")


@dataclass(frozen=True)
class GateSpec:
    """The bounds a case declares (None: the check uses its default). See :data:`FIELDS`."""

    min_qdq_sqnr_db: float | None = None
    min_qdq_greedy_agreement: float | None = None
    max_pte_bytes: int | None = None
    max_perplexity: dict[str, float] = field(default_factory=dict)  # phase -> word perplexity
    max_target_perplexity_ratio: float | None = None  # target / fp32 word perplexity
    min_target_sqnr_db: float | None = None  # target vs QDQ logits on the target's tokens
    min_target_row_cosine: float | None = None  # its smallest per-step cosine
    min_target_reference_sqnr_db: float | None = None  # target vs transformers (else min_qdq's)
    parity: dict[str, ParityTolerance] = field(default_factory=dict)  # "legacy:new" -> tolerance
    notes: str = ""  # where the numbers come from (measured how, whose bound)


# field -> what it bounds (the unit test holds every GateSpec field to a line here)
FIELDS = {
    "min_qdq_sqnr_db": "QDQ vs fp32 logits SQNR floor, dB (also the target vs transformers floor, "
                       "unless min_target_reference_sqnr_db is declared)",
    "min_qdq_greedy_agreement": "QDQ vs fp32 teacher-forced greedy agreement floor, 0..1 (also "
                                "the target vs transformers floor)",
    "max_pte_bytes": ".pte size ceiling, bytes",
    "max_perplexity": "word perplexity ceilings on the held-out split, per phase: "
                      "{\"fp32\": .., \"qdq\": .., \"target\": ..}",
    "max_target_perplexity_ratio": "ceiling of the target's word perplexity / fp32's",
    "min_target_sqnr_db": "target vs QDQ logits SQNR floor, dB (teacher-forced on the target's "
                          "tokens)",
    "min_target_row_cosine": "floor of the smallest per-step cosine of the target's logits "
                             "against the QDQ graph's, 0..1",
    "min_target_reference_sqnr_db": "target vs transformers' fp32 logits SQNR floor, dB, on the "
                                    "target's tokens (default: the case's min_qdq_sqnr_db)",
    "parity": "per pair of builds (\"legacy:new\"), a tolerance instead of identity: "
              "{\"reason\": .., \"max_encoding_steps\": .., \"min_logits_sqnr_db\": .., "
              "\"min_row_cosine\": ..}",
    "notes": "free text: how the numbers were measured, whose bound they are",
}


def _number(name: str, value: object, *, integer: bool = False,
            at_most: float | None = None) -> float:
    """``value`` as a positive finite number (an integer if ``integer``), at most ``at_most``."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
          and (isinstance(value, int) or not integer))
    number = float(value) if ok and isinstance(value, (int, float)) else math.nan
    if not math.isfinite(number) or number <= 0 or (at_most is not None and number > at_most):
        kind = "a positive integer" if integer else "a positive number"
        limit = f" ≤ {at_most:g}" if at_most is not None else ""
        raise GateSpecError(f"gate.{name} must be {kind}{limit}, got {value!r}")
    return number


def _optional(data: Mapping[str, object], name: str, at_most: float | None = None) -> float | None:
    return _number(name, data[name], at_most=at_most) if name in data else None


def _perplexity(data: Mapping[str, object]) -> dict[str, float]:
    ppl = data.get("max_perplexity", {})
    if not isinstance(ppl, dict):
        raise GateSpecError(f"gate.max_perplexity must be an object of phase: ceiling "
                            f"({', '.join(PHASES)}), got {type(ppl).__name__}")
    bad = [k for k in ppl if k not in PHASES]
    if bad:
        raise GateSpecError(f"gate.max_perplexity.{bad[0]} is no phase; the phases: "
                            f"{', '.join(PHASES)}")
    return {k: _number(f"max_perplexity.{k}", v) for k, v in ppl.items()}


def _tolerance(pair: str, data: object) -> ParityTolerance:
    where = f"gate.parity.{pair}"
    a, _, b = pair.partition(":")
    if a not in FLOWS or b not in FLOWS or a == b:
        raise GateSpecError(f"{where}: a pair is two of {', '.join(FLOWS)} as \"a:b\"")
    if not isinstance(data, dict):
        raise GateSpecError(f"{where} must be an object of {', '.join(TOLERANCE_FIELDS)}")
    unknown = [k for k in data if k not in TOLERANCE_FIELDS]
    if unknown:
        raise GateSpecError(f"{where}.{unknown[0]} is not a tolerance field; the fields: "
                            f"{', '.join(TOLERANCE_FIELDS)}")
    reason = data.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise GateSpecError(f"{where}.reason is required: why may these builds differ?")
    raw = data.get("max_encoding_steps", 0)
    steps = 0.0 if raw == 0 else _number(f"parity.{pair}.max_encoding_steps", raw)
    sqnr, cos = data.get("min_logits_sqnr_db"), data.get("min_row_cosine")
    tolerance = ParityTolerance(
        reason.strip(), steps,
        None if sqnr is None else _number(f"parity.{pair}.min_logits_sqnr_db", sqnr),
        None if cos is None else _number(f"parity.{pair}.min_row_cosine", cos, at_most=1.0))
    if tolerance.exact:
        raise GateSpecError(f"{where} relaxes nothing: name a max_encoding_steps, "
                            "min_logits_sqnr_db or min_row_cosine, or drop the entry")
    return tolerance


def _parity(data: dict[str, object]) -> dict[str, ParityTolerance]:
    pairs = data.get("parity", {})
    if not isinstance(pairs, dict):
        raise GateSpecError(f"gate.parity must be an object of \"a:b\": tolerance, got "
                            f"{type(pairs).__name__}")
    return {pair: _tolerance(pair, v) for pair, v in pairs.items()}


def parse(data: object) -> GateSpec:
    """``case.json``'s ``gate`` object as a :class:`GateSpec`; every problem one line naming the
    field (:class:`GateSpecError`)."""
    if not isinstance(data, dict):
        raise GateSpecError(f"gate must be an object of {', '.join(FIELDS)}, got "
                            f"{type(data).__name__}")
    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        raise GateSpecError(f"gate.{unknown[0]} is not a gate spec field; the fields: "
                            f"{', '.join(FIELDS)}")
    notes = data.get("notes", "")
    if not isinstance(notes, str):
        raise GateSpecError(f"gate.notes must be text, got {type(notes).__name__}")
    pte = data.get("max_pte_bytes")
    return GateSpec(
        min_qdq_sqnr_db=_optional(data, "min_qdq_sqnr_db"),
        min_qdq_greedy_agreement=_optional(data, "min_qdq_greedy_agreement", at_most=1.0),
        max_pte_bytes=None if pte is None else int(_number("max_pte_bytes", pte, integer=True)),
        max_perplexity=_perplexity(data),
        max_target_perplexity_ratio=_optional(data, "max_target_perplexity_ratio"),
        min_target_sqnr_db=_optional(data, "min_target_sqnr_db"),
        min_target_row_cosine=_optional(data, "min_target_row_cosine", at_most=1.0),
        min_target_reference_sqnr_db=_optional(data, "min_target_reference_sqnr_db"),
        parity=_parity(data), notes=notes)


def to_json(spec: GateSpec) -> dict[str, object]:
    """The declared fields of ``spec`` (what ``case.json`` says), for the run report."""
    out: dict[str, object] = {}
    for f in fields(spec):
        value = getattr(spec, f.name)
        if value in (None, "", {}):
            continue
        if f.name == "parity":
            out[f.name] = {pair: {k: v for k, v in asdict(t).items() if v is not None}
                           for pair, t in value.items()}
        else:
            out[f.name] = dict(value) if isinstance(value, Mapping) else value
    return out
