"""The phone path end to end without a phone: the real adb client, the loopback adb server, an
SM8650 sandbox device that runs what is pushed on this machine, and ExecuTorch's own
qnn_llama_runner and qnn_executor_runner built for x86_64 (the session's --executorch-src) with
the emulator SDK's QNN libraries, all pushed by the plugin. The device runs must give what the
emulator path gives. (The sandbox phone reports an x86_64 ABI, so the plugin gives it the
emulator's builds: ``Pipeline.build_target``; a phone build on it fails, loudly.)"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pytest_qnn_genai.checks import numerics
from pytest_qnn_genai.devices import setup as device_setup
from pytest_qnn_genai.devices.adb import RetryPolicy
from pytest_qnn_genai.devices.llama_runs import retokenize
from pytest_qnn_genai.devices.session import DeviceSession
from pytest_qnn_genai.devices.setup import DeviceSetupError, device_targets
from pytest_qnn_genai.devices.workspace import RunnerFailedError
from pytest_qnn_genai.flows import smoke
from pytest_qnn_genai.runtime.programs import run_method
from pytest_qnn_genai.runtime.tokenizer import load_tokenizer
from pytest_qnn_genai.targets import Target, soc
from tests.support.adb_server import LoopbackAdbServer
from tests.support.fake_device import FakeDevice, loopback_props

pytest_plugins = ["tests.support.adb_fixtures"]

SERIAL = f"QNNE2E{os.getpid()}"  # unique per process: the plugin locks phones by serial
RUNNER_CALL = "./qnn_llama_runner "
EXECUTOR_CALL = "./qnn_executor_runner "
FAST_RETRY = RetryPolicy(attempts=4, base_delay_s=0.05, max_delay_s=0.2)
SM8650_PROPS = loopback_props("SM8650")

PHONE_TESTS = """
import numpy as np
import pytest

@pytest.mark.device
def test_phone(qnn_run, qnn_target):
    assert qnn_run.device == qnn_target.device
    assert qnn_run.text and qnn_run.tokens and qnn_run.logits is not None
    assert list(np.argmax(qnn_run.logits, axis=1)) == qnn_run.tokens
    assert "argmax" in qnn_run.extra["tokens_source"] and qnn_run.extra["hybrid_text"] == qnn_run.text
    assert qnn_run.perf.generated_tokens == len(qnn_run.tokens)

@pytest.mark.device
def test_phone_again(qnn_run):
    assert qnn_run.text
"""


@pytest.fixture
def phone(adb_server: LoopbackAdbServer) -> FakeDevice:
    """An SM8650 sandbox device with this process's serial."""
    return adb_server.add_device(SERIAL, dict(SM8650_PROPS))


@pytest.fixture
def gate_pte(qnn_pipeline, case, sm8650_emulator) -> tuple[Path, str]:
    """The gate's SM8650 .pte from the cache (the lead's suites build the same entry)."""
    entry = qnn_pipeline.pte_entry(case, sm8650_emulator)
    return qnn_pipeline.pte(case, sm8650_emulator).pte, entry.digest


