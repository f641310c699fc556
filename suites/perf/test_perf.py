"""The performance gate: absolute floors on phones, same-session relative gates on the emulator.

A phone runs the workload the committed golden floors were measured on (``golden/perf/<model>.json``:
its prompt and runner ``--seq_len``, for a case built as the file's ``build`` says; upstream's
stories260k floor is prompt "Once", seq_len 128) and its figures (prefill, decode, and the
runner's own ``inference_speed.txt``) must reach the SoC's floors within ``--qnn-perf-noise``. A
round that ran another workload, or whose inference_speed.txt disagrees with its observer line,
fails the test (:mod:`pytest_qnn_genai.perf.phone`); a SoC without floors is skipped, never
passed. ``--qnn-update-golden`` rewrites the SoC's floors as the measured medians (a later run
within noise passes; the test reports *updated*, judging nothing). A device that runs the x86
HTP simulator (the loopback phone) runs the same workload and reports its figures as ``info``:
its speed is the simulator's, never a phone's, so no floor judges it and no update writes one
(:func:`pytest_qnn_genai.perf.phone.simulated`). The x86 emulator's speed says nothing about a
phone, so there the gate is relative, on counted work: each side's instructions per prompt pass
and per decode step on one workload, counted once per program by callgrind and kept under the
program's digest (:mod:`pytest_qnn_genai.perf.work`); B may run no more than A, exactly, and a
failure names the kernels whose work grew. Two sides that are one program (stamp-free sha256
equal: ``legacy:new`` where the flows agree byte for byte) pass by identity, not counted. A pair
with a lookahead build, which only upstream's runner decodes, is gated on upstream's runners
instead (the x86-runner target or a phone): whole generations, A's next to B's
(:class:`~pytest_qnn_genai.perf.gate.Interleaved`), each side run as its build says
(``--eval_mode 2`` with its window, ngram and gcap for a lookahead build); their round ratios of
the prefill and decode rates must stay at or above ``--qnn-perf-ratio-floor`` with 95 %
confidence (more pairs are run while the rounds cannot tell; still undecided at the cap is a
failure that says so, never a pass: :mod:`pytest_qnn_genai.perf.gate`), each figure resting on
the minimum work (``--qnn-perf-min-tokens``/``--qnn-perf-min-seconds``, pooled over rounds).
Every figure goes into the run's records (``--qnn-report``).

Across commits (every run, emulator): today's build is held to the program of the last accepted
measurement (``golden/accepted/<case>.json`` names its cache entry) on counted work, exactly: any
other count is a change of the program, more work fails naming the kernels that grew, less fails
until accepted (:mod:`pytest_qnn_genai.perf.accepted`).
"""
from __future__ import annotations

from datetime import date
from functools import partial

import pytest

from pytest_qnn_genai import figures as judged
from pytest_qnn_genai import progress
from pytest_qnn_genai.checks import agreement, numerics, parity
from pytest_qnn_genai.golden.perf import GoldenPerf, GoldenWorkload, update_golden
from pytest_qnn_genai.models.case import FLOW_VARIANTS
from pytest_qnn_genai.perf import accepted as accepted_speed
from pytest_qnn_genai.perf import work
from pytest_qnn_genai.perf.benchmark import (
    Minimum,
    Workload,
    runner_workload,
)
from pytest_qnn_genai.perf.gate import Contender, Interleaved, ab_gate
from pytest_qnn_genai.perf.minimum import shortfall_figures
from pytest_qnn_genai.perf.phone import (
    phone_generation,
    phone_minimum,
    round_problem_figures,
    round_problems,
    simulated,
    simulator_figures,
)
from pytest_qnn_genai.runtime.work import WorkError
from pytest_qnn_genai.sdk.context_binary import program_sha256

pytestmark = pytest.mark.perf

# what --qnn-update-golden writes for a SoC without floors (upstream's stories260k floors)
UPDATED_FIGURES = ("decode_tok_s", "inference_speed_tok_s")


