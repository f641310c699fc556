"""The phone perf gate end to end without a phone: ``suites/perf`` with ``--device`` against the
loopback adb server (the real adb client), whose phone runs a fault injector: the
qnn_llama_runner stand-in (upstream's runner rules, a model-free toy backend that charges a
simulated 100 ms per decode call and 500 ms for the prompt's one prefill call), pushed with the
emulator SDK's real x86 QNN libraries. ``QNN_GENAI_STANDIN_TIME_SCALE`` scales
every time the runner reports, so one stand-in is a phone above upstream's 1600 tok/s floor, one
below it, one within ``--qnn-perf-noise`` of it; the floors are the committed
``golden/perf/stories260k.json``.

The loopback phone runs x86_64 code, so the plugin takes it for what it is, a device that runs
the x86 HTP simulator, whose speed is ``info``: the floor tests declare the stand-in a phone
(a conftest makes ``perf.phone.simulated`` say no, nothing else), and one test runs it as the
simulator it is, whose figures no floor judges."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.support.adb_server import LoopbackAdbServer
from tests.support.fake_device import FakeDevice, loopback_props
from tests.support.llama_runner_standin import write_launcher

pytest_plugins = ["tests.support.adb_fixtures"]

ROOT = Path(__file__).resolve().parents[3]
SERIAL = f"QNNPERF{os.getpid()}"  # unique per process: the plugin locks phones by serial
TOY_ENV, TIME_SCALE_ENV = "QNN_GENAI_STANDIN_TOY", "QNN_GENAI_STANDIN_TIME_SCALE"
KV_CALL_S = 0.1  # simulated, never slept: the reported decode rate is 1 / (KV_CALL_S x scale)
TOY = {"context_len": 128, "prefill_ar": 32, "kv_call_s": KV_CALL_S, "prefill_call_s": 0.5}


# the stand-in reports a phone's speeds: judge it as the phone it plays, not as the simulator its
# x86_64 ABI says it is (the builds stay the emulator's)
PLAYS_A_PHONE = """
from pytest_qnn_genai.perf import phone
phone.simulated = lambda build_target, target: False
"""


def _scale(tok_s: float) -> str:
    """The time scale at which the stand-in reports ``tok_s`` decode steps a second."""
    return repr(1 / (KV_CALL_S * tok_s))


@pytest.fixture
def phone(adb_server: LoopbackAdbServer) -> FakeDevice:
    return adb_server.add_device(SERIAL, loopback_props("SM8650"))


@pytest.fixture
def run_perf(pytester: pytest.Pytester, phone: FakeDevice, adb_server: LoopbackAdbServer,
             adb_client: str, emulator_sdk_root: Path, qnn_settings, tmp_path: Path):
    """``run_perf(tok_s, *args)``: the perf suite on the loopback phone reporting ``tok_s``."""
    pytester.makepyfile(test_perf=(ROOT / "suites" / "perf" / "test_perf.py").read_text())

    def run(tok_s: float, *args: str, as_phone: bool = True,
            ) -> tuple[pytest.RunResult, list[dict], Path]:
        pytester.makeconftest(PLAYS_A_PHONE if as_phone else "")
        folder = tmp_path / f"runner-{tok_s:g}"
        folder.mkdir(exist_ok=True)
        runner = write_launcher(folder / "qnn_llama_runner",
                                env={TOY_ENV: json.dumps(TOY), TIME_SCALE_ENV: _scale(tok_s)})
        report = tmp_path / f"report-{tok_s:g}-{len(args)}"
        result = pytester.runpytest_subprocess(
            "-m", "perf", "-p", "no:cacheprovider", "-rs", "--device", SERIAL,
            "--models", "stories260k",  # the case golden/perf has floors for
            "--adb-host", f"127.0.0.1:{adb_server.port}", "--adb-path", adb_client,
            "--runner", str(runner), "--qnn-device-libs", str(emulator_sdk_root),
            "--qnn-cache-dir", str(qnn_settings.cache_dir),
            "--qnn-golden-dir", str(ROOT / "golden"), "--qnn-report", str(report),
            "--qnn-perf-rounds", "2", "--qnn-perf-min-tokens", "0",
            "--qnn-perf-min-seconds", "0", *args, timeout=900)
        (folder,) = report.iterdir()
        return result, json.loads((folder / "results.json").read_text())["records"], folder
    return run


def _runner_seq_lens(phone: FakeDevice) -> list[str]:
    return [m for c in phone.shell_commands if "./qnn_llama_runner " in c
            for m in re.findall(r"--seq_len (\d+)", c)]


def _figures(record: dict) -> dict[str, dict]:
    return {f["name"]: f for f in record["figures"]}


def test_a_phone_above_the_floor_passes_on_upstreams_workload(run_perf, phone) -> None:
    result, [record], _ = run_perf(3200.0)
    result.assert_outcomes(passed=1, skipped=4)  # the emulator's 4 perf tests skip on a phone
    assert record["target"] == f"SM8650-htp-{SERIAL}"
    figures = _figures(record)
    decode, speed = figures["decode_tok_s"], figures["inference_speed_tok_s"]
    assert (decode["verdict"], decode["judge"]) == ("pass", "floor 1600 (SM8650 phone, -10% noise)")
    assert 2800 < decode["value"] < 3300, decode
    # inference_speed.txt: 125 decode steps over prefill (1.6 ms) + decode (39 ms)
    assert speed["verdict"] == "pass" and 2800 < speed["value"] < decode["value"], speed
    assert figures["prefill_tok_s"]["verdict"] == "info"  # no floor upstream: judged by nothing
    assert "workload 'Once' --seq_len 128" in record["note"]
    seq_lens = _runner_seq_lens(phone)
    assert seq_lens and set(seq_lens) == {"128"}  # upstream's --max_seq_len 128, every round


def test_a_phone_below_the_floor_fails_the_gate(run_perf) -> None:
    """The failure is the figure's, in results.json, summary.md and summary.html alike."""
    result, [record], folder = run_perf(800.0)
    result.assert_outcomes(failed=1, skipped=4)
    result.stdout.fnmatch_lines([
        "*stories260k SM8650/htp: decode_tok_s *.* < floor 1600 (tolerance 10%)*",
        "*stories260k SM8650/htp: inference_speed_tok_s *.* < floor 1600 (tolerance 10%)*"])
    figures = _figures(record)
    assert figures["decode_tok_s"]["verdict"] == figures["inference_speed_tok_s"]["verdict"] == (
        "fail")
    assert figures["prefill_tok_s"]["verdict"] == "info"
    [row] = [x for x in (folder / "summary.md").read_text().splitlines()
             if x.startswith("| test_phone_meets_golden_floors | decode_tok_s |")]
    assert row.endswith("| floor 1600 (SM8650 phone, -10% noise) | fail |"), row
    html = (folder / "summary.html").read_text()
    failed = [f["name"] for f in record["figures"] if f["verdict"] == "fail"]
    assert failed == ["decode_tok_s", "inference_speed_tok_s"]  # nothing else was judged failed
    assert html.count('data-verdict="fail"') == len(failed)


