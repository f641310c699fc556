"""Lookahead decoding: llama.py's ``--model_mode lookahead`` build, run as upstream runs it.

A case declares a lookahead variant (``"model_mode": "lookahead"`` with ``window``, ``ngram``,
``gcap``; stories260k's ``lookahead``); each flow builds it (llama.py with ``--model_mode
lookahead --window --ngram --gcap``, the staged flow with the same decode graph of
next_power_of_two((window + gcap) * (ngram - 1)) tokens), and upstream's ``qnn_llama_runner``
decodes it with ``--eval_mode 2`` and the build's flags. Lookahead decoding accepts only greedy
tokens (``runner/lhd_token_generator.cpp``), so its text must be the text the same flow's hybrid
build generates greedily (``--eval_mode 1``) for the same prompt and as many tokens: a step may
accept up to ``ngram`` tokens, so the lookahead run goes first and the hybrid run is asked for
the tokens it produced. And it must do what it is for: accept tokens from its candidate n-grams
(the runner's own count, the ``n_accept`` its generator logs: more than 0 and at least the
count measured for the case, :data:`MEASURED`; greedy decoding of one program makes the count
deterministic) and decode at least at the measured share of the same flow's hybrid build's rate,
the median of alternated lookahead / hybrid pairs (``lookahead_gains`` says why): on the x86
simulator a decode step of 16 tokens costs more than one of 1, so the share there is below 1 and
says nothing about a phone, where it is reported (one pair) and judged by nothing until a phone
measures one; a rate is judged only for the same text: a rate of other work would compare
nothing. Upstream's runners only: the host runner decodes AR-1.

Two tests, one per flow: the staged flow's build is the change under test and runs in every
selection; llama.py's (``nightly``) is upstream's own program, whose lookahead build was the
costliest build of a cold ``make test``: the nightly judges it every night (``make nightly``).

Why in the perf suite (mark ``perf``): its figures are rates, which differ run to run (the gate
suite's records are compared exactly, e.g. a sharded run against a whole one), and a case without
a lookahead variant is skipped here, which a phone run of the gate suite, where every check must
pass, cannot take.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai.checks import parity
from pytest_qnn_genai.checks.generation import (
    lookahead_accepted,
    lookahead_gains,
    lookahead_matches_hybrid,
)
from pytest_qnn_genai.pipeline.products import Wants, needs

if TYPE_CHECKING:
    from pytest_qnn_genai.models.case import ModelCase
    from pytest_qnn_genai.pipeline import Pipeline
    from pytest_qnn_genai.plugin.fixtures import Recorder
    from pytest_qnn_genai.runtime.result import RunResult
    from pytest_qnn_genai.targets import Target

pytestmark = pytest.mark.perf
# (case, variant) -> on the x86 simulator: the tokens the runner accepted over the eval prompt's
# generation (exact: greedy decoding of one program, both flows' builds), and a floor under the
# lookahead / hybrid decode-rate share there, the median of PAIRS_ON_THE_SIMULATOR pairs: under
# the lowest median measured where it is judged, the x86-runner target and the loopback phone
# inside a loaded make test (the measurements page, "Lookahead"), so that noise stays above it
# and a lookahead path at half the hybrid's rate does not.
MEASURED = {("stories260k", "lookahead"): (11, 0.5)}
# the share judged on the simulator: the median of this many alternated (lookahead, hybrid) pairs
# (checks/generation.py lookahead_gains says why); a phone's share is info, one pair.
PAIRS_ON_THE_SIMULATOR = 3
MEASURED_SOURCE = "measured on the x86 simulator, suites/perf/test_lookahead.py MEASURED"


def lookahead_variant_names(case: ModelCase) -> tuple[str, ...]:
    """The variants ``case`` declares that build llama.py's lookahead mode."""
    return tuple(n for n in case.variants if case.variant(n).is_lookahead)


def _case_and_lookahead_variants(case: ModelCase) -> list[ModelCase]:
    return [case, *map(case.variant, lookahead_variant_names(case))]


def _decodes_lookahead(target: Target) -> bool:
    return not target.is_emulator


def _lookahead_cases(qnn_case: ModelCase, qnn_target: Target) -> dict[str, ModelCase]:
    """The case's declared lookahead variants, on targets that decode them (else a skip)."""
    if qnn_target.is_emulator:
        pytest.skip(f"{qnn_target.id}: lookahead decoding is upstream's runners' (--eval_mode 2: "
                    "the x86-runner target, a phone); the host runner decodes AR-1")
    names = lookahead_variant_names(qnn_case)
    if not names:
        pytest.skip(f"{qnn_case.name} declares no lookahead variant")
    return {n: qnn_case.variant(n) for n in names}


