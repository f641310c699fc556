"""The perf gate wired up: minimum-work top-ups, the A/B gate on timed rounds catching a slowed
variant (with fakes; the emulator's counted work is held in tests/integration/runtime/test_work.py),
pytest-benchmark in enabled and disabled mode, and the plugin's report (--qnn-report,
--qnn-compare-to, xdist records, one-line usage errors)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.perf.benchmark import (
    EXTRA_INFO,
    Minimum,
    QnnBenchmark,
    measure,
)
from pytest_qnn_genai.perf.gate import ABOutcome, Contender, Interleaved, relative_gate
from pytest_qnn_genai.perf.gate import ab_gate as _ab_gate
from pytest_qnn_genai.report.diff import compare
from pytest_qnn_genai.report.results import Header, Record, ResultsFile
from pytest_qnn_genai.report.write import write_report
from pytest_qnn_genai.runtime.result import PerfStats
from pytest_qnn_genai.targets import Target, soc

ROOT = Path(__file__).resolve().parents[3]
EMU = Target(soc("SM8650"))
ONE_CASE = ("--models", "stories260k")
# the emulator's items only (the x86-runner target's are skipped, or run with --executorch-src)
EMULATOR_ONLY = (*ONE_CASE, "-k", "htp-emulator")
VERSIONS = {"torch": "t", "executorch": "e", "qairt": "q", "pytest-qnn-genai": "p"}


def ab_gate(a: Contender, b: Contender, **kwargs) -> ABOutcome:
    """The gate over whole generations, interleaved (A's round, then B's)."""
    return _ab_gate(Interleaved(a, b), **kwargs)


def _stats(decode: float, prefill: float = 100.0, tokens: int = 16) -> PerfStats:
    return PerfStats(prompt_tokens=32, generated_tokens=tokens, model_load_s=0.1,
                     prefill_tok_s=prefill, decode_tok_s=decode, ttft_s=32 / prefill)


class _Fake:
    """A generation with fixed figures that logs its calls."""

    def __init__(self, name: str, log: list[str], decode: float, tokens: int = 16) -> None:
        self.name, self.log, self.decode, self.tokens = name, log, decode, tokens

    def __call__(self) -> PerfStats:
        self.log.append(self.name)
        return _stats(self.decode, tokens=self.tokens)


def test_ab_gate_interleaves_and_fails_a_slowed_candidate() -> None:
    log: list[str] = []
    out = ab_gate(Contender("ref", _Fake("A", log, 50.0)), Contender("slow", _Fake("B", log, 30.0)),
                  rounds=3, floor=0.9, minimum=Minimum(0, 0.0))
    # warm-up pair, 3 pairs in ABBA order, then 2 more: no 95 % bound exists below 5 pairs
    assert log == ["A", "B"] + ["A", "B", "B", "A"] * 2 + ["A", "B"]
    assert not out.passed and out.verdicts["decode_tok_s"].ratio == pytest.approx(0.6)
    assert out.verdicts["decode_tok_s"].state == "fail"
    assert out.verdicts["prefill_tok_s"].passed
    assert out.failures() == [f"slow vs ref decode_tok_s: {out.verdicts['decode_tok_s']}"]
    same = ab_gate(Contender("ref", _Fake("A", [], 50.0)), Contender("same", _Fake("B", [], 49.0)),
                   rounds=3, floor=0.9, minimum=Minimum(0, 0.0))
    assert same.passed
    assert {f.name: f.value for f in same.figures()}["decode_tok_s_ratio"] == pytest.approx(0.98)


class _Noisy:
    """A generation whose decode rate follows a fixed sequence (a busy machine's rounds)."""

    def __init__(self, rates: list[float]) -> None:
        self.rates = iter(rates)

    def __call__(self) -> PerfStats:
        return _stats(next(self.rates))


def test_noisy_rounds_run_more_pairs_until_the_gate_can_tell() -> None:
    # identical programs on a machine that flips between a fast and a slow state mid-pair
    a = [12.0] + [12.0, 16.5, 12.2, 11.6, 16.8, 12.1, 12.4, 11.9, 12.0, 16.6, 12.3, 12.2] * 2
    b = [12.0] + [13.6, 12.1, 12.0, 16.4, 12.1, 11.9, 12.3, 12.2, 16.7, 11.8, 12.5, 12.0] * 2
    out = ab_gate(Contender("a", _Noisy(a)), Contender("b", _Noisy(b)), rounds=5, floor=0.9,
                  minimum=Minimum(0, 0.0, max_rounds=24))
    decode = out.verdicts["decode_tok_s"]
    assert out.passed and decode.state == "pass" and 5 < decode.rounds < 24, decode
    assert relative_gate([x.decode_tok_s for x in out.a_rounds[:5]],
                         [x.decode_tok_s for x in out.b_rounds[:5]]).state == "inconclusive"
    slow = ab_gate(Contender("a", _Noisy(a)), Contender("b", _Noisy([0.7 * x for x in b])),
                   rounds=5, floor=0.9, minimum=Minimum(0, 0.0, max_rounds=24))
    assert slow.verdicts["decode_tok_s"].state == "fail", slow.verdicts["decode_tok_s"]


def test_a_gate_that_cannot_tell_fails_as_inconclusive_at_the_round_cap() -> None:
    # decode tok/s of identical programs, 15 pairs measured beside a bursty CPU hog on 2 cores
    a = [10.1, 11.3, 6.9, 12.3, 5.4, 10.0, 11.9, 5.0, 6.6, 8.2, 11.3, 11.1, 11.0, 9.9, 7.9]
    b = [8.0, 10.7, 10.1, 9.1, 8.2, 7.2, 7.0, 7.6, 11.0, 7.7, 6.4, 5.6, 5.9, 10.8, 10.3]
    out = ab_gate(Contender("a", _Noisy([10.0, *a])), Contender("b", _Noisy([10.0, *b])),
                  rounds=5, floor=0.9, minimum=Minimum(0, 0.0, max_rounds=15))
    assert not out.passed and len(out.a_rounds) == 15
    rows = {f.name: f for f in out.figures()}
    assert rows["decode_tok_s_ratio"].verdict == "inconclusive"  # the report row says so too
    assert "INCONCLUSIVE" in out.failures()[0] and "--qnn-perf-rounds" in out.failures()[0]


def test_too_little_work_runs_more_rounds_bounded() -> None:
    log: list[str] = []
    out = ab_gate(Contender("a", _Fake("A", log, 50.0, tokens=17)),
                  Contender("b", _Fake("B", log, 50.0, tokens=17)),
                  rounds=5, floor=0.9, minimum=Minimum(tokens=128, seconds=0.0, max_rounds=10))
    assert len(out.a_rounds) == 8 and not out.shortfall and out.passed  # 8 x 16 steps = 128
    capped = measure(_Fake("A", [], 50.0, tokens=16), rounds=2,
                     minimum=Minimum(tokens=1000, seconds=0.0, max_rounds=5))
    assert len(capped.rounds) == 5 and capped.planned == 2
    assert capped.shortfall and "too little work" in capped.shortfall[0]


class _Benchmark:
    """The parts of pytest-benchmark's fixture that QnnBenchmark uses."""

    def __init__(self, disabled: bool) -> None:
        self.disabled, self.extra_info, self.calls = disabled, {}, []

    def pedantic(self, target, rounds, warmup_rounds, iterations):  # noqa: ANN001
        self.calls.append((rounds, warmup_rounds, iterations))
        for _ in range(warmup_rounds + rounds):
            target()


class _Settings:
    perf_rounds, perf_min_tokens, perf_min_seconds = 3, 64, 0.0


@pytest.mark.parametrize("disabled", [False, True], ids=["pytest-benchmark", "own-loop"])
def test_qnn_benchmark_records_medians(disabled: bool) -> None:
    bench, log = _Benchmark(disabled), []
    qb = QnnBenchmark(bench, _Settings(), EMU, lambda pte, workload: _Fake("A", log, 40.0, tokens=17),
                      labels={"soc": "SM8650", "device": "x86-emulator"})
    result = qb()
    assert bench.calls == ([] if disabled else [(3, 1, 1)])
    assert len(log) == 1 + 4 and len(result.rounds) == 4  # warm-up dropped; 4 x 16 decode steps
    assert set(EXTRA_INFO) <= set(bench.extra_info)
    assert bench.extra_info["decode_tok_s"] == 40.0 and bench.extra_info["generated_tokens"] == 17
    assert bench.extra_info["pytest_benchmark_disabled"] is disabled
    assert bench.extra_info["rounds"] == 4 and bench.extra_info["planned_rounds"] == 3


def _results(date: str, decode: float) -> ResultsFile:
    run = ResultsFile(Header(date, ["SM8650"], "htp", [], VERSIONS))
    run.add(Record.for_target("perf", "stories260k", EMU, [
        figures.measured(k, v) for k, v in (("prefill_tok_s", 100.0), ("decode_tok_s", decode),
                                            ("ttft_s", 0.3))]))
    return run


def test_second_report_with_a_slowed_variant_is_a_regression(tmp_path: Path) -> None:
    first = _results("2026-08-14T02:00:00+00:00", 3.2)
    write_report(tmp_path, first, None, 0.10)
    second = _results("2026-08-15T02:00:00+00:00", 1.5)
    folder, written, _ = write_report(tmp_path, second, None, 0.10)
    assert folder == tmp_path / "2026-08-15"
    assert {p.name for p in written} == {"results.json", "summary.md", "summary.html",
                                         "speed.png", "trend.png"}
    diff = {d.figure: d for d in compare(second.perf_figures(), first.perf_figures(), 0.10)}
    assert diff["decode_tok_s"].bucket == "≥2x slower"
    assert diff["prefill_tok_s"].bucket == "within noise"
    summary = (folder / "summary.md").read_text()
    assert "What changed since 2026-08-14" in summary and "≥2x slower" in summary


# -- the emulator's program -------------------------------------------------------------------
@pytest.fixture(scope="module")
def new_pte(qnn_pipeline, qnn_sdk, case) -> Path:
    return qnn_pipeline.pte(case, EMU).pte


# -- the plugin: report, comparison, xdist, usage errors (no emulator work) --------------------
RECORD_TEST = """
import os, pytest
from pytest_qnn_genai import figures

@pytest.mark.perf
def test_figures(qnn_record, qnn_cache, qnn_case, qnn_target):
    mode = os.environ.get("FAKE_PERFORMANCE_MODE", "kHtpBurst")  # a compile option
    qnn_cache.get_or_build("compile", {"spec": {"backend_options": {"performance_mode": mode}}},
                           lambda out: (out / "program.pte").write_bytes(mode.encode()),
                           label="fake SM8650-htp")
    qnn_record("perf", [figures.measured("prefill_tok_s", 100.0),
                        figures.measured("decode_tok_s", float(os.environ["FAKE_DECODE"]))])
"""


@pytest.mark.usefixtures("qnn_env")
def test_report_and_compare_to_through_the_plugin(pytester: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs through the plugin whose artifacts differ in one compile option: the second
    summary opens with that option beside the decode figure that moved."""
    pytester.makepyfile(RECORD_TEST)
    monkeypatch.setenv("FAKE_DECODE", "3.0")
    # (subprocesses: the cache fixture loads the QNN SDK, which one process loads only once)
    first = pytester.runpytest_subprocess("--qnn-report", "out", "-p", "no:cacheprovider",
                                          *EMULATOR_ONLY)
    first.assert_outcomes(passed=1)
    (folder,) = (pytester.path / "out").iterdir()
    assert {p.name for p in folder.iterdir()} >= {"results.json", "summary.md", "summary.html",
                                                  "speed.png", "trend.png"}
    data = json.loads((folder / "results.json").read_text())
    (decode,) = [f for f in data["records"][0]["figures"] if f["name"] == "decode_tok_s"]
    assert (decode["value"], decode["verdict"]) == (3.0, "info")
    (built,) = data["header"]["fingerprint"]["artifacts"]
    assert built["inputs"]["spec"]["backend_options"]["performance_mode"] == "kHtpBurst"
    monkeypatch.setenv("FAKE_DECODE", "1.2")
    monkeypatch.setenv("FAKE_PERFORMANCE_MODE", "kHtpHighPerformance")
    second = pytester.runpytest_subprocess("--qnn-report", "out", "--qnn-compare-to", str(folder),
                                           "-p", "no:cacheprovider", *EMULATOR_ONLY)
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*qnn-genai perf vs*",
                                 "*decode_tok_s | 3 | 1.2 | 0.40x | ≥2x slower |*",
                                 "*qnn-genai report*"])
    (newer,) = [p for p in (pytester.path / "out").iterdir() if p != folder]
    top = (newer / "summary.md").read_text().split("\n## Run\n")[0]
    assert ("| compile fake SM8650-htp · spec.backend_options.performance_mode | kHtpBurst | "
            "kHtpHighPerformance |") in top
    assert "| decode_tok_s | 3 | 1.2 | ≥2x slower | info |" in top


@pytest.mark.usefixtures("qnn_env")
def test_records_come_back_from_xdist_workers(pytester: pytest.Pytester,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(RECORD_TEST)
    monkeypatch.setenv("FAKE_DECODE", "2.0")
    result = pytester.runpytest_subprocess("-n", "2", "--soc", "SM8650", "--soc", "SM8750",
                                           "--qnn-report", "out", "-p", "no:cacheprovider",
                                           *EMULATOR_ONLY)
    result.assert_outcomes(passed=2)
    (folder,) = (pytester.path / "out").iterdir()
    data = json.loads((folder / "results.json").read_text())
    assert sorted(r["target"] for r in data["records"]) == ["SM8650-htp-emulator",
                                                            "SM8750-htp-emulator"]
    # the cache entries the workers used are in the controller's fingerprint
    assert [a["label"] for a in data["header"]["fingerprint"]["artifacts"]] == ["fake SM8650-htp"]


@pytest.mark.usefixtures("qnn_env")
@pytest.mark.parametrize("args,first_words", [
    (["--qnn-perf-rounds", "zero"], "ERROR: --qnn-perf-rounds: expected an integer"),
    (["--qnn-perf-ratio-floor", "-1"], "ERROR: --qnn-perf-ratio-floor: '-1' is outside"),
    (["--qnn-compare-to", "missing.json"], "ERROR: --qnn-compare-to: "),
    (["--qnn-golden-dir", "bad"], "ERROR: "),
])
def test_bad_perf_inputs_are_one_usage_error_line(pytester: pytest.Pytester, args: list[str],
                                                  first_words: str) -> None:
    pytester.makepyfile(RECORD_TEST)
    (pytester.path / "bad" / "perf").mkdir(parents=True)
    (pytester.path / "bad" / "perf" / "stories260k.json").write_text('{"model": "stories260k"}')
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(first_words), errors
    if "bad" in args:
        assert "stories260k.json" in errors[0] and "missing key 'workload'" in errors[0]


# -- end to end: the perf suite itself, on the session's cached .pte files ---------------------
def _perf_suite(pytester: pytest.Pytester, cache_dir: Path, *args: str,
                keyword: str = "htp-emulator") -> pytest.RunResult:
    """The real perf suite (one round, no minimum work: cheap) on the session's cache, its items
    on the emulator target only (``-k``: upstream's x86 runners are a target too when
    ``QNN_GENAI_EXECUTORCH_SRC`` is set, as in ``make test``)."""
    pytester.makepyfile(test_perf=(ROOT / "suites" / "perf" / "test_perf.py").read_text())
    return pytester.runpytest_subprocess(
        "-m", "perf", "-k", keyword, "--qnn-cache-dir", str(cache_dir), *ONE_CASE,
        "--qnn-perf-rounds", "1", "--qnn-perf-min-tokens", "0", "--qnn-perf-min-seconds", "0",
        "-p", "no:cacheprovider", "-rs", "-s", *args, timeout=1500)


def test_perf_suite_end_to_end(pytester: pytest.Pytester, qnn_settings, legacy, new_pte) -> None:
    """``pytest -m perf --qnn-report out``: the benchmark, the legacy:new gate (one program on
    both sides: passed by identity, not counted; a pair that differs is counted,
    ``test_qnn_ab_runs_a_declared_variant_pair``) and its accuracy deltas (B held to A's), the
    phone floors skipped on the emulator."""
    result = _perf_suite(pytester, qnn_settings.cache_dir, "--qnn-report", "out",
                         "--qnn-perf-ratio-floor", "0.01",
                         keyword="htp-emulator and not accepted_build")  # no golden dir here
    result.assert_outcomes(passed=3, skipped=1)  # the phone floors
    (folder,) = (pytester.path / "out").iterdir()
    records = json.loads((folder / "results.json").read_text())["records"]
    tests = sorted(r["test"].split("::")[-1].split("[")[0] for r in records)
    assert tests == ["test_ab_accuracy_deltas", "test_emulator_benchmark", "test_relative_gate"]
    verdicts = {r["test"].split("::")[-1].split("[")[0]: {f["name"]: (f["verdict"], f["judge"])
                                                          for f in r["figures"]}
                for r in records}
    bench = verdicts["test_emulator_benchmark"]  # the emulator's speed: judged by nothing
    assert bench["decode_tok_s"] == bench["prefill_tok_s"] == ("info", "")
    gate = verdicts["test_relative_gate"]  # stories260k's two flows build one program: not timed
    assert gate == {"program_new_vs_legacy": (
        "pass", "program sha256 = legacy's (new builds it byte for byte, build stamps aside)")}
    accuracy = verdicts["test_ab_accuracy_deltas"]  # B held to A's, within the measured bounds
    assert accuracy["ab_new_vs_legacy_sqnr_vs_fp32_db"] == (
        "pass", "B − A ≥ −0.3 dB (the measured A/B pairs (docs: measurements, 'The A/B gate'))")
    assert {v for v, _ in accuracy.values()} == {"pass"}
    assert len(list(folder.glob("*.png"))) == 2


def test_qnn_ab_runs_a_declared_variant_pair(pytester: pytest.Pytester, qnn_settings,
                                             new_pte) -> None:
    """``--qnn-ab kv16:new``: stories260k's committed pair (16-bit KV cache IO vs the case's
    8-bit) built, its work counted and gated, and its accuracy reported. The variant's build is
    the one ``tests/integration/stages/test_kv_variant.py`` holds to its program (one build for
    both: ``ar8:new``, the nightly's other pair, is a build of its own). The 8-bit side runs
    fewer instructions (measured A/B 1.180 per prompt pass, 1.028 per decode step) and keeps
    less of the fp32 model than the 16-bit side, a deterministic difference on the emulator
    (measured 19.42 against 19.51 dB): the pair really differs. An unknown variant is one usage
    line."""
    result = _perf_suite(pytester, qnn_settings.cache_dir, "--qnn-ab", "kv16:new",
                         "--qnn-report", "out",
                         keyword="htp-emulator and (relative_gate or accuracy)")
    result.assert_outcomes(passed=2)
    (folder,) = (pytester.path / "out").iterdir()
    records = json.loads((folder / "results.json").read_text())["records"]
    (gate,) = [r for r in records if r["test"].split("::")[-1].startswith("test_relative_gate")]
    assert gate["test"].endswith("test_relative_gate[stories260k-SM8650-htp-emulator-new-vs-kv16]")
    rows = {f["name"]: f for f in gate["figures"]}
    assert rows.keys() == {"prefill_work_ratio", "decode_work_ratio"}
    for row in rows.values():  # counted, not timed: B (8-bit KV) runs fewer instructions
        assert row["verdict"] == "pass" and row["value"] > 1.0, row
        assert row["context"]["new"] < row["context"]["kv16"], row
    (accuracy,) = [r for r in records
                   if r["test"].split("::")[-1].startswith("test_ab_accuracy_deltas")]
    kept = {f["name"]: f for f in accuracy["figures"]}
    assert kept.keys() >= {"ab_new_vs_kv16_sqnr_vs_fp32_db",
                           "ab_new_vs_kv16_greedy_agreement_vs_fp32"}
    sqnr = kept["ab_new_vs_kv16_sqnr_vs_fp32_db"]
    assert sqnr["verdict"] == "pass", sqnr  # B (8-bit KV) keeps less than A (16-bit KV)
    assert sqnr["value"] < sqnr["reference"] and -0.3 <= sqnr["context"]["delta"] < 0, sqnr
    assert "A/B kv16 vs new: logits SQNR vs fp32 dB" in result.stdout.str()
    bad = _perf_suite(pytester, qnn_settings.cache_dir, "--qnn-ab", "ar8:ar9")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    variants = ", ".join(dict.fromkeys(n for c in registry.available().values()
                                       for n in c.variant_names))
    assert [x for x in bad.errlines if x.strip()] == [
        f"ERROR: --qnn-ab: no model case has a variant 'ar9'; variants: {variants}"]
