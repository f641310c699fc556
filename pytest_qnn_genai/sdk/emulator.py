"""Provision the embedded x86 emulator SDK from the ``onnxruntime-qnn`` wheel's QAIRT libraries.

The folder ``<cache>/qnn-sdk/qairt-<version>-ort-<wheel>-adapter-<digest>/`` gets the layout
executorch expects (``lib/x86_64-linux-clang/``) and the project's ABI adapter as ``libQnnHtp.so``.
It is built in a temporary sibling folder and renamed into place under a file lock, so a half-built
folder is never used and concurrent sessions (pytest-xdist workers) build it once.

Only QAIRT builds the adapter was written and tested for are provisioned (``adapter.KNOWN_GOOD``);
the adapter is compiled with that build's expected API versions (see ``adapter.py``).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from pytest_qnn_genai.sdk import adapter

ADAPTER_SOURCE = Path(__file__).with_name("qnnhtp_abi_adapter.c")
LIB_SUBDIR = "lib/x86_64-linux-clang"
MANIFEST = "pytest-qnn-genai-sdk.json"
COMPILE_TIMEOUT_S = 120


class EmulatorSdkError(RuntimeError):
    """The emulator SDK cannot be provisioned (reported as one line)."""


@dataclass(frozen=True)
class WheelLibs:
    """The QAIRT libraries shipped by the installed onnxruntime-qnn wheel."""

    package_dir: Path
    bundled_dir: Path  # onnxruntime_qnn.libs (the wheel's own libc++)
    qairt_version: str
    wheel_version: str


def find_wheel_libs() -> WheelLibs:
    """Locate onnxruntime-qnn's libraries without importing onnxruntime."""
    spec = importlib.util.find_spec("onnxruntime_qnn")
    if spec is None or not spec.submodule_search_locations:
        raise EmulatorSdkError(
            "onnxruntime-qnn is not installed: `pip install onnxruntime-qnn=="
            f"{adapter.DEFAULT.wheel}` provides the x86 QNN libraries, or pass --qnn-sdk / set "
            "QNN_SDK_ROOT to a QNN SDK")
    pkg = Path(list(spec.submodule_search_locations)[0])
    info = (pkg / "build_and_package_info.py").read_text()
    qnn = re.search(r"qnn_version\s*=\s*'([^']+)'", info)
    wheel = re.search(r"__version__\s*=\s*'([^']+)'", info)
    if not qnn or not (pkg / "libQnnHtp.so").is_file():
        raise EmulatorSdkError(f"{pkg}: not an onnxruntime-qnn package with QAIRT libraries")
    return WheelLibs(pkg, pkg.parent / "onnxruntime_qnn.libs", qnn.group(1),
                     wheel.group(1) if wheel else "unknown")


def find_c_compiler() -> str:
    """The C compiler used for the adapter: ``$CC``, else gcc, else cc."""
    for cand in (os.environ.get("CC"), "gcc", "cc"):
        if cand and shutil.which(cand):
            return cand
    raise EmulatorSdkError(
        "no C compiler found to build the QNN ABI adapter for the x86 emulator: install gcc "
        "(Debian/Ubuntu: apt-get install gcc), set $CC, or pass --qnn-sdk to a QNN SDK 2.37")