def test_the_tolerance_is_qnn_perf_noise(run_perf) -> None:
    """Decode at 1560 tok/s, inference speed ~1500 (prefill 3.2 ms + decode 80 ms): within the
    default noise (10%) of the 1600 floor, not within 2%."""
    within, [record], _ = run_perf(1560.0)
    within.assert_outcomes(passed=1, skipped=4)
    speed = _figures(record)["inference_speed_tok_s"]
    assert 1440 < speed["value"] < 1600 and speed["verdict"] == "pass", speed
    strict, _, _ = run_perf(1560.0, "--qnn-perf-noise", "0.02")
    strict.assert_outcomes(failed=1, skipped=4)
    strict.stdout.fnmatch_lines(["*inference_speed_tok_s 1*.* < floor 1600 (tolerance 2%)*"])


def test_a_device_that_runs_the_simulator_is_judged_like_the_emulator(run_perf,
                                                                      tmp_path: Path) -> None:
    """The loopback phone as it is (x86_64: the simulator) at the 30 tok/s the real simulator
    decodes: its figures are info, no floor judges them, the test passes; an update writes no
    floor."""
    result, [record], _ = run_perf(30.0, as_phone=False)
    result.assert_outcomes(passed=1, skipped=4)
    figures = _figures(record)
    assert {f["verdict"] for f in figures.values()} == {"info"}, figures
    assert 25 < figures["decode_tok_s"]["value"] < 35
    assert "no phone floor" in figures["decode_tok_s"]["label"]
    assert "runs the x86 HTP simulator" in record["note"]
    copy = tmp_path / "golden"
    shutil.copytree(ROOT / "golden" / "perf", copy / "perf")
    before = (copy / "perf" / "stories260k.json").read_text()
    updated, _, _ = run_perf(30.0, "--qnn-update-golden", "--qnn-golden-dir", str(copy),
                             as_phone=False)  # the last --qnn-golden-dir wins
    updated.assert_outcomes(passed=1, skipped=4)
    assert (copy / "perf" / "stories260k.json").read_text() == before
