"""Read the QNN context binary back out of a built ``.pte`` and let QNN describe it.

How the binary sits in the ``.pte``: every ``QnnBackend`` delegate of an execution plan has a
*processed* blob (``program.backend_delegate_data[delegate.processed.index]`` once
``deserialize_pte_binary`` has folded the segments back in). ExecuTorch wraps the context binary
in its "custom context protocol" (executorch ``backends/qualcomm/runtime/backends/
QnnCustomProtocol.h``/``.cpp``, class ``QnnContextCustomProtocol``)::

    u32 magic 0x5678ABCD | i64 signature | u64 context_binary_size | zero padding | binary

All little endian. The binary starts at ``QNN_CTX_BIN_ALIGNMENT`` = 256 (executorch 1.5.1:
``PyQnnManagerAdaptor.GetQNNCtxBinAlignment()`` answers 256; measured: bytes 20..255 are zero and
``PyQnnManagerAdaptor.StripProtocol`` returns exactly ``blob[256:256 + size]``); older executorch
releases put it right after the 20-byte header, which is accepted too.

QNN's own system library then describes it: ``libQnnSystem.so`` exports only
``QnnSystemInterface_getProviders``; its function table gives ``systemContextCreate``,
``systemContextGetBinaryInfo`` and ``systemContextFree``. The ctypes structures below follow the
public QNN headers as mirrored in the public repository chuzcjoe/qnnx (``include/QNN/``:
``QnnTypes.h``, ``QnnDevice.h``, ``HTP/QnnHtpDevice.h``, ``HTP/QnnHtpSystemContext.h``,
``System/QnnSystemContext.h``, ``System/QnnSystemInterface.h``; ``QnnSdkBuildId.h`` there says
v2.43.0). QNN only appends fields to these versioned structs, and only prefixes are read.

Measured with QAIRT 2.51.0 on binaries lowered here: ``BinaryInfo`` version 3, ``socModel`` 57
(SM8650) / 69 (SM8750), ``socVersion`` empty, no hardware info blob (V3 dropped it); the platform
info holds one device with one core and a NULL device extension, so the HTP arch comes from the
HTP context metadata (``QnnHtpSystemContext_ContextBlobInfo_t``, version 1, ``dspArch`` 75 / 79);
one ``GraphInfo`` V3 named after the method ("forward").
"""
from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.sdk.emulator import LIB_SUBDIR
from pytest_qnn_genai.sdk.qnn_headers import (
    CREATE_FN,
    FREE_FN,
    GET_BINARY_INFO_FN,
    GRAPH_INFO_VERSIONS,
    ErrorHandle,
    HtpContextBlobInfo,
    QnnHtpOnChipDeviceInfo,
    QnnPlatformInfo,
    QnnSystemContextBinaryInfo,
    QnnSystemContextGraphInfo,
    QnnSystemInterface,
)

if TYPE_CHECKING:
    from pytest_qnn_genai.targets import SocSpec

# executorch backends/qualcomm/runtime/backends/QnnCustomProtocol.h
CONTEXT_PROTOCOL_MAGIC = 0x5678ABCD
_PROTOCOL_HEADER = struct.Struct("<IqQ")  # magic, signature, context_binary_size (20 bytes)
CONTEXT_BINARY_ALIGNMENT = 256  # QNN_CTX_BIN_ALIGNMENT

# QnnCommon.h: "QNN_BACKEND_ID_HTP 6" (the list of known backend ids); QnnHtpCommon.h defines it.
BACKEND_NAMES = {1: "reference", 2: "saver", 3: "cpu", 4: "gpu", 5: "dsp", 6: "htp"}
QNN_BACKEND_ID_HTP = 6


class ContextBinaryError(RuntimeError):
    """A ``.pte`` without a readable QNN context binary, or QNN could not describe it (one line)."""


class ContextBinaryMismatch(AssertionError):
    """A context binary built for another SoC / HTP arch / backend than expected (one line)."""


# --- what a context binary says about itself ---------------------------------------------------

