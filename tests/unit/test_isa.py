"""The numeric path: importing the package pins torch, MKL and oneDNN to AVX2 whatever the user's
environment said, so the cache key's path is the same on every machine; a machine without AVX2,
or a torch that chose its kernels before the pin, is refused in one line (a usage error in a
pytest run, not a traceback). The CPU kind only describes the machine."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_qnn_genai import cpu, isa

CHILD = """
import json
from pathlib import Path
import pytest_qnn_genai  # pins, before torch loads
import torch
from pytest_qnn_genai import isa
from pytest_qnn_genai.sdk import versions

class Sdk:
    qairt_version, kind, root = "2.47.0", "emulator", Path("/sdk/qairt")

isa.check()
print(json.dumps([torch.backends.cpu.get_cpu_capability(), versions.stack(Sdk())["numeric_path"],
                  {k: __import__("os").environ[k] for k in isa.ENV}]))
"""
TORCH_FIRST = """
import torch
torch.ones(4).add_(1)  # torch picks its kernels now
"""


def _child(env: dict[str, str], code: str = CHILD) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)


def test_the_path_is_pinned_whatever_the_environment_said() -> None:
    """A user's own ATEN_CPU_CAPABILITY / MKL_CBWR would be another set of figures: the package
    overrides them, and the key names the path, not the machine."""
    seen = []
    for env in ({}, {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AUTO"},
                {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "ALL"}):
        out = _child(env)
        assert out.returncode == 0, out.stderr[-2000:]
        seen.append(json.loads(out.stdout.splitlines()[-1]))
    assert all(s == ["AVX2", isa.PATH, dict(isa.ENV)] for s in seen), seen


def test_a_torch_that_chose_before_the_pin_is_refused_in_one_line() -> None:
    out = _child({"ATEN_CPU_CAPABILITY": "default"}, TORCH_FIRST + CHILD)
    assert out.returncode != 0
    assert ("IsaError: torch dispatches to DEFAULT, not AVX2: it loaded before pytest-qnn-genai "
            "pinned the path") in out.stderr


def test_check_names_what_is_missing() -> None:
    with pytest.raises(isa.IsaError, match=r"^this CPU lacks AVX2: pytest-qnn-genai computes "
                       r"every build and reference on the x86-64-avx2 path"):
        isa.check(frozenset({"sse4_2", "fma"}), "AVX2", isa.ENV)
    with pytest.raises(isa.IsaError, match=r"^MKL_CBWR not set to the x86-64-avx2 path"):
        isa.check(frozenset({"avx2", "fma"}), "AVX2", {**isa.ENV, "MKL_CBWR": "AUTO"})
    with pytest.raises(isa.IsaError, match=r"^torch dispatches to AVX512, not AVX2"):
        isa.check(frozenset({"avx2", "fma"}), "AVX512", isa.ENV)
    isa.check(frozenset({"avx2", "fma", "avx512f"}), "AVX2", isa.ENV)  # this is the path


def test_a_run_whose_torch_chose_first_is_a_usage_error(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """An early plugin (``-p``) that loads torch before the plugin's entry point: one line."""
    pytester.makepyfile(torch_first=TORCH_FIRST, test_x="def test_x():\n    pass\n")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path),
                                                      os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess("-p", "torch_first", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-qnn-genai: torch dispatches to DEFAULT, not "
                                 "AVX2: it loaded before pytest-qnn-genai pinned the path*"])
    assert "Traceback" not in result.stderr.str()


def test_the_label_names_model_and_instruction_set() -> None:
    assert cpu.CpuKind("AMD EPYC", "AVX2").label == "AMD EPYC, AVX2"


def test_the_model_name_and_flags_are_the_kernels_first(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t:  AMD   EPYC\n"
                    "flags\t\t: fpu avx2 fma\n\nprocessor\t: 1\nmodel name\t: other\n")
    assert cpu.model_name(info) == "AMD EPYC"
    assert cpu.model_name(tmp_path / "absent")  # the platform's name, never empty
    assert isa.cpu_flags(info) == {"fpu", "avx2", "fma"}
    assert cpu.native_isa(isa.cpu_flags(info)) == "AVX2"
    assert cpu.native_isa(frozenset({"avx2", "fma", *cpu.AVX512})) == "AVX512"
    assert cpu.native_isa(frozenset({"sse4_2"})) == "DEFAULT"
