"""A deliberately perturbed new flow must fail the parity checks with a readable per-layer diff.

The perturbation is one flipped setting of the quantize stage: the calibration graph is calibrated
on the first calibration prompt only (instead of all of them). Only that graph is quantized (no
decode/prefill graphs, no compile), through the cache under its own key, so the cost is one
export + calibrate + convert.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.checks import encodings, parity

pytestmark = [pytest.mark.parity, pytest.mark.flow("legacy", "new")]

PERTURBED = "calibration_qdq.pt2"


@pytest.fixture(scope="session")
def perturbed_qdq(qnn_pipeline, qnn_sdk, case, sm8650_emulator) -> Path:
    from pytest_qnn_genai.hybrid import CALIBRATION
    from pytest_qnn_genai.stages.quantize import _quantize_graph

    def build(out: Path) -> None:
        import torch

        prepared = qnn_pipeline.prepared(case)
        torch.manual_seed(0)
        batches = prepared.calibration_batches(list(case.calibration_prompts[:1]))
        gm = _quantize_graph(prepared, CALIBRATION, sm8650_emulator.soc, "htp", batches)
        exported = torch.export.export(gm, prepared.example_inputs[CALIBRATION], strict=True)
        torch.export.save(exported, str(out / PERTURBED))

    entry = qnn_pipeline.cache.get_or_build(
        "parity-perturbed-quantize", {"case": case.build_fingerprint(), "soc": "SM8650",
                                      "backend": "htp", "calibration_prompts": 1},
        build, label=f"{case.name} one calibration prompt")
    return entry.file(PERTURBED)


def test_perturbed_encodings_fail_with_a_per_layer_table(legacy, perturbed_qdq) -> None:
    legacy_enc = encodings.qdq_encodings(encodings.load_qdq(legacy.decode_qdq))
    perturbed = encodings.qdq_encodings(encodings.load_qdq(perturbed_qdq))
    report = encodings.compare_encodings(legacy_enc, perturbed)
    checks = report.checks()
    message = parity.failures(checks)
    print(message)
    assert not report.ok
    assert not report.only_legacy and not report.only_new, "matching must not be what fails"
    assert len(report.over) > 0
    assert "QDQ encodings within 1 step" in message
    header = message.splitlines()[1].split()
    assert header[:5] == ["layer", "worst", "tensor", "steps", "n"]
    assert any(line.strip().startswith("layers.") for line in message.splitlines())
