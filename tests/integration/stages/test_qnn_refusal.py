"""QNN refusing a graph at prepare is told apart, said with QNN's own reason, and remembered.

The refusal is real: a 16-bit softmax over 8M values needs 32 MB of TCM in one op, and QAIRT's HTP
prepare on the emulator SDK refuses it in about two seconds ("not sufficiently tiled to fit in
TCM") where executorch itself only says "Failed to generate Qnn context binary". The same path
refused SmolLM2-135M's compile after 37 minutes; remembered, the next test asking for that build
is told at once.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.flows.smoke import lower_to_pte, quantize_module
from pytest_qnn_genai.stages.qnn_refusal import QnnRefusal, lowering
from pytest_qnn_genai.targets import Target

TCM_TOO_SMALL = "not sufficiently tiled to fit in TCM. Requires"


class WideSoftmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1)


def _lower_wide_softmax(target: Target, out: Path) -> Path:
    example = (torch.randn(1, 1, 1, 8 * 1024 * 1024),)
    module = quantize_module(WideSoftmax(), example, [example], target)
    return lower_to_pte(module, example, target, out)


def test_qnn_refusing_a_graph_names_qnns_reason(qnn_sdk, sm8650_emulator: Target,
                                                tmp_path: Path) -> None:
    with pytest.raises(QnnRefusal) as refused:
        _lower_wide_softmax(sm8650_emulator, tmp_path / "softmax.pte")
    line = str(refused.value)
    assert "\n" not in line and TCM_TOO_SMALL in line, line
    assert qnn_sdk.root.name in line and "GraphModule for SM8650-htp" in line, line
    # executorch's own words are kept as the cause
    assert "Failed to generate Qnn context binary" in str(refused.value.__cause__)


def test_a_refusal_is_remembered_under_the_build_key(qnn_sdk, sm8650_emulator: Target,
                                                     tmp_path: Path) -> None:
    calls: list[int] = []

    def build(out: Path) -> None:
        calls.append(1)
        _lower_wide_softmax(sm8650_emulator, out / "softmax.pte")

    cache = ArtifactCache(tmp_path, {"qairt": qnn_sdk.qairt_version}, progress=lambda _: None)
    with pytest.raises(QnnRefusal, match=TCM_TOO_SMALL):
        cache.get_or_build("smoke-lower", {"block": "softmax-8M"}, build)
    with pytest.raises(QnnRefusal, match=TCM_TOO_SMALL) as again:
        ArtifactCache(tmp_path, {"qairt": qnn_sdk.qairt_version}, progress=lambda _: None
                      ).get_or_build("smoke-lower", {"block": "softmax-8M"}, build)
    assert calls == [1] and again.value.remembered  # told from the cache, not built again
    other_sdk = ArtifactCache(tmp_path, {"qairt": "another QAIRT"}, progress=lambda _: None)
    with pytest.raises(QnnRefusal):  # another QAIRT is another key: QNN is asked again
        other_sdk.get_or_build("smoke-lower", {"block": "softmax-8M"}, build)
    assert calls == [1, 1]


def test_an_error_that_is_not_qnns_passes_through_unremembered(capfd: pytest.CaptureFixture[str]
                                                               ) -> None:
    with pytest.raises(ValueError, match="a Python error"), lowering("a block"):
        os.write(2, b"[ERROR] [Qnn ExecuTorch]:  <E> unexpected GraphHtpSettings option 66\n")
        raise ValueError("a Python error")
    with lowering("a block"):  # what QNN writes still reaches the terminal
        os.write(2, b"QNN says hello\n")
    os.write(2, b"and after it\n")  # descriptor 2 is the terminal's again
    err = capfd.readouterr().err
    assert "QNN says hello" in err and "and after it" in err