@pytest.fixture
def phone_args(adb_server, adb_client, x86_runners, emulator_sdk_root, qnn_settings,
               monkeypatch) -> list[str]:
    """Command line of an inner pytest run on the sandbox phone (the outer run's cache)."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[3]))
    return ["-p", "no:cacheprovider",
            "--models", "stories260k", "--adb-host", f"127.0.0.1:{adb_server.port}",
            "--adb-path", adb_client, "--runner", str(x86_runners.llama_runner),
            "--qnn-device-libs", str(emulator_sdk_root),
            "--qnn-cache-dir", str(qnn_settings.cache_dir)]


def _session(adb_server, adb_client, runner: Path, libs: Path, local: Path) -> DeviceSession:
    settings = SimpleNamespace(adb_host=f"127.0.0.1:{adb_server.port}", adb_path=adb_client,
                               runner=str(runner), qnn_device_libs=str(libs), qnn_sdk=None)
    transport = device_setup.adb_device(settings, SERIAL, command_timeout_s=30.0,
                                        retry=FAST_RETRY)
    return DeviceSession.from_settings(settings, SERIAL, soc("SM8650"), local, transport)


def _calls(device: FakeDevice, runner: str = RUNNER_CALL) -> list[str]:
    return [c for c in device.shell_commands if runner in c]


def test_device_run_matches_the_emulator(qnn_pipeline, case, sm8650_emulator, gate_pte, phone,
                                         adb_server, adb_client, x86_runners, emulator_sdk_root,
                                         tmp_path) -> None:
    """Push libraries, runners, .pte, tokenizer and prompt ids through the real adb client (the
    device going offline mid-push is retried), run upstream's runner in hybrid then kv mode,
    pull, parse: the host runner's ids (from the kv run's dumped logits), text and counts."""
    emulated = qnn_pipeline.run(case, sm8650_emulator)
    session = _session(adb_server, adb_client, x86_runners.llama_runner, emulator_sdk_root,
                       tmp_path / "runs")
    assert session.start().soc == "SM8650"
    pushed = {Path(s).name.removesuffix(".partial") for s in phone.sends}
    assert pushed == {p.name for p in session.libs} | {"qnn_llama_runner"}
    assert {"libexecutorch_backend_qnn.so", "libQnnHtp.so", "libQnnSystem.so"} <= pushed
    assert phone.local_path(session.workspace.remote(".libQnnHtp.so.sha256")).is_file()

    phone.faults.offline_requests = 2  # the .pte push meets "device offline" twice
    pte, digest = gate_pte
    target = Target(soc("SM8650"), "htp", SERIAL)
    result = session.generate(pte, case.path("tokenizer_model"), case.path("tokenizer_bin"),
                              case.eval_prompt, case.max_new_tokens, target, digest, logits=True)

    hybrid, kv = _calls(phone)
    assert phone.faults.offline_requests == 0 and "--eval_mode 1" in hybrid and "--eval_mode 0" in kv
    p, n = len(emulated.prompt_tokens), case.max_new_tokens
    assert all(f"--seq_len {p + n} " in c and "--shared_buffer" not in c for c in (hybrid, kv))
    assert phone.local_path(session.workspace.remote("artifacts", digest, pte.name)).is_file()
    assert result.device == SERIAL and result.extra["target"] == f"SM8650-htp-{SERIAL}"
    assert result.prompt_tokens == emulated.prompt_tokens
    assert result.tokens == emulated.tokens and result.text == emulated.text
    assert result.text.strip() and result.extra["hybrid_text"] == result.text
    assert result.perf.generated_tokens == len(emulated.tokens)  # observer count + prefill token
    assert result.perf.prompt_tokens == p
    assert result.perf.prefill_tok_s > 0 and result.perf.decode_tok_s > 0
    cos = numerics.rowwise_cosine(emulated.logits, result.logits)  # kv vs hybrid prompt pass
    assert float(cos.min()) >= 0.995, np.round(cos, 4)

    plain = session.generate(pte, case.path("tokenizer_model"), case.path("tokenizer_bin"),
                             case.eval_prompt, n, target, digest)
    tokenizer = load_tokenizer(case.path("tokenizer_model"))
    assert len(_calls(phone)) == 3 and plain.logits is None and plain.text == emulated.text
    assert plain.tokens == retokenize(tokenizer, case.eval_prompt, emulated.text)
    assert "re-tokenized" in plain.extra["tokens_source"]

    again = _session(adb_server, adb_client, x86_runners.llama_runner, emulator_sdk_root,
                     tmp_path / "runs2")
    sends = len(phone.sends)
    again.start()  # a later session: libraries and runner unchanged -> nothing pushed
    assert len(phone.sends) == sends


def test_a_library_the_plugin_does_not_push_fails_the_run_in_one_line(
        case, gate_pte, phone, adb_server, adb_client, x86_runners, emulator_sdk_root,
        tmp_path) -> None:
    """Upstream's runners find their libraries through ``$ORIGIN`` only: a session that leaves
    the backend library out of what it pushes cannot start the runner, and says so in one line
    (the loader's words: not an E/F line)."""
    session = _session(adb_server, adb_client, x86_runners.llama_runner, emulator_sdk_root,
                       tmp_path / "runs")
    session.libs = [p for p in session.libs if p.name != "libexecutorch_backend_qnn.so"]
    pte, digest = gate_pte
    with pytest.raises(RunnerFailedError) as info:
        session.generate(pte, case.path("tokenizer_model"), case.path("tokenizer_bin"),
                         case.eval_prompt, 4, Target(soc("SM8650"), "htp", SERIAL), digest)
    assert info.value.exit_code == 127
    assert info.value.summary == (
        "qnn_llama_runner exited 127: ./qnn_llama_runner: error while loading shared libraries: "
        "libexecutorch_backend_qnn.so: cannot open shared object file: No such file or directory")
    assert len(_calls(phone)) == 1  # never re-run


def test_a_runner_folder_without_its_backend_library_is_one_line_before_any_push(
        adb_server, adb_client, x86_runners, emulator_sdk_root, phone, tmp_path) -> None:
    folder = tmp_path / "runners"
    shutil.copytree(x86_runners.folder, folder, copy_function=os.link)
    (folder / "libexecutorch_backend_qnn.so").unlink()
    with pytest.raises(DeviceSetupError) as info:
        _session(adb_server, adb_client, folder / "qnn_llama_runner", emulator_sdk_root,
                 tmp_path / "runs")
    assert str(info.value).startswith("--runner: qnn_llama_runner needs "
                                      "libexecutorch_backend_qnn.so (DT_NEEDED)")
    assert phone.sends == []


def test_block_runs_through_the_executor_runner(qnn_pipeline, sm8650_emulator, phone,
                                                adb_server, adb_client, x86_runners,
                                                emulator_sdk_root, tmp_path) -> None:
    """The smoke block as SimpleADB runs it through upstream's qnn_executor_runner: .pte, raw
    input and input list pushed, output_0_0.raw pulled; the same bits as in this process."""
    entry = qnn_pipeline.smoke_block(sm8650_emulator, "16a8w")
    pte, inputs = entry.file(smoke.PTE), torch.load(entry.file(smoke.REFERENCE))["inputs"]
    session = _session(adb_server, adb_client, x86_runners.llama_runner, emulator_sdk_root,
                       tmp_path / "runs")
    (out,) = session.run_method(pte, [t.numpy() for t in inputs], entry.digest)
    assert np.array_equal(out, run_method(pte, inputs)[0].numpy())
    (call,) = _calls(phone, EXECUTOR_CALL)
    assert "--input_list_path run/input_list.txt" in call and "--shared_buffer" not in call
    assert phone.local_path(session.workspace.remote("run", "_input_0_0.raw")).read_bytes() == \
        inputs[0].numpy().tobytes()


def test_a_phone_build_is_run_with_shared_buffer_and_fails_on_the_simulator(
        qnn_pipeline, case, phone, adb_server, adb_client, x86_runners, emulator_sdk_root,
        tmp_path) -> None:
    """The LLM's phone build (shared buffer, weight sharing) is run with --shared_buffer, as
    upstream runs every phone build; on QNN's x86 simulator it cannot run (measured: the runner
    crashes), which is one line naming the runner and its exit, never a pass."""
    phone_target = Target(soc("SM8650"), "htp", SERIAL)
    entry = qnn_pipeline.pte_entry(case, phone_target)  # no device to ask: a phone's build
    pte = qnn_pipeline.pte(case, phone_target).pte
    session = _session(adb_server, adb_client, x86_runners.llama_runner, emulator_sdk_root,
                       tmp_path / "runs")
    with pytest.raises((RunnerFailedError, ValueError)) as info:
        session.generate(pte, case.path("tokenizer_model"), case.path("tokenizer_bin"),
                         case.eval_prompt, case.max_new_tokens, phone_target, entry.digest,
                         logits=True)
    assert "qnn_llama_runner" in str(info.value).splitlines()[0]
    (call,) = _calls(phone)
    assert "--shared_buffer" in call and "--eval_mode 1" in call


def test_pytest_run_on_the_phone(pytester, gate_pte, phone, phone_args) -> None:
    """``pytest --device SERIAL ...``: a device-marked qnn_run test passes with the serial in its
    id; a push dropped mid-transfer is retried; the runner runs twice (hybrid, kv) per session."""
    phone.faults.drop_pushes = 1
    pytester.makepyfile(PHONE_TESTS)
    result = pytester.runpytest_subprocess("-v", "--device", SERIAL, *phone_args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random([f"*test_phone?stories260k-SM8650-htp-{SERIAL}? PASSED*"])
    assert phone.faults.drop_pushes == 0 and len(_calls(phone)) == 2


def test_runner_failure_is_reported_once(pytester, gate_pte, phone, phone_args) -> None:
    """A runner that exits nonzero fails the tests with its exit code and log; never re-run."""
    phone.faults.exit_codes = {"./qnn_llama_runner": 3}
    pytester.makepyfile(PHONE_TESTS)
    result = pytester.runpytest_subprocess("--device", SERIAL, *phone_args)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*qnn_llama_runner exited 3*"])
    result.stdout.fnmatch_lines(["*fault injected: exit 3*"])
    assert len(_calls(phone)) == 1


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
