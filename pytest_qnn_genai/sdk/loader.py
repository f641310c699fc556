"""Choose the QNN SDK (the user's, or the embedded emulator SDK) and make it loadable in-process."""
from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_qnn_genai.sdk import adapter, emulator

HOST_LIBS = ("libQnnHtp.so", "libQnnSystem.so")


class SdkError(RuntimeError):
    """The QNN SDK is missing or unusable (reported as one line)."""


@dataclass(frozen=True)
class QnnSdk:
    """A QNN SDK root and what it is."""

    root: Path
    qairt_version: str
    kind: str  # "emulator" (embedded, with the ABI adapter) | "user"

    @property
    def host_lib_dir(self) -> Path:
        return self.root / emulator.LIB_SUBDIR


def _user_sdk_version(root: Path) -> str:
    sdk_yaml = root / "sdk.yaml"
    if sdk_yaml.is_file():
        m = re.search(r"^\s*version:\s*([\w.]+)", sdk_yaml.read_text(errors="replace"), re.M)
        if m:
            return m.group(1)
    m = re.search(r"(\d+\.\d+\.\d+)", root.name)
    return m.group(1) if m else "unknown"


def check_drivable(version: str, root: Path) -> None:
    """A user's QNN SDK must keep the ``QnnHtpDevice_CustomConfig_t`` layout executorch was
    compiled against (QNN 2.37 headers): the QAIRT releases measured to move its union from byte 4
    to byte 8 (:data:`adapter.KNOWN_GOOD`, the ones the emulator's adapter re-lays out) make
    executorch's device creation fail deep in a build ("unknown custom config socModel 0"). One
    line now, before anything is built."""
    release = ".".join(version.split(".")[:3])
    moved = adapter.KNOWN_GOOD.get(release)
    if moved is None:
        return
    raise SdkError(
        f"--qnn-sdk {root}: QAIRT {version} (core API {moved.core_api[0]}.{moved.core_api[1]}, "
        f"HTP API {moved.htp_api[0]}.{moved.htp_api[1]}) lays out QnnHtpDevice_CustomConfig_t "
        "differently from the QNN 2.37 headers executorch was built against, so executorch "
        "cannot create an HTP device with it (\"unknown custom config socModel 0\"): use a "
        f"QAIRT that keeps the layout (2.37; {', '.join(adapter.KNOWN_BAD)} measured), or leave "
        "--qnn-sdk out for the emulator SDK, which adapts the layout")


def resolve_sdk(sdk_option: str | None, cache_dir: Path, provision: bool = True) -> QnnSdk | None:
    """The SDK named by ``--qnn-sdk``/``$QNN_SDK_ROOT``, else the provisioned emulator SDK.

    With ``provision=False`` nothing is built: an emulator SDK not provisioned yet gives None (the
    cheap checks, a user SDK's libraries and the wheel's QAIRT version, still run).
    """
    given = sdk_option or os.environ.get("QNN_SDK_ROOT") or None
    if given:
        root = Path(given).expanduser().resolve()
        if emulator.is_emulator_sdk(root):
            try:
                record = emulator.verify(root)
            except adapter.AdapterError as e:
                raise SdkError(str(e)) from None
            return QnnSdk(root, record["qairt_version"], "emulator")
        missing = [n for n in HOST_LIBS if not (root / emulator.LIB_SUBDIR / n).is_file()]
        if missing:
            raise SdkError(f"QNN SDK at {root} is missing {emulator.LIB_SUBDIR}/{missing[0]} "
                           "(pass --qnn-sdk or QNN_SDK_ROOT pointing at an SDK root)")
        version = _user_sdk_version(root)
        check_drivable(version, root)
        return QnnSdk(root, version, "user")
    try:
        root = emulator.provision(cache_dir) if provision else emulator.planned_root(cache_dir)
    except (emulator.EmulatorSdkError, adapter.AdapterError) as e:
        raise SdkError(str(e)) from None
    if not emulator.is_emulator_sdk(root):
        return None
    return QnnSdk(root, emulator.manifest(root)["qairt_version"], "emulator")


def _loaded_paths(soname: str) -> set[str]:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return set()
    return {line.split()[-1] for line in maps.splitlines() if line.rstrip().endswith("/" + soname)}


def activate(sdk: QnnSdk) -> None:
    """Point executorch at ``sdk`` for this process and its subprocesses.

    Sets ``QNN_SDK_ROOT`` and ``LD_LIBRARY_PATH`` (for subprocesses) and loads the host libraries
    by absolute path, so that executorch's later ``dlopen("libQnnHtp.so")`` finds them by soname.
    torch is imported first: loading the QAIRT libc++ before torch aborts the process. They are
    loaded RTLD_LOCAL: with RTLD_GLOBAL, QAIRT's bundled libc++ symbols leak into later imports
    (importing sentencepiece, then torchao, then segfaults).
    """
    import torch  # noqa: F401  (order matters, see above)

    if sdk.kind == "emulator":  # the installed onnxruntime-qnn may have changed since resolve_sdk
        try:
            emulator.verify(sdk.root)
        except adapter.AdapterError as e:
            raise SdkError(str(e)) from None
    os.environ["QNN_SDK_ROOT"] = str(sdk.root)
    lib_dir = str(sdk.host_lib_dir)
    ld = os.environ.get("LD_LIBRARY_PATH", "")
    if lib_dir not in ld.split(os.pathsep):
        os.environ["LD_LIBRARY_PATH"] = lib_dir + (os.pathsep + ld if ld else "")
    for name in HOST_LIBS:
        path = sdk.host_lib_dir / name
        other = {p for p in _loaded_paths(name) if Path(p).parent != sdk.host_lib_dir}
        if other:
            raise SdkError(f"{name} was already loaded from {sorted(other)[0]} in this process; "
                           f"cannot switch to {path}")
        ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    if sdk.kind == "emulator":  # the adapter checks the real provider now and says if it patched
        try:
            adapter.check_loaded(sdk.host_lib_dir / "libQnnHtp.so")
        except adapter.AdapterError as e:
            raise SdkError(str(e)) from None


def require_active(what: str) -> Path:
    """The active SDK root (``$QNN_SDK_ROOT``); :class:`SdkError` naming ``what`` needs it if none.

    Without it, executorch's QnnQuantizer, lowering and the legacy flow would try to download an
    SDK; this fails first, in one line.
    """
    root = os.environ.get("QNN_SDK_ROOT")
    if not root:
        raise SdkError(f"{what} needs an active QNN SDK: call "
                       "pytest_qnn_genai.sdk.activate(resolve_sdk(...)) first, or set QNN_SDK_ROOT")
    return Path(root)