@dataclass(frozen=True)
class ContextBinaryInfo:
    """What QNN's system library reports about one context binary."""

    backend_id: int
    build_id: str
    core_api_version: tuple[int, int, int]
    backend_api_version: tuple[int, int, int]
    soc_version: str          # free text from the binary, e.g. "" on the simulator build
    soc_model: int | None     # QNN SoC model number (executorch's QcomChipset value)
    htp_arch: int | None      # 75 for v75: the platform info's HTP device arch, else dsp_arch
    dsp_arch: int | None      # the HTP context metadata's dspArch (same numbering), if present
    vtcm_mb: int | None
    graph_names: tuple[str, ...]
    binary_info_version: int
    size: int
    method: str = ""          # the .pte execution plan the binary came from
    delegate_index: int = -1

    @property
    def backend(self) -> str:
        return BACKEND_NAMES.get(self.backend_id, f"backend-{self.backend_id}")

    @property
    def soc_name(self) -> str | None:
        """The executorch ``QcomChipset`` name for :attr:`soc_model` (None if unknown)."""
        return soc_name(self.soc_model)

    @property
    def qnn_build(self) -> str:
        """The QAIRT release the binary was built with, e.g. "2.51.0" (from the build id)."""
        bid = self.build_id.lstrip("v")
        return ".".join(bid.split(".")[:3]) if bid else ""

    def describe(self) -> str:
        arch = f"v{self.htp_arch}" if self.htp_arch else "unknown arch"
        return (f"{self.method or 'binary'}#{self.delegate_index}: {self.backend} "
                f"{self.soc_name or self.soc_model} ({arch}), QNN {self.build_id}, "
                f"graphs {', '.join(self.graph_names) or '-'}")


def soc_name(model: int | None) -> str | None:
    if model is None:
        return None
    try:
        from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    except ImportError:  # pragma: no cover - executorch is a hard dependency
        return None
    try:
        return str(QcomChipset(model).name)
    except ValueError:
        return None


@dataclass(frozen=True)
class DelegateBlob:
    """One ``QnnBackend`` delegate of a ``.pte`` and the context binary inside it."""

    method: str
    index: int
    binary: bytes = field(repr=False)


def strip_protocol(processed: bytes) -> bytes:
    """The raw QNN context binary inside a QnnBackend processed blob (see module docstring)."""
    if len(processed) < _PROTOCOL_HEADER.size:
        raise ContextBinaryError(f"QnnBackend blob of {len(processed)} bytes has no header")
    magic, _signature, size = _PROTOCOL_HEADER.unpack_from(processed, 0)
    if magic != CONTEXT_PROTOCOL_MAGIC:
        raise ContextBinaryError(
            f"QnnBackend blob starts with 0x{magic:08x}, not the context protocol magic "
            f"0x{CONTEXT_PROTOCOL_MAGIC:08x} (a QCIR/DLC blob, or an unknown executorch layout)")
    for offset in (CONTEXT_BINARY_ALIGNMENT, _PROTOCOL_HEADER.size):
        if offset + size <= len(processed) and not any(processed[_PROTOCOL_HEADER.size:offset]):
            return bytes(processed[offset:offset + size])
    raise ContextBinaryError(f"QnnBackend blob of {len(processed)} bytes cannot hold the "
                             f"{size}-byte context binary its header announces")


def extract(pte: Path | bytes) -> list[DelegateBlob]:
    """Every QnnBackend context binary of a ``.pte`` (path or bytes), in plan/delegate order."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    data = pte if isinstance(pte, (bytes, bytearray)) else Path(pte).read_bytes()
    program = deserialize_pte_binary(bytes(data)).program
    out = []
    for plan in program.execution_plan:
        for i, delegate in enumerate(plan.delegates):
            if delegate.id != "QnnBackend":
                continue
            processed = program.backend_delegate_data[delegate.processed.index].data
            out.append(DelegateBlob(plan.name, i, strip_protocol(processed)))
    return out


STAMP = slice(4, 12)  # the protocol header's i64 signature: the build's time in nanoseconds


def build_stamps(pte: bytes) -> list[int]:
    """The file offsets of every QnnBackend blob's build stamp in ``pte`` (its context protocol
    header's ``signature``: ExecuTorch writes the build's wall time there, in nanoseconds, so two
    builds of one program differ in these 8 bytes and nowhere else)."""
    from executorch.exir._serialize._program import (
        DataLocation,
        _flatbuffer_to_program,
        _get_extended_header,
    )

    header = _get_extended_header(pte)
    if header is None or not header.is_valid():
        return []
    try:
        program = _flatbuffer_to_program(pte[:header.program_size])
    except Exception:  # noqa: BLE001 - not a program: nothing to zero (the comparison says so)
        return []
    out = []
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            if delegate.id != "QnnBackend" or delegate.processed.location != DataLocation.SEGMENT:
                continue
            start = header.segment_base_offset + program.segments[delegate.processed.index].offset
            magic = int.from_bytes(pte[start:start + 4], "little")
            if magic == CONTEXT_PROTOCOL_MAGIC and start + STAMP.start not in out:
                out.append(start + STAMP.start)
    return out


def without_build_stamps(pte: bytes) -> bytes:
    """``pte`` with every QnnBackend build stamp zeroed: the program's bytes, whenever built."""
    data = bytearray(pte)
    for offset in build_stamps(pte):
        data[offset:offset + STAMP.stop - STAMP.start] = bytes(STAMP.stop - STAMP.start)
    return bytes(data)


