"""Speed on the emulator judged by counted work: two programs' instructions per prompt pass and
per decode step (:mod:`pytest_qnn_genai.runtime.work`), one count each, compared exactly.

Contract. B keeps A's speed on a figure when it runs no more instructions than A on the same
workload: exact, no noise floor (``--qnn-perf-ratio-floor`` is wall time's, for upstream's
runners and phones). A program that runs 1 % more instructions reads A/B 0.990 and fails,
whatever the machine was doing. Against the accepted program (``exact``) any other count fails:
more names the kernels that grew; fewer is a change of the program too, failed until accepted
(``--qnn-update-golden`` records today's program), as the accuracy records treat a better
figure. There is no *inconclusive*: equal programs count equal work (the count's premise, held by
``tests/integration/runtime/test_work.py``), so one count per program decides, and a failure
names the op kinds of which B's graph has more nodes (from the names its context binaries carry)
and the kernels whose instructions grew most, with A's and B's counts.

Hazard. The count is of QAIRT's x86 emulator, not of a phone's HTP: it tells whether a program
asks the emulator for more work, which follows the ops and shapes the program runs; how much
faster or slower a phone would be is the phone gate's question (``perf/phone.py``). Both sides
run the same workload (:func:`workload`), or the comparison would compare prompts.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.figures import EQUAL, FAIL, HIGHER, PASS, RATIO, Figure

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.runtime.work import MethodWork, ProgramWork

DECODE_STEPS = 4  # decode steps counted per program (after the prompt pass)
NAMED_KERNELS = 5  # the kernels a failure names
JUDGES = {False: "B's instructions ≤ A's (counted by callgrind, exact)",
          True: "B's instructions = A's (counted by callgrind, exact; fewer: accept the change)"}
FLOOR = 1.0  # A's count over B's
FIGURES = {"prefill_instructions": "prefill_work", "decode_instructions": "decode_work"}


def workload(case: ModelCase, ptes: Sequence[Path]) -> tuple[list[int], int]:
    """The prompt ids and decode steps both sides count: the case's perf prompt (several AR
    chunks) cut to what every program's prompt processor takes, and :data:`DECODE_STEPS` (fewer
    when a context has no room)."""
    from pytest_qnn_genai.perf.benchmark import Workload, fit_workload
    from pytest_qnn_genai.runtime.host_runner import HybridRunner

    ids, n = fit_workload(Workload(Workload.for_case(case).prompt, DECODE_STEPS + 1),
                          case.path("tokenizer_model"), [HybridRunner(p) for p in ptes])
    return ids, max(1, n - 1)


@dataclass(frozen=True)
class WorkVerdict:
    """One figure of B's work against A's: the counts, their ratio A/B, the kernels that grew."""

    figure: str  # a key of :data:`FIGURES`
    a: str
    b: str
    a_count: int
    b_count: int
    grown: tuple[tuple[str, int, int], ...]  # (kernel, A's, B's), most grown first
    more_nodes: tuple[tuple[str, int, int], ...] = ()  # (op kind, A's nodes, B's)
    exact: bool = False  # B must count what A counts (the accepted program)

    @property
    def ratio(self) -> float:
        return self.a_count / self.b_count

    @property
    def passed(self) -> bool:
        return self.b_count == self.a_count if self.exact else self.b_count <= self.a_count

    def row(self) -> Figure:
        """The run report's row: A/B of the counts, held at or above 1, both counts."""
        name = FIGURES[self.figure]
        return Figure(f"{name}_ratio", round(self.ratio, 6), PASS if self.passed else FAIL,
                      JUDGES[self.exact], EQUAL if self.exact else RATIO, FLOOR,
                      None if self.exact else HIGHER,
                      label=f"{name} A/B ({self.b} vs {self.a})",
                      context={self.a: self.a_count, self.b: self.b_count,
                               "unit": "instructions of " + ("the prompt pass" if "prefill" in
                                                             self.figure else "the decode steps")})

    def __str__(self) -> str:
        text = (f"{self.b} vs {self.a} {FIGURES[self.figure]}: A/B = {self.ratio:.4f} "
                f"({self.a} {self.a_count:,}, {self.b} {self.b_count:,} instructions; B may run "
                f"{'neither more nor fewer' if self.exact else 'no more'}): ")
        if self.passed:
            return text + "pass"
        if self.b_count < self.a_count:
            return text + (f"FAIL: {self.b} runs fewer instructions than {self.a}, a change of "
                           "the program: accept it (--qnn-update-golden records today's program)")
        grown = "; ".join(f"{k} {x:,} -> {y:,} (+{y - x:,})" for k, x, y in self.grown)
        nodes = ", ".join(f"{k} {x} -> {y}" for k, x, y in self.more_nodes)
        return text + (f"FAIL: op kinds with more nodes in {self.b}: {nodes or 'none'}; the "
                       "kernels whose instructions grew most (over the counted calls): "
                       f"{grown or 'none kept'}")


def grown_kernels(a: MethodWork, b: MethodWork, n: int = NAMED_KERNELS) -> tuple[
        tuple[str, int, int], ...]:
    """The ``n`` kernels whose instructions grew most from ``a`` to ``b`` (kept kernels only)."""
    growth = sorted(((k, a.kernels.get(k, 0), v) for k, v in b.kernels.items()
                     if v > a.kernels.get(k, 0)), key=lambda t: t[1] - t[2])
    return tuple(growth[:n])


def more_nodes(a: MethodWork, b: MethodWork) -> tuple[tuple[str, int, int], ...]:
    """The op kinds of which ``b``'s graph has more nodes than ``a``'s."""
    return tuple((k, a.nodes.get(k, 0), v) for k, v in sorted(b.nodes.items())
                 if v > a.nodes.get(k, 0))


def judge(a: str, a_work: ProgramWork, b: str, b_work: ProgramWork,
          exact: bool = False) -> list[WorkVerdict]:
    """B's work against A's on each figure (both counted on one workload; ``exact``: B must
    count what A counts)."""
    if (a_work.prompt_ids, len(a_work.decode.calls)) != (b_work.prompt_ids,
                                                          len(b_work.decode.calls)):
        raise ValueError(f"{a} and {b} were counted on different workloads")
    a_figures, b_figures = a_work.figures, b_work.figures
    return [WorkVerdict(f, a, b, a_figures[f], b_figures[f],
                        grown_kernels(a_work.method(f), b_work.method(f)),
                        more_nodes(a_work.method(f), b_work.method(f)), exact)
            for f in FIGURES]
