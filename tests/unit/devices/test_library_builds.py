"""The version-set preflight on real QAIRT files: the x86 libraries of the emulator SDK (from the
onnxruntime-qnn wheel), and copies of them whose build id was rewritten in place (the same
length, so the file stays a loadable ELF of the same shape) to make a set of mixed builds."""
from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

from pytest_qnn_genai.devices.library_builds import (
    Build,
    LibraryBuildError,
    LibraryBuildWarning,
    library_set,
    read_build,
)
from pytest_qnn_genai.devices.session import DeviceSession
from pytest_qnn_genai.devices.setup import DeviceSetupError, check_qairt, preflight

BUILD = "v2.47.0.260601114230"  # what the pinned wheel's QAIRT 2.47 libraries carry
STAMP = "260601114230"
X86_SET = ("libQnnHtp.so", "libQnnHtpReal.so", "libHtpPrepare.so", "libQnnSystem.so")


@pytest.fixture
def qnn_libs(emulator_sdk_root: Path, tmp_path: Path) -> Path:
    """The emulator SDK's QNN libraries, hard-linked (the adapter as libQnnHtp.so)."""
    folder = tmp_path / "libs"
    folder.mkdir()
    for name in X86_SET:
        os.link(emulator_sdk_root / "lib" / "x86_64-linux-clang" / name, folder / name)
    return folder


def rebuild(path: Path, old: str, new: str) -> Path:
    """Rewrite every ``old`` build id in ``path`` as ``new`` (a copy: the link is broken)."""
    assert len(old) == len(new)
    data = path.read_bytes()
    assert old.encode() in data
    path.unlink()
    path.write_bytes(data.replace(old.encode(), new.encode()))
    return path


def test_what_the_real_libraries_carry(qnn_libs: Path) -> None:
    assert read_build(qnn_libs / "libQnnHtpReal.so") == Build((2, 47, 0), STAMP, BUILD)
    assert read_build(qnn_libs / "libHtpPrepare.so") == Build((2, 47, 0), STAMP, BUILD)
    assert read_build(qnn_libs / "libQnnSystem.so") == Build(None, STAMP, STAMP)  # stamp only
    assert read_build(qnn_libs / "libQnnHtp.so") == "no QAIRT build id in it"  # the adapter


def test_the_real_set_is_one_build_and_passes_without_a_warning(qnn_libs: Path) -> None:
    found = library_set(sorted(qnn_libs.iterdir()))
    assert {p.name for p, _ in found.builds} == {"libQnnHtpReal.so", "libHtpPrepare.so",
                                                 "libQnnSystem.so"}  # the adapter is not QAIRT's
    assert found.unreadable == () and found.stamps == {STAMP} and found.version == (2, 47, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_qairt(preflight(sorted(qnn_libs.iterdir()), "--qnn-sdk"), "2.47.0", "--qnn-sdk")


def test_a_system_library_of_another_build_fails_naming_each_build(qnn_libs: Path) -> None:
    rebuild(qnn_libs / "libQnnSystem.so", STAMP, "250424201103")
    with pytest.raises(DeviceSetupError) as err:
        preflight(sorted(qnn_libs.iterdir()), "--qnn-sdk")
    message = str(err.value)
    assert "\n" not in message and message.startswith("--qnn-sdk: the QNN libraries are not one")
    assert "libQnnSystem.so 250424201103" in message and f"libHtpPrepare.so {BUILD}" in message


def test_a_stub_of_another_release_fails(qnn_libs: Path) -> None:
    """Upstream's failure: a v2.25 Stub beside a v2.28 set ("Stub lib id mismatch")."""
    for name in ("libQnnHtpReal.so", "libHtpPrepare.so"):  # both 2.28
        rebuild(qnn_libs / name, BUILD, "v2.28.2.241116104011")
    rebuild(qnn_libs / "libQnnSystem.so", STAMP, "241116104011")
    stub = qnn_libs / "libQnnHtpV75Stub.so"
    shutil.copy(qnn_libs / "libQnnSystem.so", stub)
    rebuild(stub, "241116104011", "241017130936")
    found = library_set(sorted(qnn_libs.iterdir()))
    with pytest.raises(LibraryBuildError, match="libQnnHtpV75Stub.so 241017130936"):
        found.check("--qnn-device-libs")
    stub.unlink()
    library_set(sorted(qnn_libs.iterdir())).check("--qnn-device-libs")  # one build again


def test_an_unreadable_library_is_one_warning_line_naming_it(qnn_libs: Path) -> None:
    rebuild(qnn_libs / "libQnnSystem.so", STAMP, "xxxxxxxxxxxx")
    with pytest.warns(LibraryBuildWarning) as caught:
        found = preflight(sorted(qnn_libs.iterdir()), "--qnn-sdk")
    [line] = [str(w.message) for w in caught]
    assert line == (f"QNN library {qnn_libs / 'libQnnSystem.so'}: build id not read (no QAIRT "
                    "build id in it); its build was not compared with the other libraries'")
    assert found.version == (2, 47, 0)  # the others are still compared


def test_libraries_older_than_the_building_qairt_fail(qnn_libs: Path) -> None:
    for name in ("libQnnHtpReal.so", "libHtpPrepare.so"):
        rebuild(qnn_libs / name, BUILD, "v2.45.0.260601114230")
    with pytest.raises(DeviceSetupError, match="are QAIRT 2.45.0, older than QAIRT 2.47.0"):
        check_qairt(preflight(sorted(qnn_libs.iterdir()), "--qnn-sdk"), "2.47.0", "--qnn-sdk")


def test_a_context_binary_newer_than_the_libraries_fails(qnn_libs: Path) -> None:
    found = library_set(sorted(qnn_libs.iterdir()))
    assert found.check_binary(Build.parse(BUILD) or "", "m.pte", "--qnn-sdk") == []
    older = Build.parse("v2.46.0.250101120000")
    assert older is not None and found.check_binary(older, "m.pte", "--qnn-sdk") == []
    newer = Build.parse("v2.52.0.261101120000")
    assert newer is not None
    with pytest.raises(LibraryBuildError, match="m.pte's context binary was built by QAIRT "
                       "v2.52.0.261101120000, newer than the QNN libraries"):
        found.check_binary(newer, "m.pte", "--qnn-sdk")
    assert found.check_binary("no QnnBackend delegate", "m.pte", "--qnn-sdk") == [
        "m.pte: the context binary's build id was not read (no QnnBackend delegate); not "
        "compared with the QNN libraries'"]


def test_a_program_without_a_context_binary_is_one_warning_once(qnn_libs: Path,
                                                                tmp_path: Path) -> None:
    session = DeviceSession(None, None, tmp_path / "runner", [], tmp_path,
                            qnn_builds=library_set(sorted(qnn_libs.iterdir())))
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"not a program")
    with pytest.warns(LibraryBuildWarning, match="m.pte: the context binary's build id was not"):
        session.check_program(pte, "digest")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session.check_program(pte, "digest")  # once per program