def program_sha256(pte: Path) -> str:
    """The sha256 of ``pte``'s bytes without its build stamps: equal for two builds of one
    program, different for any other byte."""
    import hashlib

    return hashlib.sha256(without_build_stamps(Path(pte).read_bytes())).hexdigest()


# --- libQnnSystem -------------------------------------------------------------------------------

def default_lib_dir() -> Path:
    """The host library folder of the QNN SDK active in this process (``QNN_SDK_ROOT``)."""
    root = os.environ.get("QNN_SDK_ROOT")
    if not root:
        raise ContextBinaryError("no QNN SDK active: call pytest_qnn_genai.sdk.activate(...) "
                                 "or pass lib_dir to the folder holding libQnnSystem.so")
    return Path(root) / LIB_SUBDIR


_SYSTEM_CACHE: dict[str, QnnSystemInterface] = {}


def _system_interface(lib_dir: Path) -> QnnSystemInterface:
    path = str(Path(lib_dir) / "libQnnSystem.so")
    if path in _SYSTEM_CACHE:
        return _SYSTEM_CACHE[path]
    import torch  # noqa: F401  (QAIRT's bundled libc++ must load after torch's: see sdk.loader)

    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    except OSError as e:
        raise ContextBinaryError(f"cannot load {path}: {e}") from None
    get_providers = lib.QnnSystemInterface_getProviders
    get_providers.restype = ErrorHandle
    get_providers.argtypes = [ctypes.POINTER(ctypes.POINTER(ctypes.POINTER(QnnSystemInterface))),
                              ctypes.POINTER(ctypes.c_uint32)]
    providers = ctypes.POINTER(ctypes.POINTER(QnnSystemInterface))()
    count = ctypes.c_uint32()
    rc = get_providers(ctypes.byref(providers), ctypes.byref(count))
    if rc != 0 or count.value == 0:
        raise ContextBinaryError(f"{path}: QnnSystemInterface_getProviders failed (error {rc}, "
                                 f"{count.value} providers)")
    iface: QnnSystemInterface = providers[0].contents
    if not (iface.table.create and iface.table.getBinaryInfo and iface.table.free):
        raise ContextBinaryError(f"{path}: the system interface has no context functions")
    _SYSTEM_CACHE[path] = iface
    return iface


def _htp_device(platform: ctypes._Pointer[QnnPlatformInfo] | None,
                ) -> QnnHtpOnChipDeviceInfo | None:
    if not platform or platform.contents.version != 1:
        return None
    devices = platform.contents.v1
    if devices.numHwDevices < 1 or not devices.hwDevices:
        return None
    dev = devices.hwDevices[0]
    if dev.version != 1 or not dev.v1.deviceInfoExtension:
        return None
    ext = dev.v1.deviceInfoExtension.contents
    return ext.onChipDevice if ext.devType == 0 else None


def _graph_names(count: int, graphs: ctypes._Pointer[QnnSystemContextGraphInfo],
                 ) -> tuple[str, ...]:
    names = []
    for i in range(count):
        g = graphs[i]
        if g.version not in GRAPH_INFO_VERSIONS:  # unknown union size: the stride is unknown
            if i == 0:
                names.append((g.u.prefix.graphName or b"").decode())
            break
        names.append((g.u.prefix.graphName or b"").decode())
    return tuple(names)


