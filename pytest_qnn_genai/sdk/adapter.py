"""The QNN HTP ABI adapter's contract: the QAIRT builds it was written and tested for, how it is
compiled for one of them, and what it reports once loaded.

The emulator SDK is provisioned only from a known-good QAIRT build (:data:`KNOWN_GOOD`); the
adapter (``qnnhtp_abi_adapter.c``) is compiled with that build's core / HTP API versions and
refuses to patch a provider that reports anything else. After loading it, :func:`check_loaded`
asks it (``pytest_qnn_genai_adapter_status``) whether it patched; every failure here is one line
whose way out is ``--qnn-sdk`` (a real QNN SDK 2.37, which needs no adapter).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class QairtBuild:
    """A QAIRT release as shipped by an onnxruntime-qnn wheel, and the API versions its
    ``libQnnHtp.so`` provider reports (``QnnInterface_t.apiVersion``)."""

    qairt: str
    wheel: str  # the onnxruntime-qnn release shipping it
    core_api: tuple[int, int]  # QNN core API major.minor
    htp_api: tuple[int, int]  # HTP backend API major.minor


# Each entry measured on x86_64 with the wheel from the package index: the provider's backend id
# (6) and API versions read back through QnnInterface_getProviders; a 16a8w Linear+ReLU lowered
# for SM8650 and run on the x86 HTP simulator through the adapter (max-abs 3.9e-5 against the QDQ
# reference, context binary reads back SM8650 / v75); and without the adapter the same lowering
# fails with "unknown custom config socModel 0" (the union at byte 8).
KNOWN_GOOD: dict[str, QairtBuild] = {b.qairt: b for b in (
    QairtBuild("2.47.0", "2.3.0", (2, 36), (5, 47)),
    QairtBuild("2.48.40", "2.4.0", (2, 37), (5, 48)),
    QairtBuild("2.50.40", "2.6.0", (2, 39), (5, 50)),
    QairtBuild("2.51.0", "2.7.0", (2, 40), (5, 51)),
)}

# The emulator's QAIRT (the pinned onnxruntime-qnn): the newest, 2.51.0, refuses SmolLM2-135M's
# programs in its x86 HTP graph prepare ("could not create op: q::ConvLayer_s1.opt", llama.py's and
# the staged flow's alike) where 2.47.0 prepares them and runs them to the same answer as
# transformers; the toys' programs are the same on both but for the context binary's size.
DEFAULT = KNOWN_GOOD["2.47.0"]

# Measured the other way round: these keep the old QnnHtpDevice_CustomConfig_t layout, so the
# adapter's re-layout breaks device creation ("socModel 0"), while the bare library works.
KNOWN_BAD: dict[str, str] = {
    "2.49.40": "onnxruntime-qnn 2.5.0, core API 2.38 / HTP API 5.49: it keeps the old device "
               "config layout",
}


class AdapterError(RuntimeError):
    """The emulator SDK's adapter cannot be trusted with this QAIRT build (one line)."""


class UnsupportedQairtError(AdapterError):
    """A QAIRT release the adapter was not written or tested for."""


class ProvenanceError(AdapterError):
    """An emulator SDK folder provisioned from another onnxruntime-qnn than the installed one."""


class AdapterStatusError(AdapterError):
    """The loaded adapter did not patch the QNN provider (wrong versions, read-only table...)."""


WAY_OUT = "or pass --qnn-sdk (or set QNN_SDK_ROOT) to a QNN SDK 2.37, which needs no adapter"


def _known() -> str:
    return ", ".join(f"QAIRT {b.qairt} (onnxruntime-qnn {b.wheel})" for b in KNOWN_GOOD.values())


def require_known_good(qairt: str, wheel: str = "") -> QairtBuild:
    """The known-good entry for ``qairt``; :class:`UnsupportedQairtError` otherwise."""
    build = KNOWN_GOOD.get(qairt)
    if build is None:
        source = f"onnxruntime-qnn {wheel} ships QAIRT {qairt}" if wheel else f"QAIRT {qairt}"
        why = (f"is known not to work with ({KNOWN_BAD[qairt]})" if qairt in KNOWN_BAD
               else "was not written or tested for")
        raise UnsupportedQairtError(
            f"{source}, which the x86 emulator's QNN ABI adapter {why}; known good: {_known()}: "
            f"install onnxruntime-qnn=={DEFAULT.wheel}, {WAY_OUT}")
    return build