def _context(values: dict) -> dict:
    """A benchmark's unjudged context: the rounds and the work behind the figures."""
    return {k: v for k, v in values.items() if k == "rounds" or "_work_" in k}


def _unjudged(figures: dict, judged_names=()) -> list:
    """A phone's figures no floor judged: ``info``."""
    return [judged.info(k, v, better=judged.direction(k)) for k, v in figures.items()
            if k not in judged_names]


@pytest.mark.device
def test_phone_meets_golden_floors(qnn_benchmark, qnn_pipeline, qnn_case, qnn_target,
                                   qnn_settings, qnn_golden_perf, qnn_record) -> None:
    soc, backend = qnn_target.soc.name, qnn_target.backend
    path = qnn_settings.golden_dir / "perf" / f"{qnn_case.name}.json"
    golden = qnn_golden_perf.get(qnn_case.name)
    if simulated(qnn_pipeline.build_target, qnn_target):
        _simulator_benchmark(qnn_benchmark, qnn_pipeline, qnn_case, qnn_target, qnn_settings,
                             golden.workload if golden else GoldenWorkload.from_case(qnn_case),
                             qnn_record)
        return
    updating = qnn_settings.update_golden
    gated = golden.gated(soc, backend) if golden else ()
    if updating:  # the figures to (re)write; a short prompt's prefill rarely meets the minimum
        gated = gated or UPDATED_FIGURES
    if not gated:  # skipped, never passed: a phone without floors proves nothing
        pytest.skip(f"no golden floor for {qnn_case.name} {soc}/{backend} in {path}: nothing "
                    "to gate (--qnn-update-golden writes one from this phone)")
    workload = golden.workload if golden else GoldenWorkload.from_case(qnn_case)
    mismatched = workload.judge_build(qnn_case, str(path))
    if mismatched:  # the floors say nothing about this build: measuring would compare nothing
        qnn_record("perf", mismatched)
        pytest.fail("\n".join(str(f.value) for f in mismatched), pytrace=False)
    run = partial(qnn_pipeline.run, qnn_case, qnn_target)
    result = qnn_benchmark(phone_generation(run, qnn_case.path("tokenizer_model"), workload),
                           minimum=phone_minimum(qnn_settings, gated))
    figures = result.figures()
    failures = result.shortfall + round_problems(result.rounds)
    if updating and not failures:  # never floors from rounds that ran another workload
        floors = {f: round(figures[f], 1) for f in gated}
        golden = (golden or GoldenPerf(qnn_case.name, workload)).with_floors(
            soc, backend, floors, f"measured on {qnn_target.device} {date.today().isoformat()} "
            f"(--qnn-update-golden): medians of {len(result.rounds)} rounds of the workload")
        made = update_golden(path, golden, allow_write=True)
        progress.stderr_writer(made.diff or f"{path}: unchanged")
        print(made.diff or f"{path}: unchanged")
        if made.changed:  # written, not judged: the plugin reports it "updated"
            where = f"golden/perf/{path.name}"
            qnn_record("perf", [*(judged.updated(judged.info(f, v), where)
                                  for f, v in floors.items()),
                                *_unjudged(figures, set(floors))],
                       values=_context(result.values()),
                       note=f"workload {workload.prompt!r} --seq_len {workload.seq_len}")
            return
    floored = golden.judge(soc, backend, figures, qnn_settings.perf_noise) if golden else []
    if golden is not None:
        failures += golden.check(soc, backend, figures, qnn_settings.perf_noise)
    qnn_record("perf", [*floored, *_unjudged(figures, {f.name for f in floored}),
                        *shortfall_figures(result.shortfall),
                        *round_problem_figures(result.rounds)],
               values=_context(result.values()),
               note=f"workload {workload.prompt!r} --seq_len {workload.seq_len}")
    assert not failures, "\n".join(failures)


