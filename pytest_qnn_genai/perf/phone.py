"""Phone rounds on a golden workload: the floors' prompt and ``--seq_len``, upstream's figures.

A golden file's floors hold only for the workload they were measured on
(:class:`~pytest_qnn_genai.golden.perf.GoldenWorkload`: a prompt, qnn_llama_runner's
``--seq_len`` and the build). :func:`phone_generation` runs that workload through the pipeline's
device session; each round is a :class:`PhoneRound`: the runner's observer figures plus its own
``inference_speed.txt``, the number upstream's test asserts on, so that is the gated
``inference_speed_tok_s``. :func:`phone_round` says why a round cannot stand for the workload:

- ``--seq_len`` S counts prompt + output: a P-token prompt yields S - P tokens unless a decode
  step yields EOS (the output then ends with the EOS piece). A round whose P + generated differs
  from S, and that did not stop early at EOS, ran another workload. Measured hazard: a device
  session that passed ``P + new - 1`` ran one token short with no error anywhere.
- ``inference_speed.txt`` missing, or off from the speed computed from the same run's
  observer line by more than :data:`AGREEMENT` (both come from the same integer-millisecond
  stats and agree to the 6 digits ``%g``/``<<`` print): a stale file, or a runner whose formula
  changed.

A device that runs QNN's x86 HTP simulator (its programs are the emulator's builds: the loopback
phone, an x86 Android image) is judged like the emulator (:func:`simulated`,
:func:`simulator_figures`): its speed is the simulator's, so it is ``info`` and never set
against a phone's floor, and never written as one. Measured hazard: the loopback phone's 30 tok/s
decode failed "< floor 1600", a verdict about a phone it is not.

:func:`phone_minimum` bounds the top-up rounds generously: upstream's stories260k workload is
~125 decode steps, 78 ms at the 1600 tok/s floor, so ``--qnn-perf-min-seconds 2`` alone takes
26 rounds, more than ``4 x --qnn-perf-rounds``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_qnn_genai.figures import HIGHER, Figure, direction, info, measured, problem
from pytest_qnn_genai.perf.benchmark import Minimum, RunCase, observed_inference_speed
from pytest_qnn_genai.runtime.result import PerfStats

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_qnn_genai.golden.perf import GoldenWorkload
    from pytest_qnn_genai.runtime.result import RunResult
    from pytest_qnn_genai.settings import Settings
    from pytest_qnn_genai.targets import Target

AGREEMENT = 0.01  # inference_speed.txt vs the observer line (relative)
PHONE_MAX_ROUNDS = 128  # top-up bound: 2 s of 125 decode steps up to 8000 tok/s


@dataclass(frozen=True)
class PhoneRound(PerfStats):
    """One phone round: the observer figures, the runner's inference speed and what is wrong."""

    runner_inference_speed: float | None = None  # inference_speed.txt
    problems: tuple[str, ...] = ()


def phone_round(result: RunResult, seq_len: int, eos_piece: str) -> PhoneRound:
    """A :class:`PhoneRound` of one runner result, with every problem named."""
    s, problems = result.perf, []
    ran = s.prompt_tokens + s.generated_tokens
    at_eos = bool(eos_piece) and result.text.endswith(eos_piece)
    if ran != seq_len and not (ran < seq_len and at_eos):
        problems.append(
            f"the runner ran {s.prompt_tokens} prompt + {s.generated_tokens} generated = {ran} "
            f"tokens, not the floors' workload --seq_len {seq_len} (prompt + output)"
            + ("" if ran > seq_len else " and did not stop at EOS"))
    reported = result.extra.get("inference_speed_tok_s")
    observed = observed_inference_speed(s)
    if reported is None:
        problems.append("the runner wrote no inference_speed.txt (the figure upstream's floor "
                        "is on)")
    elif not math.isclose(reported, observed, rel_tol=AGREEMENT):
        problems.append(f"inference_speed.txt says {reported:g} tok/s but the same run's "
                        f"observer line gives {observed:g} tok/s (stale file or another "
                        "formula)")
    return PhoneRound(**s.to_dict(), runner_inference_speed=reported, problems=tuple(problems))


def round_problems(rounds: list[PerfStats]) -> list[str]:
    """Every distinct problem of the measured rounds, with how many rounds had it."""
    seen: dict[str, int] = {}
    for r in rounds:
        for p in getattr(r, "problems", ()):
            seen[p] = seen.get(p, 0) + 1
    return [f"{p} ({n} of {len(rounds)} rounds)" for p, n in seen.items()]


def round_problem_figures(rounds: list[PerfStats]) -> list[Figure]:
    """:func:`round_problems` as the run report's failed rows."""
    return [problem("phone_round", p, "every round ran the floors' workload and its "
                    "inference_speed.txt agrees with its observer line")
            for p in round_problems(rounds)]


def phone_generation(run: RunCase, tokenizer_model: Path, workload: GoldenWorkload,
                     ) -> Callable[[], PhoneRound]:
    """One round of ``workload`` on a phone per call: ``run(prompt, seq_len - P)`` (P from the
    case's tokenizer ``tokenizer_model``, BOS included)."""
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

    tokenizer = load_tokenizer(tokenizer_model)
    new_tokens = workload.max_new_tokens(len(encode(tokenizer, workload.prompt)))
    eos_piece = tokenizer.piece(tokenizer.eos_id) if tokenizer.eos_id >= 0 else ""

    def generate() -> PhoneRound:
        return phone_round(run(workload.prompt, new_tokens), workload.seq_len, eos_piece)
    return generate


def phone_minimum(settings: Settings, gated: tuple[str, ...]) -> Minimum:
    """The knobs' minimum work on the figures with floors, up to :data:`PHONE_MAX_ROUNDS`."""
    return Minimum.from_settings(settings, gated=gated, max_rounds=PHONE_MAX_ROUNDS)


def simulated(build_target: Callable[[Target], Target], target: Target) -> bool:
    """Whether ``target`` is a device that runs the x86 HTP simulator: a device whose programs
    are the emulator's builds (``build_target``: ``Pipeline.build_target``, which asks it)."""
    return not target.is_emulator and build_target(target).is_emulator


def simulator_figures(figures: dict[str, float]) -> list[Figure]:
    """A simulator device's speed figures, labelled so a reader sees why no floor judged them:
    ``info``, a rate failed only when it is no measurement (0: nothing ran,
    :func:`pytest_qnn_genai.figures.measured`); a duration may be 0 (a runner's millisecond
    clock), so it is only reported."""
    out = []
    for k, v in figures.items():
        label = f"{k} (x86 HTP simulator: info, no phone floor)"
        out.append(measured(k, v, label=label) if direction(k) == HIGHER else
                   info(k, v, better=direction(k), label=label))
    return out
