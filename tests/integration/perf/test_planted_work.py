"""The emulator's speed gate on the fault it guards: an extra gate planted in every decoder layer
of the staged program (``out * sigmoid(out)``: one sigmoid and one multiply more per layer, in
upstream's ``static_llama.LlamaDecoderLayer`` as the staged flow builds it) fails ``legacy:new``
in one run of ``pytest suites/perf --models stories260k``, naming the op kinds that gained nodes
and the kernels whose instructions grew; the unplanted tree passes the same gate by identity
(``test_perf_gate.py``). Measured: +0.42 % instructions per prompt pass, +0.02 % per decode
step (a scale by a constant, the first plant tried, QNN folds into a requantization: +707
instructions a step, still a failure).

The planted build runs in its own cache folder: the patch is not in any cache key, so the
session's cache would hand back the unplanted program. llama.py (a subprocess) is not patched:
its program is the reference, copied in from the session's cache entry (the same key there).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_qnn_genai.flows import registry as flows

ROOT = Path(__file__).resolve().parents[3]
PLANT = '''
import torch

from pytest_qnn_genai.compat import llama_example

static_llama = llama_example.static_llama()  # upstream's module, with the torchtune stand-in
_forward = static_llama.LlamaDecoderLayer.forward


def _planted(self, *args, **kwargs):
    out, k_cache, v_cache = _forward(self, *args, **kwargs)
    return out * torch.sigmoid(out), k_cache, v_cache


static_llama.LlamaDecoderLayer.forward = _planted
'''


def test_one_extra_op_per_layer_fails_the_emulator_speed_gate(pytester: pytest.Pytester,
                                                             tmp_path: Path, qnn_pipeline, legacy,
                                                             case, sm8650_emulator) -> None:
    built = qnn_pipeline.flow_entry(flows.get("legacy"), case, sm8650_emulator).path
    shutil.copytree(built, tmp_path / "cache" / "artifacts" / built.parent.name / built.name)
    pytester.makeconftest(PLANT)
    pytester.makepyfile(test_perf=(ROOT / "suites" / "perf" / "test_perf.py").read_text())
    result = pytester.runpytest_subprocess(
        "-m", "perf", "-k", "relative_gate and htp-emulator", "--models", "stories260k",
        "--qnn-cache-dir", str(tmp_path / "cache"), "--no-qnn-prebuild", "-p", "no:cacheprovider",
        "-s", timeout=1800)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    verdicts = next(line for line in out.splitlines() if "new vs legacy prefill_work" in line)
    prefill, decode = verdicts.split("; new vs legacy decode_work: ")
    for figure in (prefill, decode):  # both fail, naming the sigmoids the plant added
        assert "A/B = 0.99" in figure and ": FAIL: op kinds with more nodes in new: " in figure
        assert "aten_sigmoid_default 5 -> 10" in figure and "aten_mul_tensor 242 -> 247" in figure
        assert "the kernels whose instructions grew most (over the counted calls): 0x" in figure
