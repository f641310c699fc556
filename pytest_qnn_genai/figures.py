"""A judged figure: one measured value, the verdict of the check that judged it, and that judge.

Every number the run report shows comes from a :class:`Figure` made by the check that judged it
(:meth:`pytest_qnn_genai.checks.parity.Check.figure`, the A/B gate's
:meth:`~pytest_qnn_genai.perf.gate.GateVerdict.figure`, the golden floors'
:meth:`~pytest_qnn_genai.golden.perf.GoldenPerf.judge`, :func:`measured` here), so the value,
its threshold and its verdict have one source. The contract:

- ``verdict`` is ``pass``, ``fail`` or ``inconclusive`` only together with a ``judge`` that names
  the check (``≥ 15 dB``, ``floor 1600 (SM8650 phone, −10 % noise)``, ``B/A ≥ 0.97 at 95 %``); a
  figure nothing judged is ``info``. A judged figure without a judge is refused (ValueError).
  ``updated`` is the value an update run wrote into a golden file (its judge names the file): it
  was judged by nothing, since judging it against what it just wrote cannot fail.
- ``rule`` says what kind of check it was; :data:`PHONE_FLOOR` marks a golden perf floor, which
  only a phone's figure may meet (the report refuses it on an emulator record); :data:`NO_RECORD`
  a ``fail`` because the figure has no accepted value to be held to
  (:mod:`pytest_qnn_genai.golden.no_record`), counted apart by :func:`no_records`.
- ``bound`` is the threshold as a number when there is one (plots draw it), ``better`` the
  direction a change is an improvement in (``higher``/``lower``; None: neither).

The hazard this exists for: a report that copies each test's outcome onto every figure of its
record shows an emulator's decode rate, far below any phone floor, as ``pass`` next to that floor.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TypedDict, cast

PASS, FAIL, INCONCLUSIVE, INFO, UPDATED = "pass", "fail", "inconclusive", "info", "updated"
VERDICTS = (PASS, FAIL, INCONCLUSIVE, INFO, UPDATED)
FAILING = (FAIL, INCONCLUSIVE)  # a gate that could not tell is never a pass

# what kind of check judged a figure
AT_LEAST, AT_MOST, EQUAL, RATIO, PHONE_FLOOR, PROBLEM, NO_RECORD = (
    "at-least", "at-most", "equal", "ratio", "phone-floor", "problem", "no-record")
RULES = ("", AT_LEAST, AT_MOST, EQUAL, RATIO, PHONE_FLOOR, PROBLEM, NO_RECORD)
HIGHER, LOWER = "higher", "lower"

# JSON scalars a figure's value and reference may be (a count, a rate, "identical", ...)
Scalar = float | int | str | bool | None


class FigureDict(TypedDict):
    """A :class:`Figure` in a results file."""

    name: str
    value: Scalar
    verdict: str
    judge: str
    rule: str
    bound: float | None
    better: str | None
    reference: Scalar
    label: str
    context: dict[str, Scalar]


@dataclass(frozen=True)
class Figure:
    """One measured value and the verdict of the check that judged it (module docstring)."""

    name: str  # stable across runs: the trend and the run-to-run diff key on it
    value: Scalar
    verdict: str = INFO
    judge: str = ""  # what judged it, in words a reader checks the verdict against
    rule: str = ""
    bound: float | None = None
    better: str | None = None
    reference: Scalar = None  # the counterpart's value (legacy, A, the QDQ graph), if any
    label: str = ""  # how a table names it (defaults to ``name``)
    context: dict[str, Scalar] = field(default_factory=dict)  # bounds, rounds, medians, ...

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a figure needs a name")
        if self.verdict not in VERDICTS:
            raise ValueError(f"figure {self.name}: verdict must be one of {', '.join(VERDICTS)}, "
                             f"got {self.verdict!r}")
        if self.verdict != INFO and not self.judge:
            raise ValueError(f"figure {self.name}: verdict {self.verdict!r} names no judge "
                             "(a figure nothing judged is 'info')")
        if self.rule not in RULES:
            raise ValueError(f"figure {self.name}: unknown rule {self.rule!r}")
        if self.better not in (None, HIGHER, LOWER):
            raise ValueError(f"figure {self.name}: better must be 'higher', 'lower' or None")

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING

    @property
    def title(self) -> str:
        return self.label or self.name

    @property
    def number(self) -> float | None:
        """The value as a finite float, or None (text, booleans, missing, NaN, infinities)."""
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return None
        return float(v)

    def __str__(self) -> str:
        """The verdict as one sentence: the figure, its value, and what held it (the threshold
        and its source, from ``judge``)."""
        ref = f" (against {self.reference!r})" if self.reference not in (None, "") else ""
        if self.verdict == INFO:
            return f"{self.title} is {self.value!r}{ref}, judged by nothing (info)."
        said = {PASS: "which meets", FAIL: "which fails",
                INCONCLUSIVE: "which could not be told against"}[self.verdict]
        return f"{self.title} is {self.value!r}{ref}, {said} {self.judge}."

    def to_dict(self) -> FigureDict:
        return cast("FigureDict", asdict(self))  # its fields, by name

    @classmethod
    def from_dict(cls, data: FigureDict) -> Figure:
        return cls(**data)


def scalar(value: object) -> Scalar:
    """``value`` as a JSON scalar: numbers and text kept (numpy's through ``item()``), anything
    else as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return scalar(item())
        except (TypeError, ValueError):
            pass
    return str(value)


def info(name: str, value: Scalar, *, better: str | None = None, label: str = "",
         reference: Scalar = None, context: Mapping[str, Scalar] | None = None) -> Figure:
    """A figure reported and judged by nothing."""
    return Figure(name, value, INFO, better=better, reference=reference, label=label,
                  context=dict(context or {}))


def direction(name: str) -> str | None:
    """The better direction of a speed figure by its name: rates (``*tok_s``, ``*_per_s``) are
    better higher, durations (``*_s``, ``*_ms``) lower; None for any other name."""
    if name.endswith(("tok_s", "_per_s")):
        return HIGHER
    if name.endswith(("_s", "_ms")):
        return LOWER
    return None


def measured(name: str, value: float, *, label: str = "") -> Figure:
    """A speed figure no floor applies to (the emulator's): ``info`` while it is a measurement
    (positive and finite), ``fail`` when it is none (a rate of 0 means nothing ran)."""
    better = direction(name)
    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
        return info(name, value, better=better, label=label)
    return Figure(name, value, FAIL, "a measurement is > 0", AT_LEAST, 0.0, better, label=label)


def updated(figure: Figure, where: str) -> Figure:
    """``figure`` as the value an update run wrote into ``where`` (a golden file): verdict
    ``updated``, never ``pass``."""
    return replace(figure, verdict=UPDATED, judge=f"written to {where} by an update run, "
                   "not judged", rule="")


def problem(name: str, message: str, judge: str) -> Figure:
    """A failed check that has no number (the workload was another, too little work, ...)."""
    return Figure(name, message, FAIL, judge, PROBLEM)


def no_record(name: str, value: Scalar, judge: str, *, better: str | None = None,
              label: str = "") -> Figure:
    """A figure that fails because nothing accepted holds it (``judge``: where it was sought)."""
    return Figure(name, value, FAIL, judge, NO_RECORD, better=better, label=label)


def no_records(figures: Iterable[Figure]) -> int:
    """How many of ``figures`` failed for want of a record."""
    return sum(1 for f in figures if f.rule == NO_RECORD)


def counts(figures: Iterable[Figure]) -> dict[str, int]:
    """How many figures have each verdict (every verdict present, zeros included)."""
    out = dict.fromkeys(VERDICTS, 0)
    for f in figures:
        out[f.verdict] += 1
    return out
