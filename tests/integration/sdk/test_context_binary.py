"""A lowered .pte carries a QNN context binary for the SoC it was lowered for, and QNN says so.

A 16a8w Linear is lowered (QnnQuantizer + the QNN partitioner, on the emulator SDK) once for
SM8650 and once for SM8750; each .pte's context binary is read back and described by QAIRT's own
libQnnSystem.so: the SoC model and HTP arch must be the target's, and checking one against the
other target's expectations must fail.
"""
from __future__ import annotations

import ctypes
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pytest_qnn_genai.sdk import adapter
from pytest_qnn_genai.sdk import context_binary as cb
from pytest_qnn_genai.targets import soc

SOCS = ("SM8650", "SM8750")


def _lower_linear(soc_name: str, out: Path) -> Path:
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
        to_edge_transform_and_lower_to_qnn,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    chipset = soc(soc_name).chipset
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    example = (torch.randn(1, 16),)
    quantizer = QnnQuantizer(soc_model=chipset)
    quantizer.set_default_quant_config(QuantDtype.use_16a8w, is_linear_per_channel=True)
    prepared = prepare_pt2e(torch.export.export(module, example, strict=True).module(), quantizer)
    prepared(*example)
    specs = generate_qnn_executorch_compiler_spec(
        soc_model=chipset, backend_options=generate_htp_compiler_spec(use_fp16=False))
    program = to_edge_transform_and_lower_to_qnn(convert_pt2e(prepared), example, specs)
    out.write_bytes(program.to_executorch().buffer)
    return out


