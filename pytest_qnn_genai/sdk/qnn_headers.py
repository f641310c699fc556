"""ctypes mirrors of the public QNN headers that describe a context binary.

They follow the public QNN headers as mirrored in the public repository chuzcjoe/qnnx
(``include/QNN/``: ``QnnTypes.h``, ``QnnDevice.h``, ``HTP/QnnHtpDevice.h``,
``HTP/QnnHtpSystemContext.h``, ``System/QnnSystemContext.h``, ``System/QnnSystemInterface.h``;
``QnnSdkBuildId.h`` there says v2.43.0). QNN only appends fields to these versioned structs, and
only prefixes are read. Used by :mod:`pytest_qnn_genai.sdk.context_binary`.
"""
from __future__ import annotations

import ctypes


class QnnVersion(ctypes.Structure):
    """QnnTypes.h ``Qnn_Version_t`` {u32 major, minor, patch}: 12 bytes."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("patch", ctypes.c_uint32)]

    def tuple(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)


class _SystemContextTable(ctypes.Structure):
    """QnnSystemInterface.h ``QNN_SYSTEM_INTERFACE_VER_TYPE``: the first four entries
    (systemContextCreate, systemContextGetBinaryInfo, systemContextGetMetaData,
    systemContextFree); later entries (tensor, log, dlc, profile) are not used."""

    _fields_ = [("create", ctypes.c_void_p), ("getBinaryInfo", ctypes.c_void_p),
                ("getMetaData", ctypes.c_void_p), ("free", ctypes.c_void_p)]


class QnnSystemInterface(ctypes.Structure):
    """QnnSystemInterface.h ``QnnSystemInterface_t``: u32 backendId @0, const char* providerName
    @8, Qnn_Version_t systemApiVersion @16, then the function table (pointer aligned) @32."""

    _fields_ = [("backendId", ctypes.c_uint32), ("providerName", ctypes.c_char_p),
                ("systemApiVersion", QnnVersion), ("table", _SystemContextTable)]


class _GraphInfoPrefix(ctypes.Structure):
    """QnnSystemContext.h ``QnnSystemContext_GraphInfoV1/V2/V3_t`` all start with
    ``const char* graphName``, u32 numGraphInputs, Qnn_Tensor_t* graphInputs, u32
    numGraphOutputs, Qnn_Tensor_t* graphOutputs."""

    _fields_ = [("graphName", ctypes.c_char_p), ("numGraphInputs", ctypes.c_uint32),
                ("graphInputs", ctypes.c_void_p), ("numGraphOutputs", ctypes.c_uint32),
                ("graphOutputs", ctypes.c_void_p)]


class _GraphInfoV3(ctypes.Structure):
    """QnnSystemContext.h ``QnnSystemContext_GraphInfoV3_t`` (the largest known member of the
    GraphInfo union: 80 bytes), used only to get the array stride right."""

    _fields_ = _GraphInfoPrefix._fields_ + [
        ("numUpdateableTensors", ctypes.c_uint32), ("updateableTensors", ctypes.c_void_p),
        ("graphBlobInfoSize", ctypes.c_uint32), ("graphBlobInfo", ctypes.c_void_p),
        ("startOpIndex", ctypes.c_uint32), ("endOpIndex", ctypes.c_uint32)]


class _GraphInfoUnion(ctypes.Union):
    _fields_ = [("prefix", _GraphInfoPrefix), ("v3", _GraphInfoV3)]


class QnnSystemContextGraphInfo(ctypes.Structure):
    """QnnSystemContext.h ``QnnSystemContext_GraphInfo_t``: version (enum, 1..3) @0, union @8."""

    _fields_ = [("version", ctypes.c_uint32), ("u", _GraphInfoUnion)]


GRAPH_INFO_VERSIONS = (1, 2, 3)  # QnnSystemContext_GraphInfoVersion_t known to these headers


class QnnHtpOnChipDeviceInfo(ctypes.Structure):
    """QnnHtpDevice.h ``QnnHtpDevice_OnChipDeviceInfoExtension_t``: size_t vtcmSize (MB) @0,
    u32 socModel @8, bool signedPdSupport @12, bool dlbcSupport @13, QnnHtpDevice_Arch_t arch
    @16 (68, 69, 73, 75, 79, 81, ...)."""

    _fields_ = [("vtcmSize", ctypes.c_size_t), ("socModel", ctypes.c_uint32),
                ("signedPdSupport", ctypes.c_bool), ("dlbcSupport", ctypes.c_bool),
                ("arch", ctypes.c_uint32)]


class QnnHtpDeviceInfoExtension(ctypes.Structure):
    """QnnHtpDevice.h ``QnnHtpDevice_DeviceInfoExtension_t``: QnnHtpDevice_DeviceType_t devType
    @0 (0 = on chip), union {onChipDevice} @8."""

    _fields_ = [("devType", ctypes.c_uint32), ("onChipDevice", QnnHtpOnChipDeviceInfo)]


class QnnHardwareDeviceInfoV1(ctypes.Structure):
    """QnnDevice.h ``QnnDevice_HardwareDeviceInfoV1_t``: u32 deviceId, u32 deviceType, u32
    numCores, QnnDevice_CoreInfo_t* cores, QnnDevice_DeviceInfoExtension_t deviceInfoExtension
    (a pointer, for HTP to ``QnnHtpDevice_DeviceInfoExtension_t``)."""

    _fields_ = [("deviceId", ctypes.c_uint32), ("deviceType", ctypes.c_uint32),
                ("numCores", ctypes.c_uint32), ("cores", ctypes.c_void_p),
                ("deviceInfoExtension", ctypes.POINTER(QnnHtpDeviceInfoExtension))]


class QnnHardwareDeviceInfo(ctypes.Structure):
    """QnnDevice.h ``QnnDevice_HardwareDeviceInfo_t``: version (1) @0, union {v1} @8."""

    _fields_ = [("version", ctypes.c_uint32), ("v1", QnnHardwareDeviceInfoV1)]


class QnnPlatformInfoV1(ctypes.Structure):
    """QnnDevice.h ``QnnDevice_PlatformInfoV1_t``: u32 numHwDevices, hwDevices pointer."""

    _fields_ = [("numHwDevices", ctypes.c_uint32),
                ("hwDevices", ctypes.POINTER(QnnHardwareDeviceInfo))]


class QnnPlatformInfo(ctypes.Structure):
    """QnnDevice.h ``QnnDevice_PlatformInfo_t``: version (1) @0, union {v1} @8."""

    _fields_ = [("version", ctypes.c_uint32), ("v1", QnnPlatformInfoV1)]


_Field = tuple[str, type[ctypes.Structure] | type[ctypes.c_uint32] | type[ctypes.c_char_p]]
_BINARY_INFO_HEAD: list[_Field] = [  # common to QnnSystemContext_BinaryInfoV1/V2/V3_t
    ("backendId", ctypes.c_uint32), ("buildId", ctypes.c_char_p),
    ("coreApiVersion", QnnVersion), ("backendApiVersion", QnnVersion),
    ("socVersion", ctypes.c_char_p)]


class BinaryInfoV1(ctypes.Structure):
    """QnnSystemContext.h ``QnnSystemContext_BinaryInfoV1_t``."""

    _fields_ = _BINARY_INFO_HEAD + [
        ("hwInfoBlobVersion", QnnVersion), ("contextBlobVersion", QnnVersion),
        ("hwInfoBlobSize", ctypes.c_uint32), ("hwInfoBlob", ctypes.c_void_p),
        ("contextBlobSize", ctypes.c_uint64), ("numContextTensors", ctypes.c_uint32),
        ("contextTensors", ctypes.c_void_p), ("numGraphs", ctypes.c_uint32),
        ("graphs", ctypes.POINTER(QnnSystemContextGraphInfo))]


class BinaryInfoV2(ctypes.Structure):
    """QnnSystemContext.h ``QnnSystemContext_BinaryInfoV2_t``: V1 + platformInfo."""

    _fields_ = BinaryInfoV1._fields_ + [("platformInfo", ctypes.POINTER(QnnPlatformInfo))]


class BinaryInfoV3(ctypes.Structure):
    """QnnSystemContext.h ``QnnSystemContext_BinaryInfoV3_t``: drops the hw info blob fields,
    adds platformInfo, context metadata and an integer ``socModel``."""

    _fields_ = _BINARY_INFO_HEAD + [
        ("contextBlobVersion", QnnVersion), ("contextBlobSize", ctypes.c_uint64),
        ("numContextTensors", ctypes.c_uint32), ("contextTensors", ctypes.c_void_p),
        ("numGraphs", ctypes.c_uint32), ("graphs", ctypes.POINTER(QnnSystemContextGraphInfo)),
        ("platformInfo", ctypes.POINTER(QnnPlatformInfo)),
        ("contextMetadataSize", ctypes.c_uint32), ("contextMetadata", ctypes.c_void_p),
        ("socModel", ctypes.c_uint32)]


class _BinaryInfoUnion(ctypes.Union):
    _fields_ = [("v1", BinaryInfoV1), ("v2", BinaryInfoV2), ("v3", BinaryInfoV3)]


class QnnSystemContextBinaryInfo(ctypes.Structure):
    """QnnSystemContext.h ``QnnSystemContext_BinaryInfo_t``: version (1..3) @0, union @8."""

    _fields_ = [("version", ctypes.c_uint32), ("u", _BinaryInfoUnion)]


class HtpContextBlobInfo(ctypes.Structure):
    """QnnHtpSystemContext.h ``QnnHtpSystemContext_ContextBlobInfo_t``: version (1) @0, then
    ``QnnHtpSystemContext_ContextBlobInfoV1_t`` {u32 dspArch} @4 (the HTP backend's
    context metadata)."""

    _fields_ = [("version", ctypes.c_uint32), ("dspArch", ctypes.c_uint32)]


ErrorHandle = ctypes.c_uint64  # QnnCommon.h Qnn_ErrorHandle_t
CREATE_FN = ctypes.CFUNCTYPE(ErrorHandle, ctypes.POINTER(ctypes.c_void_p))
GET_BINARY_INFO_FN = ctypes.CFUNCTYPE(
    ErrorHandle, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
    ctypes.POINTER(ctypes.POINTER(QnnSystemContextBinaryInfo)), ctypes.POINTER(ctypes.c_uint64))
FREE_FN = ctypes.CFUNCTYPE(ErrorHandle, ctypes.c_void_p)
