"""The CPU kind: its name from the kernel's model name and torch's dispatch, its slug, and that
another kind (torch forced to AVX2 in a child process) is another set of cache keys."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_qnn_genai import cpu

CHILD = """
import json
from pathlib import Path
from pytest_qnn_genai import cpu
from pytest_qnn_genai.sdk import versions

class Sdk:
    qairt_version, kind, root = "2.47.0", "emulator", Path("/sdk/qairt")

print(json.dumps([cpu.kind().capability, versions.stack(Sdk())["cpu"]]))
"""


def test_the_slug_and_label_name_model_and_instruction_set() -> None:
    kind = cpu.CpuKind("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "AVX512")
    assert kind.slug == "intel-r-xeon-r-platinum-8375c-cpu-2-90ghz-avx512"
    assert cpu.CpuKind("AMD EPYC", "AVX2").label == "AMD EPYC, AVX2"


def test_the_model_name_is_the_kernels_first(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t:  AMD   EPYC\n\n"
                    "processor\t: 1\nmodel name\t: other\n")
    assert cpu.model_name(info) == "AMD EPYC"
    assert cpu.model_name(tmp_path / "absent")  # the platform's name, never empty


def _child(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CHILD], env={**os.environ, **env}, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return list(json.loads(out.splitlines()[-1]))


def test_another_instruction_set_is_another_set_of_keys() -> None:
    """torch made to dispatch to AVX2 kernels computes other bytes (the docs' measurements page,
    "Builds depend on the CPU"): its builds must never be taken for this dispatch's."""
    here = _child({"ATEN_CPU_CAPABILITY": "default"})
    avx2 = _child({"ATEN_CPU_CAPABILITY": "avx2"})
    assert here[0] == "DEFAULT" and avx2[0] == "AVX2"
    assert here[1] != avx2[1] and here[1].endswith("-default") and avx2[1].endswith("-avx2")
    assert here[1].removesuffix("-default") == cpu.kind().slug.rsplit("-", 1)[0]