@pytest.fixture(scope="module")
def ptes(qnn_sdk, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny .pte per SoC, lowered one after the other (one QNN compile at a time)."""
    d = tmp_path_factory.mktemp("ctx-bin")
    return {name: _lower_linear(name, d / f"linear_{name}.pte") for name in SOCS}


@pytest.mark.parametrize("soc_name", SOCS)
def test_context_binary_targets_the_lowered_soc(ptes: dict[str, Path], qnn_sdk,
                                                soc_name: str) -> None:
    infos = cb.describe_pte(ptes[soc_name])
    assert len(infos) == 1  # every op delegated: one QnnBackend delegate, one context binary
    info = infos[0]
    target = soc(soc_name)
    assert (info.backend, info.backend_id) == ("htp", 6)
    assert info.soc_name == soc_name and info.soc_model == int(target.chipset)
    assert info.htp_arch == target.htp_arch_number  # 75 / 79
    assert info.graph_names == ("forward",) and info.method == "forward"
    assert info.qnn_build == qnn_sdk.qairt_version  # built by the active QAIRT
    if qnn_sdk.kind == "emulator":
        build = adapter.KNOWN_GOOD[qnn_sdk.qairt_version]
        assert info.core_api_version[:2] == build.core_api
        assert info.backend_api_version[:2] == build.htp_api
    cb.check_target(infos, target)  # passes


def test_check_fails_against_the_other_soc(ptes: dict[str, Path]) -> None:
    sm8650 = cb.describe_pte(ptes["SM8650"])
    with pytest.raises(cb.ContextBinaryMismatch) as err:
        cb.check_target(sm8650, soc("SM8750"))
    text = str(err.value)
    assert "SoC SM8650, expected SM8750" in text and "HTP arch v75, expected v79" in text
    assert "\n" not in text
    with pytest.raises(cb.ContextBinaryMismatch, match="HTP arch v79, expected v75"):
        cb.check_target(cb.describe_pte(ptes["SM8750"]), soc("SM8650"))
    with pytest.raises(cb.ContextBinaryMismatch, match="backend htp, expected gpu"):
        cb.check_target(sm8650, soc("SM8650"), backend="gpu")


def test_extraction_agrees_with_executorch(ptes: dict[str, Path]) -> None:
    """Our reading of executorch's context protocol gives the bytes executorch itself strips."""
    from executorch.backends.qualcomm.python import PyQnnManagerAdaptor
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(ptes["SM8650"].read_bytes()).program
    (delegate,) = program.execution_plan[0].delegates
    processed = program.backend_delegate_data[delegate.processed.index].data
    magic, _signature, size = struct.unpack_from("<IqQ", processed)
    assert magic == cb.CONTEXT_PROTOCOL_MAGIC
    ours = cb.extract(ptes["SM8650"])[0].binary
    assert len(ours) == size
    assert ours == bytes(PyQnnManagerAdaptor.StripProtocol(processed))
    assert PyQnnManagerAdaptor.GetQNNCtxBinAlignment() == cb.CONTEXT_BINARY_ALIGNMENT


def test_garbage_is_one_clear_line(qnn_sdk) -> None:
    with pytest.raises(cb.ContextBinaryError, match="not the context protocol magic"):
        cb.strip_protocol(b"\x00" * 64)
    with pytest.raises(cb.ContextBinaryError) as err:
        cb.describe(b"\x01\x02\x03\x04" * 256)
    assert "QnnSystemContext_getBinaryInfo rejected" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_active_adapter_patched_the_real_provider(qnn_sdk) -> None:
    if qnn_sdk.kind != "emulator":
        pytest.skip("a user's QNN SDK has no adapter")
    code, message = adapter.adapter_status(ctypes.CDLL(str(qnn_sdk.host_lib_dir / "libQnnHtp.so")))
    assert code == adapter.STATUS_OK, message
    build = adapter.KNOWN_GOOD[qnn_sdk.qairt_version]
    assert f"core API {build.core_api[0]}.{build.core_api[1]}." in message


def test_the_context_binary_is_the_build_of_the_libraries_that_run_it(ptes: dict[str, Path],
                                                                      qnn_sdk) -> None:
    """The version-set preflight reads the binary's build back from the .pte and accepts it on
    the libraries that built it; a binary of a newer QAIRT than the pushed set fails."""
    from pytest_qnn_genai.devices.library_builds import Build, LibraryBuildError, library_set
    from pytest_qnn_genai.devices.session import context_builds

    [build] = context_builds(ptes["SM8650"])
    assert isinstance(build, Build) and build.version is not None
    assert build.release == qnn_sdk.qairt_version
    libs = library_set(sorted((qnn_sdk.root / "lib" / "x86_64-linux-clang").iterdir()))
    assert libs.stamps == {build.stamp} and libs.check_binary(build, "linear.pte", "--qnn-sdk") == []
    newer = Build.parse(f"v{build.version[0]}.{build.version[1] + 1}.0.{build.stamp}")
    with pytest.raises(LibraryBuildError, match="newer than the QNN libraries"):
        libs.check_binary(newer, "linear.pte", "--qnn-sdk")


LOWER_IN_A_FRESH_PROCESS = """
import sys
from pathlib import Path
from tests.integration.sdk.test_context_binary import _lower_linear
_lower_linear("SM8650", Path(sys.argv[1]))
"""


def _lower_alone(out: Path) -> bytes:
    """The Linear lowered in a process of its own: its first lowering (the QNN tensor ids a
    program carries count on from the lowerings its process made before)."""
    root = Path(__file__).resolve().parents[3]
    subprocess.run([sys.executable, "-c", LOWER_IN_A_FRESH_PROCESS, str(out)], cwd=root,
                   check=True, timeout=600, capture_output=True)
    return out.read_bytes()


def test_two_builds_of_one_program_differ_only_in_the_build_stamp(qnn_sdk, tmp_path: Path) -> None:
    """The same Linear lowered twice, each in a fresh process: the files differ (ExecuTorch
    writes the build's wall time in nanoseconds into the context protocol header) in those 8
    bytes only, so the stamp-free sha256 is equal; one flipped byte of the context binary
    changes it. Lowered again in a process that lowered before, the tensor ids differ too."""
    import hashlib
    import time

    a = _lower_alone(tmp_path / "first.pte")
    b = _lower_alone(tmp_path / "again.pte")
    [stamp] = cb.build_stamps(a)
    assert cb.build_stamps(b) == [stamp]
    assert hashlib.sha256(a).digest() != hashlib.sha256(b).digest()
    assert [i for i in range(len(a)) if a[i] != b[i]] == [
        i for i in range(stamp, stamp + 8) if a[i] != b[i]]  # nothing else differs
    built_ns = struct.unpack_from("<q", b, stamp)[0]
    assert abs(built_ns / 1e9 - time.time()) < 600  # a wall-clock time: this build's
    assert cb.program_sha256(tmp_path / "first.pte") == cb.program_sha256(tmp_path / "again.pte")

    flipped = bytearray(b)
    flipped[-64] ^= 0x01  # in the context binary, past the protocol header
    (tmp_path / "flipped.pte").write_bytes(bytes(flipped))
    assert cb.program_sha256(tmp_path / "flipped.pte") != cb.program_sha256(tmp_path / "again.pte")

    _lower_linear("SM8650", tmp_path / "here.pte")  # so this process has lowered before
    second = _lower_linear("SM8650", tmp_path / "here-again.pte")
    assert cb.program_sha256(second) != cb.program_sha256(tmp_path / "first.pte")