def describe(binary: bytes, lib_dir: Path | None = None, method: str = "",
             delegate_index: int = -1) -> ContextBinaryInfo:
    """Have ``libQnnSystem.so`` (in ``lib_dir``, default: the active SDK) describe a binary."""
    iface = _system_interface(lib_dir or default_lib_dir())
    create = CREATE_FN(iface.table.create)
    get_info = GET_BINARY_INFO_FN(iface.table.getBinaryInfo)
    free = FREE_FN(iface.table.free)
    handle = ctypes.c_void_p()
    rc = create(ctypes.byref(handle))
    if rc != 0:
        raise ContextBinaryError(f"QnnSystemContext_create failed (error {rc & 0xFFFF})")
    buf = ctypes.create_string_buffer(bytes(binary), len(binary))
    try:
        info_p = ctypes.POINTER(QnnSystemContextBinaryInfo)()
        info_size = ctypes.c_uint64()
        rc = get_info(handle, ctypes.cast(buf, ctypes.c_void_p), len(binary),
                      ctypes.byref(info_p), ctypes.byref(info_size))
        if rc != 0 or not info_p:
            raise ContextBinaryError(
                f"QnnSystemContext_getBinaryInfo rejected the {len(binary)}-byte binary "
                f"(error {rc & 0xFFFF}): not a QNN context binary this QAIRT can read")
        return _convert(info_p.contents, len(binary), method, delegate_index)
    finally:
        free(handle)


def _convert(info: QnnSystemContextBinaryInfo, size: int, method: str,
             delegate_index: int) -> ContextBinaryInfo:
    version = info.version
    if version == 1:
        b = info.u.v1
        platform = None
    elif version == 2:
        b = info.u.v2
        platform = b.platformInfo
    elif version == 3:
        b = info.u.v3
        platform = b.platformInfo
    else:
        raise ContextBinaryError(f"unknown QnnSystemContext_BinaryInfo version {version}")
    device = _htp_device(platform)
    soc_model = (b.socModel or None) if version == 3 else None
    if soc_model is None and device is not None and device.socModel:
        soc_model = device.socModel
    dsp_arch = None
    if version == 3 and b.contextMetadata and b.contextMetadataSize >= ctypes.sizeof(
            HtpContextBlobInfo) and b.backendId == QNN_BACKEND_ID_HTP:
        meta = ctypes.cast(b.contextMetadata, ctypes.POINTER(HtpContextBlobInfo)).contents
        dsp_arch = meta.dspArch if meta.version == 1 and meta.dspArch else None
    # QAIRT 2.51 leaves the device's HTP extension NULL in a binary's platform info (measured:
    # one hardware device, one core, deviceInfoExtension NULL); the arch is then the context
    # metadata's dspArch.
    htp_arch = device.arch if device is not None and device.arch else dsp_arch
    return ContextBinaryInfo(
        backend_id=b.backendId, build_id=(b.buildId or b"").decode(errors="replace"),
        core_api_version=b.coreApiVersion.tuple(),
        backend_api_version=b.backendApiVersion.tuple(),
        soc_version=(b.socVersion or b"").decode(errors="replace"),
        soc_model=soc_model, htp_arch=htp_arch, dsp_arch=dsp_arch,
        vtcm_mb=int(device.vtcmSize) if device is not None else None,
        graph_names=_graph_names(b.numGraphs, b.graphs) if b.graphs else (),
        binary_info_version=version, size=size, method=method, delegate_index=delegate_index)


def describe_pte(pte: Path | bytes, lib_dir: Path | None = None) -> tuple[ContextBinaryInfo, ...]:
    """Describe every QnnBackend context binary of a ``.pte``."""
    blobs = extract(pte)
    if not blobs:
        raise ContextBinaryError(f"{pte if isinstance(pte, Path) else 'the program'} has no "
                                 "QnnBackend delegate")
    return tuple(describe(b.binary, lib_dir, b.method, b.index) for b in blobs)


def check_target(infos: Sequence[ContextBinaryInfo], soc: SocSpec, backend: str = "htp") -> None:
    """Raise :class:`ContextBinaryMismatch` (one line) unless every binary targets ``soc``.

    ``soc`` is a :class:`pytest_qnn_genai.targets.SocSpec` (its name is the QcomChipset name and
    its ``htp_arch_number`` the expected HTP arch).
    """
    for info in infos:
        problems = []
        if info.backend != backend:
            problems.append(f"backend {info.backend}, expected {backend}")
        if info.soc_name != soc.name:
            problems.append(f"SoC {info.soc_name or info.soc_model}, expected {soc.name}")
        if backend == "htp" and info.htp_arch != soc.htp_arch_number:
            got = f"v{info.htp_arch}" if info.htp_arch else "unknown"
            problems.append(f"HTP arch {got}, expected {soc.htp_arch}")
        if problems:
            raise ContextBinaryMismatch(
                f"context binary {info.method or ''}#{info.delegate_index} "
                f"(QNN {info.build_id}): {'; '.join(problems)}")
