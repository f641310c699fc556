"""Lookahead decoding: llama.py's ``--model_mode lookahead`` build, run as upstream runs it.

A case declares a lookahead variant (``"model_mode": "lookahead"`` with ``window``, ``ngram``,
``gcap``; stories260k's ``lookahead``); each flow builds it (llama.py with ``--model_mode
lookahead --window --ngram --gcap``, the staged flow with the same decode graph of
next_power_of_two((window + gcap) * (ngram - 1)) tokens), and upstream's ``qnn_llama_runner``
decodes it with ``--eval_mode 2`` and the build's flags. Lookahead decoding accepts only greedy
tokens (``runner/lhd_token_generator.cpp``), so its text must be the text the same flow's hybrid
build generates greedily (``--eval_mode 1``) for the same prompt and as many tokens: a step may
accept up to ``ngram`` tokens, so the lookahead run goes first and the hybrid run is asked for
the tokens it produced. Its decode tok/s and the hybrid run's are reported (``info``: on the x86
simulator a decode step of 16 tokens costs more than one of 1, so the figure says nothing about
a phone), and only for the same text: a rate of other work would compare nothing. Upstream's
runners only: the host runner decodes AR-1.

Why in the perf suite (mark ``perf``): its figures are rates, which differ run to run (the gate
suite's records are compared exactly, e.g. a sharded run against a whole one), and a case without
a lookahead variant is skipped here, which a phone run of the gate suite, where every check must
pass, cannot take.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai import figures as judged
from pytest_qnn_genai.checks.generation import lookahead_matches_hybrid
from pytest_qnn_genai.pipeline.products import Wants, needs

if TYPE_CHECKING:
    from pytest_qnn_genai.models.case import ModelCase
    from pytest_qnn_genai.targets import Target

pytestmark = pytest.mark.perf
FLOWS = ("legacy", "new")  # llama.py's lookahead build, the staged flow's


def lookahead_variant_names(case: ModelCase) -> tuple[str, ...]:
    """The variants ``case`` declares that build llama.py's lookahead mode."""
    return tuple(n for n in case.variants if case.variant(n).is_lookahead)


def _case_and_lookahead_variants(case: ModelCase) -> list[ModelCase]:
    return [case, *map(case.variant, lookahead_variant_names(case))]


def _decodes_lookahead(target: Target) -> bool:
    return not target.is_emulator


@pytest.fixture
@needs(*(Wants(flow, where=_decodes_lookahead, cases=_case_and_lookahead_variants)
         for flow in FLOWS))
def lookahead_cases(qnn_case, qnn_target) -> dict[str, ModelCase]:
    """The case's declared lookahead variants, on targets that decode them; each flow's build
    of them and of the case is built ahead."""
    if qnn_target.is_emulator:
        pytest.skip(f"{qnn_target.id}: lookahead decoding is upstream's runners' (--eval_mode 2: "
                    "the x86-runner target, a phone); the host runner decodes AR-1")
    names = lookahead_variant_names(qnn_case)
    if not names:
        pytest.skip(f"{qnn_case.name} declares no lookahead variant")
    return {n: qnn_case.variant(n) for n in names}


def test_lookahead_text_is_the_hybrid_greedy_text(qnn_pipeline, qnn_case, qnn_target,
                                                  lookahead_cases, qnn_record) -> None:
    failures = []
    for flow, (name, variant) in ((f, v) for v in lookahead_cases.items() for f in FLOWS):
        pte = qnn_pipeline.artifacts(flow, variant, qnn_target).pte
        lookahead = qnn_pipeline.run_pte(variant, qnn_target, pte)
        hybrid_pte = qnn_pipeline.artifacts(flow, qnn_case, qnn_target).pte
        hybrid = qnn_pipeline.run_pte(qnn_case, qnn_target, hybrid_pte,
                                      max_new_tokens=lookahead.extra["produced"])
        checks = [dataclasses.replace(c, name=f"{flow}_{c.name}", check=f"{flow}: {c.check}")
                  for c in lookahead_matches_hybrid(lookahead, hybrid)]
        speeds = [judged.measured(f"{flow}_{side}_decode_tok_s", run.perf.decode_tok_s)
                  for side, run in (("lookahead", lookahead), ("hybrid", hybrid))]
        qnn_record("perf", [*checks, *speeds],
                   values={"lookahead": lookahead.extra["lookahead"], "flow": flow},
                   note=f"{flow} {name}: --eval_mode 2 vs the {flow} hybrid build's --eval_mode 1")
        print(f"{qnn_case.name} {qnn_target.id} {flow} {name}: {lookahead.extra['produced']} "
              f"tokens, lookahead {lookahead.perf.decode_tok_s:.2f} tok/s, hybrid "
              f"{hybrid.perf.decode_tok_s:.2f} tok/s")
        failures += [f"{name}: {c.check}: {c.detail or (c.legacy, c.new)}"
                     for c in checks if not c.ok]
    assert not failures, "\n".join(failures)