def _simulator_benchmark(benchmark, pipeline, case, target, settings, workload, record) -> None:
    """The floors' workload on a device that runs the x86 simulator: every figure ``info``
    (failed only when it is no measurement), rounds that ran another workload still fail, and
    ``--qnn-update-golden`` writes nothing (a simulator's speed is no phone's floor)."""
    run = partial(pipeline.run, case, target)
    result = benchmark(phone_generation(run, case.path("tokenizer_model"), workload),
                       minimum=phone_minimum(settings, ()))
    figures = simulator_figures(result.figures())
    record("perf", [*figures, *round_problem_figures(result.rounds)],
           values=_context(result.values()),
           note=f"{target.device} runs the x86 HTP simulator: informational figures, no phone "
                f"floor; workload {workload.prompt!r} --seq_len {workload.seq_len}")
    if settings.update_golden:
        print(f"{target.id}: no floors written: the device runs the x86 HTP simulator")
    failures = round_problems(result.rounds) + [str(f) for f in figures if f.failed]
    assert not failures, "\n".join(failures)


@pytest.mark.emulator
def test_emulator_benchmark(qnn_benchmark, qnn_record) -> None:
    """The new flow's figures on the emulator (recorded and reported as ``info``, never gated on
    speed: the emulator's speed says nothing about a phone's floor)."""
    result = qnn_benchmark()
    figures = [judged.measured(k, v) for k, v in result.figures().items()]  # info unless <= 0
    qnn_record("perf", [*figures, *shortfall_figures(result.shortfall)],
               values=_context(result.values()),
               note="x86 emulator: informational figures, no floor")
    failures = list(result.shortfall) + [str(f) for f in figures if f.failed]
    assert not failures, "\n".join(failures)


def _variants(case, a: str, b: str) -> None:
    missing = [n for n in (a, b) if n not in case.variant_names]
    if missing:  # skipped, never passed: this case has nothing to compare
        pytest.skip(f"{case.name} declares no variant {', '.join(missing)} "
                    f"(its variants: {', '.join(case.variant_names)})")


def _build(case, name: str):
    """The case as A/B side ``name`` builds it (``legacy`` and ``new``: the case itself)."""
    return case if name in FLOW_VARIANTS else case.variant(name)


def _lookahead_sides(case, a: str, b: str) -> list[str]:
    return [n for n in (a, b) if _build(case, n).is_lookahead]


def _same_program(name: str, reference: str, how: str) -> judged.Figure:
    """The speed verdict of a program that is its reference byte for byte: passed by identity."""
    return judged.Figure(name, reference, judged.PASS, how, judged.EQUAL)


def _runner_pairing(pipeline, case, target, a: str, b: str) -> Interleaved:
    """Whole generations of A and B through upstream's runner, each as its build says."""
    workload = Workload.for_case(case)
    builds = {n: _build(case, n) for n in (a, b)}
    ids = runner_workload(workload, case.path("tokenizer_model"), list(builds.values()))

    def contender(name: str) -> Contender:
        pte = pipeline.variant_pte(case, name, target)
        return Contender(name, lambda: pipeline.run_pte(
            builds[name], target, pte, workload.prompt, workload.max_new_tokens,
            prompt_ids=ids).perf)

    return Interleaved(contender(a), contender(b))


