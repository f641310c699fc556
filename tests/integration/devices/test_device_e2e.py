"""The phone path end to end without a phone: the real adb client, the loopback adb server, an
SM8650 sandbox device, and a ``qnn_llama_runner`` stand-in that runs the pushed gate .pte on the
x86 HTP emulator (HybridRunner, in the device's subprocess). What is under test is the transport
and the plugin's device flow; the device run must generate what the emulator path generates."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_qnn_genai.devices import setup as device_setup
from pytest_qnn_genai.devices.adb import RetryPolicy
from pytest_qnn_genai.devices.session import DeviceSession, retokenize
from pytest_qnn_genai.devices.setup import device_targets
from pytest_qnn_genai.devices.workspace import LIBS_MARKER
from pytest_qnn_genai.runtime.run import run
from pytest_qnn_genai.runtime.tokenizer import load_tokenizer
from pytest_qnn_genai.targets import Target, soc
from tests.support.adb_server import LoopbackAdbServer
from tests.support.emulator_runner_backend import write_emulator_launcher
from tests.support.fake_device import FakeDevice

pytest_plugins = ["tests.support.adb_fixtures"]

SERIAL = f"QNNE2E{os.getpid()}"  # unique per process: the plugin locks phones by serial
RUNNER_CALL = "./qnn_llama_runner "
FAST_RETRY = RetryPolicy(attempts=4, base_delay_s=0.05, max_delay_s=0.2)
SM8650_PROPS = {"ro.soc.model": "SM8650", "ro.board.platform": "pineapple"}

# The sandbox phone runs the x86 emulator, which cannot load a phone build (weight sharing,
# shared buffers): the inner session pushes the emulator build of the same case instead.
EMULATOR_BUILD = """
import dataclasses
import pytest
from pytest_qnn_genai.pipeline import Pipeline
from pytest_qnn_genai.targets import EMULATOR

@pytest.fixture(scope="session", autouse=True)
def _emulator_build_for_the_sandbox_phone():
    original = Pipeline.pte_entry
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Pipeline, "pte_entry", lambda self, case, target: original(
            self, case, dataclasses.replace(target, device=EMULATOR)))
        yield
"""

PHONE_TESTS = """
import pytest

@pytest.mark.device
def test_phone(qnn_run, qnn_target):
    assert qnn_run.device == qnn_target.device
    assert qnn_run.text and qnn_run.tokens and qnn_run.logits is None
    assert "re-tokenized" in qnn_run.extra["tokens_source"]
    assert qnn_run.perf.generated_tokens >= len(qnn_run.tokens)

@pytest.mark.device
def test_phone_again(qnn_run):
    assert qnn_run.text
"""


@pytest.fixture
def phone(adb_server: LoopbackAdbServer) -> FakeDevice:
    """An SM8650 sandbox device with this process's serial."""
    return adb_server.add_device(SERIAL, dict(SM8650_PROPS))