def compile_defines(build: QairtBuild) -> list[str]:
    """The ``-D`` flags that tell the adapter which provider versions it may patch."""
    return [f"-DQNN_GENAI_EXPECT_CORE_MAJOR={build.core_api[0]}",
            f"-DQNN_GENAI_EXPECT_CORE_MINOR={build.core_api[1]}",
            f"-DQNN_GENAI_EXPECT_BACKEND_MAJOR={build.htp_api[0]}",
            f"-DQNN_GENAI_EXPECT_BACKEND_MINOR={build.htp_api[1]}",
            f'-DQNN_GENAI_EXPECT_QAIRT="{build.qairt}"']


def check_provenance(root: Path, recorded_wheel: str, installed_wheel: str | None) -> None:
    """An emulator SDK folder must come from the installed onnxruntime-qnn (when one is)."""
    if installed_wheel is not None and recorded_wheel != installed_wheel:
        raise ProvenanceError(
            f"emulator QNN SDK {root} was provisioned from onnxruntime-qnn {recorded_wheel}, but "
            f"{installed_wheel} is installed: drop --qnn-sdk/QNN_SDK_ROOT to provision one from "
            f"the installed wheel, reinstall onnxruntime-qnn=={recorded_wheel}, {WAY_OUT}")


# pytest_qnn_genai_adapter_status() codes (the enum in qnnhtp_abi_adapter.c)
STATUS_OK = 0
STATUS_OUTDATED = -1  # not from the adapter: it has no status function at all
STATUS_NAMES = {0: "ok", 1: "not called", 2: "no real library", 3: "providers failed",
                4: "backend mismatch", 5: "API version mismatch", 6: "mprotect failed",
                7: "bad interface table"}


def adapter_status(lib: ctypes.CDLL) -> tuple[int, str]:
    """The loaded adapter's status code and message (see ``qnnhtp_abi_adapter.c``)."""
    try:
        fn = lib.pytest_qnn_genai_adapter_status
    except AttributeError:
        return STATUS_OUTDATED, ("it predates status reporting (an emulator SDK folder made by an "
                                 "older pytest-qnn-genai)")
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    message = ctypes.c_char_p()
    code = fn(ctypes.byref(message))
    return code, (message.value or b"").decode(errors="replace")


def check_loaded(adapter_path: Path) -> str:
    """Have the adapter at ``adapter_path`` check and patch the real provider now; its message.

    ``QnnInterface_getProviders`` is what executorch calls first anyway; calling it here makes a
    refusal an activation error instead of a device error deep inside lowering. The library is
    the one already loaded by soname (same handle), so the patched state is the one executorch
    will see. Raises :class:`AdapterStatusError` (one line) unless the provider was patched.
    """
    lib = ctypes.CDLL(str(adapter_path), mode=ctypes.RTLD_LOCAL)
    get_providers = lib.QnnInterface_getProviders
    get_providers.restype = ctypes.c_uint64
    get_providers.argtypes = [ctypes.POINTER(ctypes.POINTER(ctypes.c_void_p)),
                              ctypes.POINTER(ctypes.c_uint32)]
    providers = ctypes.POINTER(ctypes.c_void_p)()
    count = ctypes.c_uint32()
    get_providers(ctypes.byref(providers), ctypes.byref(count))
    code, message = adapter_status(lib)
    if code == STATUS_OUTDATED:
        raise AdapterStatusError(
            f"QNN ABI adapter {adapter_path}: {message}: drop --qnn-sdk/QNN_SDK_ROOT to provision "
            f"a fresh emulator SDK, {WAY_OUT}")
    if code != STATUS_OK:
        what = STATUS_NAMES.get(code, f"status {code}")
        raise AdapterStatusError(
            f"QNN ABI adapter {adapter_path} ({what}): {message}: install a known-good "
            f"onnxruntime-qnn ({_known()}), {WAY_OUT}")
    return message