def test_relative_gate(qnn_ab_pair, qnn_pipeline, qnn_sdk, qnn_case, qnn_target, qnn_settings,
                       qnn_record) -> None:
    """``--qnn-ab A:B`` (default legacy:new): B keeps the floor of A's prefill and decode speed.
    On the emulator by counted work (one program on both sides: by identity); a pair with a
    lookahead side by whole generations on upstream's runners."""
    a, b = qnn_ab_pair
    lookahead = _lookahead_sides(qnn_case, a, b) if {a, b} <= set(qnn_case.variant_names) else []
    if qnn_target.is_emulator and lookahead:
        pytest.skip(f"{qnn_target.id}: {', '.join(lookahead)} is a lookahead build, decoded only "
                    "by upstream's runner: the pair is gated on the x86-runner target")
    if not qnn_target.is_emulator and not lookahead:
        pytest.skip(f"{qnn_target.id}: runs only on the x86 emulator in this process (its "
                    "counted work; a pair with a lookahead side runs here)")
    _variants(qnn_case, a, b)
    floor = qnn_settings.perf_ratio_floor
    if lookahead:
        outcome = ab_gate(_runner_pairing(qnn_pipeline, qnn_case, qnn_target, a, b),
                          rounds=qnn_settings.perf_rounds, floor=floor,
                          minimum=Minimum.from_settings(qnn_settings))
        qnn_record("perf", outcome.figures(), values={"rounds": len(outcome.a_rounds)},
                   note=f"A/B {b} vs {a}, whole generations on upstream's runner, floor {floor:g}")
        print(f"{qnn_case.name} {qnn_target.id} {b} vs {a}: " + "; ".join(
            f"{fig} {v}" for fig, v in outcome.verdicts.items()))
        failures = outcome.shortfall + outcome.failures()
        assert not failures, "\n".join(failures)
        return
    a_pte, b_pte = (qnn_pipeline.variant_pte(qnn_case, n, qnn_target) for n in (a, b))
    if program_sha256(a_pte) == program_sha256(b_pte):
        # one program, one host runner: the same work call for call, so B's speed is A's
        # exactly; timing it against itself could only judge the machine's noise
        qnn_record("perf", [_same_program(f"program_{b}_vs_{a}", f"{a}'s program",
                                          f"program sha256 = {a}'s ({b} builds it byte for "
                                          "byte, build stamps aside)")],
                   note=f"A/B {b} vs {a}: one program, not counted")
        print(f"{qnn_case.name} {qnn_target.id} {b} vs {a}: one program (sha256 equal)")
        return
    _counted_work_gate(qnn_pipeline, qnn_case, qnn_target, (a, a_pte), (b, b_pte), qnn_record,
                       note=f"A/B {b} vs {a}: counted work (callgrind), B runs no more than A")


@pytest.mark.emulator
def test_speed_against_the_accepted_build(qnn_pipeline, qnn_sdk, qnn_case, qnn_target,
                                          qnn_settings, qnn_accepted, qnn_record) -> None:
    """Today's build against the program of the last accepted measurement
    (``golden/accepted/<case>.json``, found by its cache entry locally or in the remote cache),
    on counted work: today's instructions per prompt pass and per decode step must be the accepted
    program's exactly (more fails naming the kernels that grew; fewer fails until accepted).
    Today's program with the accepted one's sha256 (build stamps aside) is that program: passed
    by identity, on any machine, not counted."""
    if qnn_settings.update_golden:  # suites/gate may be rewriting the program in this run
        pytest.skip("--qnn-update-golden: the accepted program is being rewritten; today's "
                    "build is not judged against it in this run")
    accepted = qnn_accepted.program()
    today = qnn_pipeline.pte_entry(qnn_case, qnn_target)
    same = (accepted.program.sha256 == program_sha256(qnn_pipeline.pte(qnn_case, qnn_target).pte)
            if accepted.program.sha256 else today.digest == accepted.program.digest)
    if same:
        # today's program is the accepted one byte for byte (its build stamp aside): the same
        # work, nothing to count; a fresh machine's rebuild of an unchanged tree lands here
        qnn_record("perf", [_same_program(
            "program_vs_accepted", "the accepted program",
            f"program sha256 = the accepted program's ({accepted.program.stage}/"
            f"{accepted.program.key}, {accepted.provenance.short})")],
                   note="today's build is the accepted program: not measured")
        return
    try:
        accepted_pte = accepted_speed.accepted_pte(qnn_pipeline.cache, accepted)
    except accepted_speed.AcceptedProgramMissing as e:
        pytest.fail(f"{qnn_accepted.source} [{qnn_accepted.key}]: {e}", pytrace=False)
    today_pte = qnn_pipeline.pte(qnn_case, qnn_target).pte
    _counted_work_gate(qnn_pipeline, qnn_case, qnn_target, (accepted_speed.ACCEPTED, accepted_pte),
                       (accepted_speed.TODAY, today_pte), qnn_record, exact=True,
                       note=f"today's build vs the accepted program ({qnn_accepted.source}, "
                            f"{accepted.provenance.short}): counted work (callgrind), exact")


