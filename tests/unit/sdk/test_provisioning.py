"""The embedded emulator SDK: laid out once, reused, never half-made; user SDKs used as they are."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pytest_qnn_genai.sdk import SdkError, adapter, emulator, resolve_sdk


def _counting_compiler(tmp_path: Path, fail: bool = False) -> tuple[str, Path]:
    """A C compiler wrapper that logs each call (and optionally fails) around the real gcc."""
    log = tmp_path / "cc-calls.log"
    script = tmp_path / "cc-wrapper"
    body = 'echo "error: simulated compiler crash" >&2; exit 1' if fail else 'exec gcc "$@"'
    script.write_text(f'#!/bin/sh\necho call >> "{log}"\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), log


def test_provision_lays_out_the_sdk_once(tmp_path: Path) -> None:
    cc, log = _counting_compiler(tmp_path)
    root = emulator.provision(tmp_path / "cache", compiler=cc)
    lib = root / "lib" / "x86_64-linux-clang"
    for name in ("libQnnHtp.so", "libQnnHtpReal.so", "libQnnSystem.so", "libHtpPrepare.so"):
        assert (lib / name).is_file(), name
    assert emulator.manifest(root)["qairt_version"] == adapter.DEFAULT.qairt  # the pinned wheel
    # the adapter exports the QNN entry point and loads with the real library next to it
    assert b"QnnInterface_getProviders" in (lib / "libQnnHtp.so").read_bytes()
    assert log.read_text().count("call") == 1
    again = emulator.provision(tmp_path / "cache", compiler=cc)
    assert again == root
    assert log.read_text().count("call") == 1  # reused, not rebuilt


def test_failed_build_leaves_nothing_half_made(tmp_path: Path) -> None:
    cc, _ = _counting_compiler(tmp_path, fail=True)
    with pytest.raises(emulator.EmulatorSdkError, match="simulated compiler crash"):
        emulator.provision(tmp_path / "cache", compiler=cc)
    sdk_dir = tmp_path / "cache" / "qnn-sdk"
    leftovers = [p.name for p in sdk_dir.iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []
    good, _ = _counting_compiler(tmp_path / "..", fail=False)
    assert emulator.provision(tmp_path / "cache", compiler=good).is_dir()


def test_unfinished_folder_is_never_used(tmp_path: Path) -> None:
    root = emulator.provision(tmp_path / "cache")
    (root / emulator.MANIFEST).unlink()  # as if the process died before the rename
    (root / "lib" / "x86_64-linux-clang" / "libQnnHtp.so").write_bytes(b"garbage")
    rebuilt = emulator.provision(tmp_path / "cache")
    assert rebuilt == root
    assert b"QnnInterface_getProviders" in (root / "lib/x86_64-linux-clang/libQnnHtp.so").read_bytes()


def test_no_c_compiler_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    with pytest.raises(emulator.EmulatorSdkError) as err:
        emulator.find_c_compiler()
    assert "install gcc" in str(err.value) and "\n" not in str(err.value)


def test_user_sdk_is_used_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)
    user = tmp_path / "qairt" / "2.37.0.250724"
    lib = user / "lib" / "x86_64-linux-clang"
    lib.mkdir(parents=True)
    for name in ("libQnnHtp.so", "libQnnSystem.so"):
        (lib / name).write_bytes(b"\x7fELF")
    (user / "sdk.yaml").write_text("name: qairt\nversion: 2.37.0.250724\n")
    sdk = resolve_sdk(str(user), tmp_path / "cache")
    assert (sdk.kind, sdk.qairt_version, sdk.root) == ("user", "2.37.0.250724", user)
    assert not (tmp_path / "cache").exists()  # no emulator SDK, no adapter
    monkeypatch.setenv("QNN_SDK_ROOT", str(user))
    assert resolve_sdk(None, tmp_path / "cache").kind == "user"


@pytest.mark.parametrize("version", ["2.51.0.260929", "2.48.40.250101"])
def test_a_user_sdk_executorch_cannot_drive_is_one_line(tmp_path: Path, version: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """QAIRT releases measured to move the HTP device config union (the ones the emulator's
    adapter re-lays out) fail executorch's device creation deep in a build: refused up front."""
    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)
    user = tmp_path / "qairt" / version
    lib = user / "lib" / "x86_64-linux-clang"
    lib.mkdir(parents=True)
    for name in ("libQnnHtp.so", "libQnnSystem.so"):
        (lib / name).write_bytes(b"\x7fELF")
    (user / "sdk.yaml").write_text(f"name: qairt\nversion: {version}\n")
    with pytest.raises(SdkError) as err:
        resolve_sdk(str(user), tmp_path / "cache")
    message = str(err.value)
    assert message.startswith(f"--qnn-sdk {user}: QAIRT {version}") and "\n" not in message
    assert "socModel 0" in message and "2.49.40" in message


def test_incomplete_user_sdk_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SdkError) as err:
        resolve_sdk(str(tmp_path), tmp_path / "cache")
    assert "missing lib/x86_64-linux-clang/libQnnHtp.so" in str(err.value)


def test_concurrent_provisioning_builds_once(tmp_path: Path) -> None:
    """Two processes racing for the same SDK folder: one compiles, both get the same root."""
    import subprocess
    import sys

    cc, log = _counting_compiler(tmp_path)
    code = ("import sys; from pathlib import Path; from pytest_qnn_genai.sdk import emulator; "
            "print(emulator.provision(Path(sys.argv[1]), compiler=sys.argv[2]))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "cache"), cc],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    roots = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert len(roots) == 1 and all(p.returncode == 0 for p in procs)
    assert log.read_text().count("call") == 1
    assert os.path.isdir(roots.pop())


def test_activation_keeps_later_imports_working(emulator_sdk_root: Path) -> None:
    """Preloading QAIRT's libraries must not leak their libc++ into later imports (segfault)."""
    import subprocess
    import sys

    code = ("from pathlib import Path; from pytest_qnn_genai.sdk import activate, resolve_sdk; "
            f"activate(resolve_sdk({str(emulator_sdk_root)!r}, Path('/nonexistent'))); "
            "import sentencepiece, torchao.quantization.pt2e.quantize_pt2e; print('imports ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "imports ok" in proc.stdout