def _adapter_digest(defines: list[str]) -> str:
    """Digest of what the adapter is built from: its source and the expected versions."""
    h = hashlib.sha256(ADAPTER_SOURCE.read_bytes())
    h.update("\0".join(defines).encode())
    return h.hexdigest()[:12]


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def compile_adapter(compiler: str, defines: list[str], out: Path) -> None:
    """Compile ``qnnhtp_abi_adapter.c`` into ``out`` (a ``libQnnHtp.so``); one-line errors."""
    cmd = [compiler, "-O2", "-shared", "-fPIC", *defines, "-Wl,-soname,libQnnHtp.so",
           "-Wl,-z,nodelete", "-o", str(out), str(ADAPTER_SOURCE), "-ldl", "-lpthread"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EmulatorSdkError(f"building the QNN ABI adapter timed out: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise EmulatorSdkError(f"building the QNN ABI adapter failed ({compiler}): {last[0]}")


def _build(libs: WheelLibs, dest: Path, compiler: str, defines: list[str]) -> None:
    lib_dir = dest / LIB_SUBDIR
    lib_dir.mkdir(parents=True)
    for f in sorted(libs.package_dir.glob("lib*.so")) + sorted(libs.bundled_dir.glob("lib*")):
        if f.name == "libonnxruntime_providers_qnn.so":
            continue
        name = "libQnnHtpReal.so" if f.name == "libQnnHtp.so" else f.name
        _link_or_copy(f, lib_dir / name)
    compile_adapter(compiler, defines, lib_dir / "libQnnHtp.so")


def planned_root(cache_dir: Path, libs: WheelLibs | None = None) -> Path:
    """Where :func:`provision` puts (or has put) the SDK for the installed wheel: cheap, builds
    nothing; raises like :func:`provision` for a wheel whose QAIRT is not known good."""
    libs = libs or find_wheel_libs()
    build = adapter.require_known_good(libs.qairt_version, libs.wheel_version)
    digest = _adapter_digest(adapter.compile_defines(build))
    return cache_dir / "qnn-sdk" / f"qairt-{libs.qairt_version}-ort-{libs.wheel_version}-adapter-{digest}"


def provision(cache_dir: Path, compiler: str | None = None,
              libs: WheelLibs | None = None) -> Path:
    """Return a ready emulator SDK root under ``cache_dir``, building it once if needed.

    ``libs`` defaults to the installed onnxruntime-qnn; its QAIRT must be known good
    (:class:`adapter.UnsupportedQairtError` otherwise, one line naming ``--qnn-sdk``).
    """
    libs = libs or find_wheel_libs()
    build = adapter.require_known_good(libs.qairt_version, libs.wheel_version)
    defines = adapter.compile_defines(build)
    digest = _adapter_digest(defines)
    root = planned_root(cache_dir, libs)
    if (root / MANIFEST).is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root) + ".lock"):
        if (root / MANIFEST).is_file():
            return root
        if root.exists():  # a folder without its manifest was never finished: never use it
            shutil.rmtree(root)
        cc = compiler or find_c_compiler()
        tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=root.parent))
        try:
            start = time.monotonic()
            _build(libs, tmp, cc, defines)
            manifest = {"qairt_version": libs.qairt_version, "source": str(libs.package_dir),
                        "onnxruntime_qnn": libs.wheel_version, "adapter": digest,
                        "core_api": ".".join(map(str, build.core_api)),
                        "htp_api": ".".join(map(str, build.htp_api)),
                        "compiler": cc, "build_s": round(time.monotonic() - start, 3)}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
            os.rename(tmp, root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return root


def is_emulator_sdk(root: Path) -> bool:
    """True for a folder made by :func:`provision`."""
    return (root / MANIFEST).is_file()


def manifest(root: Path) -> dict[str, str]:
    """The provisioning record of an emulator SDK folder."""
    return {str(k): str(v) for k, v in json.loads((root / MANIFEST).read_text()).items()}


def installed_wheel_version() -> str | None:
    """The installed onnxruntime-qnn release (None if it is not installed)."""
    try:
        return find_wheel_libs().wheel_version
    except EmulatorSdkError:
        return None


def verify(root: Path) -> dict[str, str]:
    """Check an emulator SDK folder before use: its QAIRT is known good and it was provisioned
    from the installed onnxruntime-qnn. Returns its manifest; raises :class:`adapter.AdapterError`
    (one line) otherwise."""
    record = manifest(root)
    adapter.require_known_good(record["qairt_version"], record.get("onnxruntime_qnn", ""))
    adapter.check_provenance(root, record.get("onnxruntime_qnn", "unknown"),
                             installed_wheel_version())
    return record