def _counted_work_gate(pipeline, case, target, a_side, b_side, record, note: str,
                       exact: bool = False) -> None:
    """B's counted work against A's on one workload (:mod:`pytest_qnn_genai.perf.work`): one
    count per program, kept under its digest, so never inconclusive."""
    (a, a_pte), (b, b_pte) = a_side, b_side
    ids, steps = work.workload(case, [a_pte, b_pte])
    try:
        counted = {n: pipeline.program_work(case, target, pte, ids, steps)
                   for n, pte in (a_side, b_side)}
    except WorkError as e:
        pytest.fail(str(e), pytrace=False)
    verdicts = work.judge(a, counted[a], b, counted[b], exact=exact)
    record("perf", [v.row() for v in verdicts],
           values={"prompt_tokens": len(ids), "decode_steps": steps}, note=note)
    print(f"{case.name} {target.id} " + "; ".join(str(v) for v in verdicts))
    assert all(v.passed for v in verdicts), "\n".join(str(v) for v in verdicts if not v.passed)


# B may keep this much less of the fp32 model than A on the eval prompt. The pairs measure B - A
# = 0 where both compute the same quantised graph (legacy:new, ar8:new) and -0.09 / -0.17 dB
# for an 8-bit KV cache against a 16-bit one (kv16:new, stories260k / llama3_2_toy), greedy
# agreement equal in every pair (the measurements page): the SQNR bound sits above the largest
# measured loss, the agreement bound at the measurement.
AB_MAX_SQNR_LOSS_DB = 0.3
AB_MAX_AGREEMENT_LOSS = 0.0
AB_BOUND_SOURCE = "the measured A/B pairs (docs: measurements, 'The A/B gate')"


@pytest.mark.emulator
def test_ab_accuracy_deltas(qnn_ab_pair, qnn_pipeline, qnn_sdk, qnn_case, qnn_target,
                            qnn_parity, qnn_record) -> None:
    """How much of the fp32 model each side of the A/B pair keeps on the eval prompt (logits SQNR
    against fp32 teacher-forced on the side's own tokens, greedy agreement with fp32), B held to
    A's within the measured bounds above (``checks.agreement.ab_accuracy``)."""
    a, b = qnn_ab_pair
    _variants(qnn_case, a, b)
    lookahead = _lookahead_sides(qnn_case, a, b)
    if lookahead:  # teacher-forced logits need the host runner, which decodes AR-1 only
        pytest.skip(f"{', '.join(lookahead)} is a lookahead build: its text is held to the hybrid "
                    "build's greedy text (suites/perf/test_lookahead.py), no logits are dumped")
    prepared = qnn_pipeline.prepared(qnn_case)
    kept = {}
    for name in (a, b):
        run = qnn_pipeline.run_pte(qnn_case, qnn_target,  # its outputs, not its speed
                                   qnn_pipeline.variant_pte(qnn_case, name, qnn_target),
                                   judged=True)
        kept[name] = numerics.accuracy_vs_reference(run, prepared.reference_logits)
    checks = agreement.ab_accuracy(a, b, kept[a], kept[b], AB_MAX_SQNR_LOSS_DB,
                                   AB_MAX_AGREEMENT_LOSS, AB_BOUND_SOURCE)
    qnn_parity.add(checks, prefix=f"[{qnn_case.name} {qnn_target.id}] ")
    qnn_record("perf", checks, values={f"{n}_steps": f["steps"] for n, f in kept.items()},
               note=f"A/B {b} vs {a}: accuracy against fp32, B held to A's")
    assert all(c.ok for c in checks), parity.failures(checks)