@pytest.fixture
def device_libs(tmp_path: Path) -> Path:
    """Tiny stand-ins laid out like a QNN SDK's Android and Hexagon v75 libraries."""
    root = tmp_path / "qnn-sdk"
    for rel in ("lib/aarch64-android/libQnnHtp.so", "lib/aarch64-android/libQnnHtpV75Stub.so",
                "lib/aarch64-android/libQnnHtpPrepare.so", "lib/aarch64-android/libQnnSystem.so",
                "lib/hexagon-v75/unsigned/libQnnHtpV75Skel.so"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(f"fake {rel}\n".encode() * 64)
    return root


@pytest.fixture
def launcher(tmp_path: Path, qnn_sdk) -> Path:
    """The qnn_llama_runner stand-in backed by the emulator SDK of this session."""
    return write_emulator_launcher(tmp_path / "qnn_llama_runner", qnn_sdk.root)


@pytest.fixture
def gate_pte(qnn_pipeline, case, sm8650_emulator):  # -> (path, digest)
    """The gate's SM8650 .pte from the cache (the lead's suites build the same entry)."""
    entry = qnn_pipeline.pte_entry(case, sm8650_emulator)
    return qnn_pipeline.pte(case, sm8650_emulator).pte, entry.digest


@pytest.fixture
def phone_args(adb_server, adb_client, launcher, device_libs, qnn_settings) -> list[str]:
    """Command line of an inner pytest run on the sandbox phone (the outer run's cache)."""
    return ["-p", "no:cacheprovider", "--adb-host", f"127.0.0.1:{adb_server.port}",
            "--adb-path", adb_client, "--runner", str(launcher), "--qnn-device-libs",
            str(device_libs), "--qnn-cache-dir", str(qnn_settings.cache_dir)]


def _settings(adb_server, adb_client, launcher, device_libs) -> SimpleNamespace:
    return SimpleNamespace(adb_host=f"127.0.0.1:{adb_server.port}", adb_path=adb_client,
                           runner=str(launcher), qnn_device_libs=str(device_libs), qnn_sdk=None)


def _runner_calls(device: FakeDevice) -> int:
    return sum(RUNNER_CALL in c for c in device.shell_commands)


def test_device_run_matches_the_emulator(qnn_pipeline, case, sm8650_emulator, gate_pte, phone,
                                         adb_server, adb_client, launcher, device_libs,
                                         tmp_path) -> None:
    """Push libs/runner/.pte/tokenizer.bin through the real adb client (the device going offline
    mid-push is retried), run, pull, parse: same text and tokens as the emulator path."""
    emulated = qnn_pipeline.run(case, sm8650_emulator)
    settings = _settings(adb_server, adb_client, launcher, device_libs)
    sm8650 = soc("SM8650")
    session = DeviceSession.from_settings(settings, SERIAL, sm8650, tmp_path / "runs",
                                          command_timeout_s=30.0, retry=FAST_RETRY)
    info = session.start()
    assert info.soc == "SM8650"
    lib_sends = [s for s in phone.sends if "/lib" in s]
    assert len(lib_sends) == 5 and phone.local_path(session.workspace.remote(LIBS_MARKER)).is_file()

    phone.faults.offline_requests = 2  # the .pte push meets "device offline" twice
    pte, digest = gate_pte
    target = Target(sm8650, "htp", SERIAL)
    result = run(pte, case.path("tokenizer_model"), case.eval_prompt, target, case.max_new_tokens,
                 device=session, tokenizer_bin=case.path("tokenizer_bin"), pte_digest=digest)

    assert phone.faults.offline_requests == 0 and _runner_calls(phone) == 1
    pushed = phone.local_path(session.workspace.remote("artifacts", digest, pte.name))
    assert pushed.read_bytes() == pte.read_bytes()
    assert result.device == SERIAL and result.extra["target"] == f"SM8650-htp-{SERIAL}"
    assert result.text == emulated.text and result.text.strip()
    assert result.prompt_tokens == emulated.prompt_tokens
    tokenizer = load_tokenizer(case.path("tokenizer_model"))
    assert result.tokens == retokenize(tokenizer, case.eval_prompt, emulated.text)
    eos_tail = 1 if emulated.extra["stop_reason"] == "eos" else 0
    assert result.tokens == emulated.tokens[:len(emulated.tokens) - eos_tail]
    assert result.perf.generated_tokens == len(emulated.tokens)  # observer count + prefill token
    assert result.perf.prompt_tokens == len(emulated.prompt_tokens)
    assert result.perf.prefill_tok_s > 0 and result.perf.decode_tok_s > 0
    assert result.logits is None and "re-tokenized" in result.extra["tokens_source"]

    again = DeviceSession.from_settings(settings, SERIAL, sm8650, tmp_path / "runs2",
                                        retry=FAST_RETRY)
    sends = len(phone.sends)
    again.start()  # a later session: libraries and runner unchanged -> nothing pushed
    assert len(phone.sends) == sends


def test_pytest_run_on_the_phone(pytester, gate_pte, phone, phone_args) -> None:
    """``pytest --device SERIAL ...``: a device-marked qnn_run test passes with the serial in its
    id; a push dropped mid-transfer is retried; the runner runs once per session. (Phone runs
    go through a subprocess: a second in-process run would re-import torch operator libraries.)"""
    phone.faults.drop_pushes = 1
    pytester.makeconftest(EMULATOR_BUILD)
    pytester.makepyfile(PHONE_TESTS)
    result = pytester.runpytest_subprocess("-v", "--device", SERIAL, *phone_args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random([f"*test_phone?stories260k-SM8650-htp-{SERIAL}? PASSED*"])
    assert phone.faults.drop_pushes == 0 and _runner_calls(phone) == 1


def test_runner_failure_is_reported_once(pytester, gate_pte, phone, phone_args) -> None:
    """A runner that exits nonzero fails the tests with its exit code and log; never re-run."""
    phone.faults.exit_codes = {"./qnn_llama_runner": 3}
    pytester.makeconftest(EMULATOR_BUILD)
    pytester.makepyfile(PHONE_TESTS)
    result = pytester.runpytest_subprocess("--device", SERIAL, *phone_args)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*qnn_llama_runner exited 3*"])
    result.stdout.fnmatch_lines(["*fault injected: exit 3*"])
    assert _runner_calls(phone) == 1


def _usage_error(result) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [ln for ln in result.errlines if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stdout.str(), result.errlines
    return lines[0]


def test_unknown_serial_is_one_usage_line(pytester, phone, phone_args) -> None:
    assert device_setup.PROBE_TIMEOUT_S <= 5  # each probe call is bounded by this
    pytester.makepyfile(PHONE_TESTS)
    line = _usage_error(pytester.runpytest("--device", "BOGUS", *phone_args))
    assert line.startswith("ERROR: --device BOGUS:") and "'BOGUS' not found" in line


def test_wrong_soc_names_both(pytester, phone, phone_args) -> None:
    pytester.makepyfile(PHONE_TESTS)
    line = _usage_error(pytester.runpytest("--device", SERIAL, "--soc", "SM8750", *phone_args))
    assert "SM8750" in line and "SM8650" in line and SERIAL in line


@pytest.mark.parametrize("flag,value,expected", [
    ("--runner", "/nonexistent/qnn_llama_runner", "ERROR: --runner: "),
    ("--adb-path", "/nonexistent/adb", "ERROR: --adb-path: "),
    ("--qnn-device-libs", "/nonexistent", "ERROR: --qnn-device-libs: libQnnHtp.so not found"),
])
def test_missing_tools_are_one_usage_line(pytester, phone, phone_args, flag, value,
                                          expected) -> None:
    args = list(phone_args)
    args[args.index(flag) + 1] = value
    pytester.makepyfile(PHONE_TESTS)
    assert _usage_error(pytester.runpytest("--device", SERIAL, *args)).startswith(expected)


def test_more_workers_than_phones(pytester, phone, phone_args) -> None:
    pytester.makepyfile(PHONE_TESTS)
    line = _usage_error(pytester.runpytest("-n", "2", "--device", SERIAL, *phone_args))
    assert "2 workers" in line and "1 --device" in line


def test_pooled_ids_are_the_same_on_every_worker() -> None:
    s = SimpleNamespace(devices=("A1", "B2"), socs=(soc("SM8650"),), backend="htp", targets=[])
    assert [t.id for t in device_targets(s, 2)] == ["SM8650-htp-device"]
    assert [t.id for t in device_targets(s, None)] == ["SM8650-htp-A1", "SM8650-htp-B2"]
    one = SimpleNamespace(devices=("A1",), socs=(soc("SM8650"),), backend="htp", targets=[])
    assert [t.id for t in device_targets(one, 1)] == ["SM8650-htp-A1"]
