"""What a run of upstream's runners pushes, found before anything is pushed: QNN's libraries by
the runner's machine, what the runners themselves need (DT_NEEDED), one line for what is missing.

Android binaries are minimal ELF files (tests/support/elf_files.py: what pyelftools reads of a
real one); the x86 case uses the real libraries of the emulator SDK and the executorch wheel."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_qnn_genai.devices import libraries
from pytest_qnn_genai.devices.libraries import LibraryError, device_libraries
from pytest_qnn_genai.devices.library_builds import library_set
from pytest_qnn_genai.targets import soc
from tests.support.elf_files import write_elf

SM8650 = soc("SM8650")
QNN_ANDROID = ("libQnnHtp.so", "libQnnHtpV75Stub.so", "libQnnHtpPrepare.so", "libQnnSystem.so")


def android_sdk(root: Path, version: str = "2.51.0") -> Path:
    """A QNN SDK's device-library layout: aarch64 libraries and the v75 Hexagon skel."""
    for name in QNN_ANDROID:
        lib = write_elf(root / "lib" / "aarch64-android" / name, needed=("libc.so", "libm.so"))
        lib.write_bytes(lib.read_bytes() + f"QAIRT v{version}.250101120000\0".encode())
    skel = root / "lib" / "hexagon-v75" / "unsigned" / "libQnnHtpV75Skel.so"
    skel.parent.mkdir(parents=True)
    skel.write_bytes(f"hexagon\0v{version}.250101120000_1234\0".encode())
    return root


def android_build(root: Path, with_backend: bool = True) -> Path:
    """Upstream's Android build folder: the runner in examples/, the backend library in
    backends/qualcomm/ (as backends/qualcomm/scripts/build.sh leaves them)."""
    (root / "CMakeCache.txt").parent.mkdir(parents=True, exist_ok=True)
    (root / "CMakeCache.txt").write_text("# cmake\n")
    runner = write_elf(root / "examples/qualcomm/oss_scripts/llama/qnn_llama_runner",
                       needed=("libqnn_executorch_backend.so", "libc++_shared.so", "liblog.so",
                               "libc.so"), runpath="$ORIGIN")
    write_elf(root / "libs" / "libc++_shared.so", needed=("libc.so",))
    if with_backend:
        write_elf(root / "backends/qualcomm/libqnn_executorch_backend.so",
                  needed=("libc++_shared.so", "libdl.so"))
    return runner


def test_a_phone_run_pushes_the_backend_library_from_the_runners_build(tmp_path: Path) -> None:
    runner = android_build(tmp_path / "build-android")
    libs = device_libraries([runner], android_sdk(tmp_path / "sdk"), SM8650)
    assert libs.machine == "aarch64"
    assert {p.name for p in libs.qnn} == {*QNN_ANDROID, "libQnnHtpV75Skel.so"}
    assert {p.name: p.parent.name for p in libs.runner} == {
        "libqnn_executorch_backend.so": "qualcomm", "libc++_shared.so": "libs"}
    assert "liblog.so" not in {p.name for p in libs.files}  # the phone's own


def test_a_missing_backend_library_is_one_line_before_any_push(tmp_path: Path) -> None:
    runner = android_build(tmp_path / "build-android", with_backend=False)
    with pytest.raises(LibraryError) as err:
        device_libraries([runner], android_sdk(tmp_path / "sdk"), SM8650)
    message = str(err.value)
    assert message.startswith("--runner: qnn_llama_runner needs libqnn_executorch_backend.so "
                              "(DT_NEEDED) and it is not an aarch64 system library")
    assert "\n" not in message


def test_missing_qnn_libraries_name_the_option_and_the_set(tmp_path: Path) -> None:
    sdk = android_sdk(tmp_path / "sdk")
    (sdk / "lib" / "aarch64-android" / "libQnnSystem.so").unlink()
    runner = android_build(tmp_path / "build-android")
    with pytest.raises(LibraryError, match=r"^--qnn-sdk: libQnnSystem.so not found in .*"
                                           r"an aarch64 run on SM8650 needs libQnnHtp.so"):
        device_libraries([runner], sdk, SM8650, qnn_option="--qnn-sdk")


def test_runners_for_different_machines_are_refused(tmp_path: Path) -> None:
    runner = android_build(tmp_path / "build-android")
    executor = write_elf(runner.parent / "qnn_executor_runner", machine="x86_64")
    with pytest.raises(LibraryError, match="qnn_executor_runner is built for x86_64, "
                                           "qnn_llama_runner for aarch64"):
        device_libraries([runner, executor], android_sdk(tmp_path / "sdk"), SM8650)


def test_not_an_elf_runner_is_one_line(tmp_path: Path) -> None:
    script = tmp_path / "qnn_llama_runner"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(LibraryError, match=r"^--runner: .*qnn_llama_runner: not an ELF binary"):
        device_libraries([script], android_sdk(tmp_path / "sdk"), SM8650)


def test_an_x86_run_pushes_the_simulator_and_what_the_runner_needs(
        tmp_path: Path, emulator_sdk_root: Path) -> None:
    """The harness's x86 build keeps the executorch libraries beside the runners; the QNN side is
    the emulator SDK's x86 libraries, the adapter's real library and their bundled libc++."""
    from pytest_qnn_genai.runners.sources import find_wheel

    wheel_libs = find_wheel().lib_dir
    folder = tmp_path / "runners"
    folder.mkdir()
    for name in ("libexecutorch_backend_qnn.so", "libexecutorch.so"):
        os.link(wheel_libs / name, folder / name)
    runner = write_elf(folder / "qnn_llama_runner", machine="x86_64",
                       needed=("libexecutorch_backend_qnn.so", "libstdc++.so.6", "libc.so.6"),
                       runpath="$ORIGIN")
    libs = device_libraries([runner], emulator_sdk_root, SM8650, qnn_option="--qnn-sdk")
    qnn = {p.name for p in libs.qnn}
    assert {"libQnnHtp.so", "libQnnSystem.so", "libHtpPrepare.so", "libQnnHtpReal.so"} <= qnn
    assert any(n.startswith("libc++-") for n in qnn)  # what the QAIRT libraries need
    assert {p.name for p in libs.runner} == {"libexecutorch_backend_qnn.so", "libexecutorch.so"}
    assert library_set(libs.qnn).version == (2, 47, 0)  # the pinned wheel's QAIRT
    (folder / "libexecutorch.so").unlink()  # needed by the backend library, not by the runner
    with pytest.raises(LibraryError, match="libexecutorch_backend_qnn.so needs libexecutorch.so"):
        device_libraries([runner], emulator_sdk_root, SM8650)


def test_host_system_libraries_come_from_the_loader() -> None:
    assert libraries.system_library("libc.so.6", "x86_64")
    assert not libraries.system_library("libexecutorch.so", "x86_64")
    assert libraries.system_library("liblog.so", "aarch64")
    assert not libraries.system_library("libc++_shared.so", "aarch64")  # an app ships its own


def test_the_library_set_reads_the_build_id(tmp_path: Path) -> None:
    sdk = android_sdk(tmp_path / "sdk", version="2.49.40")
    found = library_set([*(sdk / "lib" / "aarch64-android").iterdir(),
                         sdk / "lib" / "hexagon-v75" / "unsigned" / "libQnnHtpV75Skel.so"])
    assert found.version == (2, 49, 40) and found.unreadable == () and len(found.builds) == 5
    assert library_set([write_elf(tmp_path / "libQnnHtp.so")]).version is None