@pytest.fixture
@needs(Wants("new", where=_decodes_lookahead, cases=_case_and_lookahead_variants))
def new_lookahead_cases(qnn_case, qnn_target) -> dict[str, ModelCase]:
    """:func:`_lookahead_cases`; the staged flow's builds of them and of the case built ahead."""
    return _lookahead_cases(qnn_case, qnn_target)


@pytest.fixture
@needs(Wants("legacy", where=_decodes_lookahead, cases=_case_and_lookahead_variants))
def legacy_lookahead_cases(qnn_case, qnn_target) -> dict[str, ModelCase]:
    """:func:`_lookahead_cases`; llama.py's builds of them and of the case built ahead."""
    return _lookahead_cases(qnn_case, qnn_target)


def _alternated_pairs(lookahead: Callable[[], RunResult], hybrid: Callable[..., RunResult],
                      pairs: int) -> list[tuple[RunResult, RunResult]]:
    """``pairs`` (lookahead run, hybrid run), the order alternating (L H, H L, L H, ...): the first
    lookahead run says how many tokens every hybrid run is asked for."""
    first = lookahead()
    produced = int(first.extra["produced"])
    out = [(first, hybrid(max_new_tokens=produced))]
    for i in range(1, pairs):
        if i % 2:  # hybrid first
            h = hybrid(max_new_tokens=produced)
            la = lookahead()
        else:
            la = lookahead()
            h = hybrid(max_new_tokens=produced)
        out.append((la, h))
    return out


def test_new_lookahead_text_is_the_hybrid_greedy_text(qnn_pipeline, qnn_case, qnn_target,
                                                      new_lookahead_cases, qnn_record) -> None:
    _judge_flow("new", new_lookahead_cases, qnn_pipeline, qnn_case, qnn_target, qnn_record)


@pytest.mark.nightly
def test_legacy_lookahead_text_is_the_hybrid_greedy_text(qnn_pipeline, qnn_case, qnn_target,
                                                         legacy_lookahead_cases,
                                                         qnn_record) -> None:
    _judge_flow("legacy", legacy_lookahead_cases, qnn_pipeline, qnn_case, qnn_target, qnn_record)


def _judge_flow(flow: str, lookahead_cases: dict[str, ModelCase], qnn_pipeline: Pipeline,
                qnn_case: ModelCase, qnn_target: Target, qnn_record: Recorder) -> None:
    """Each lookahead variant's build of ``flow`` against the same flow's hybrid build."""
    simulator = qnn_pipeline.build_target(qnn_target).is_emulator
    failures = []
    for name, variant in lookahead_cases.items():
        pte = qnn_pipeline.artifacts(flow, variant, qnn_target).pte
        hybrid_pte = qnn_pipeline.artifacts(flow, qnn_case, qnn_target).pte
        pairs = _alternated_pairs(
            partial(qnn_pipeline.run_pte, variant, qnn_target, pte),
            partial(qnn_pipeline.run_pte, qnn_case, qnn_target, hybrid_pte),
            PAIRS_ON_THE_SIMULATOR if simulator else 1)
        lookahead, hybrid = pairs[0]
        checks = lookahead_matches_hybrid(lookahead, hybrid)
        checks += [dataclasses.replace(c, name=f"{c.name}_pair{i}", check=f"pair {i}: {c.check}")
                   for i, pair in enumerate(pairs[1:], 2)
                   for c in lookahead_matches_hybrid(*pair) if not c.ok]
        same_text = all(c.ok for c in checks)
        accepted = lookahead_accepted(Path(str(lookahead.extra["run_log"])).read_text(
            errors="replace"))
        min_accepted, share = MEASURED.get((qnn_case.name, name), (1, None))
        checks += lookahead_gains(pairs, accepted, min_accepted,
                                  share if simulator and same_text else None,
                                  MEASURED_SOURCE if (qnn_case.name, name) in MEASURED else
                                  "no measurement for this case: more than none")
        checks = [dataclasses.replace(c, name=f"{flow}_{c.name}", check=f"{flow}: {c.check}")
                  for c in checks]
        qnn_record("perf", checks,
                   values={"lookahead": lookahead.extra["lookahead"], "flow": flow},
                   note=f"{flow} {name}: --eval_mode 2 vs the {flow} hybrid build's --eval_mode 1")
        speed = next(c for c in checks if c.name.endswith("lookahead_decode_speed_ratio"))
        print(f"{qnn_case.name} {qnn_target.id} {flow} {name}: {lookahead.extra['produced']} "
              f"tokens, accepted {accepted}, lookahead {speed.new} tok/s, hybrid {speed.legacy} "
              f"tok/s {speed.detail}".rstrip())
        failures += [f"{name}: {parity.sentence(c)} {c.detail}".rstrip()
                     for c in checks if not c.ok]
    assert not failures, "\n".join(failures)
