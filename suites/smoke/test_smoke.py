"""Smoke: an attention block lowers to a QnnBackend-only program for each SoC and runs.

The block runs on the target: in this process on the x86 emulator; on a phone through
ExecuTorch's ``qnn_executor_runner`` as SimpleADB drives it (the .pte, the raw inputs and an input
list pushed, ``output_0_0.raw`` pulled back). 16a8w: the target's output must agree with the QDQ
reference within a few quantisation steps (HTP executes the same fixed-point graph) and lose no
accuracy against fp32 beyond what the QDQ graph itself loses. fp16: lowers and runs, close to
fp32.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from pytest_qnn_genai.checks import agreement, parity, program
from pytest_qnn_genai.flows import smoke
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.products import Wants, needs
from pytest_qnn_genai.runtime.pte_info import inspect_pte
from pytest_qnn_genai.sdk.context_binary import check_target, describe_pte

# The thresholds against the block's figures on the pinned path, the same on SM8650 and SM8750,
# on the emulator and upstream's x86 runner (the docs' measurements page, "The smoke block"):
# one 16-bit step is (output range) / 65535, and the HTP kernels round a few ops differently from
# the QDQ reference (measured 6.22 steps; a phone's kernels are unmeasured, hence the margin)
MAX_QDQ_STEPS = 8
# the target may lose this much against fp32 beyond the QDQ graph's own loss (measured 0.015 dB)
MAX_SQNR_LOSS_DB = 0.5
MIN_QDQ_SQNR_DB = 31.0  # the QDQ graph against fp32 (measured 36.287 dB), the cases' ~5 dB headroom
MIN_FP16_SQNR_DB = 55.0  # fp16 on the target against fp32 (measured 60.919 dB), likewise


@dataclass
class Built:
    quant: str
    pte: Path
    reference: dict[str, torch.Tensor]
    output: torch.Tensor


def _build(pipeline, target, quant: str) -> Built:  # noqa: ANN001
    entry = pipeline.smoke_block(target, quant)
    reference = torch.load(entry.file(smoke.REFERENCE))
    output = pipeline.run_method(target, entry.file(smoke.PTE), reference["inputs"],
                                 digest=entry.digest)[0]
    return Built(quant, entry.file(smoke.PTE), reference, output)


@pytest.fixture(scope="session")
@needs(Wants(products.SMOKE, "16a8w"))
def block_16a8w(qnn_pipeline, qnn_sdk, qnn_target) -> Built:
    return _build(qnn_pipeline, qnn_target, "16a8w")


@pytest.fixture(scope="session")
@needs(Wants(products.SMOKE, "fp16"))
def block_fp16(qnn_pipeline, qnn_sdk, qnn_target) -> Built:
    return _build(qnn_pipeline, qnn_target, "fp16")


@pytest.fixture(params=["16a8w", "fp16"])
def any_block(request: pytest.FixtureRequest, block_16a8w: Built, block_fp16: Built) -> Built:
    return {"16a8w": block_16a8w, "fp16": block_fp16}[request.param]


def test_only_qnn_delegate(any_block: Built) -> None:
    problems = program.qnn_only(inspect_pte(any_block.pte), ("forward",))
    assert not problems, "\n".join(problems)


def test_context_binary_is_for_the_target(any_block: Built, qnn_target) -> None:
    """QNN's system library reads the SoC model and HTP arch out of the binary in the .pte."""
    check_target(describe_pte(any_block.pte), qnn_target.soc, qnn_target.backend)


def test_16a8w_matches_qdq_reference(block_16a8w: Built, qnn_record) -> None:
    qdq, out = block_16a8w.reference["qdq"], block_16a8w.output
    assert out.shape == qdq.shape
    check = agreement.within_steps(qdq, out, 16, MAX_QDQ_STEPS)
    qnn_record("smoke", [check], model="attention-16a8w")
    assert check.ok, parity.failures([check])


def test_16a8w_accuracy_vs_fp32(block_16a8w: Built, qnn_record) -> None:
    ref = block_16a8w.reference
    checks = agreement.loses_no_more(ref["fp32"], ref["qdq"], block_16a8w.output,
                                     MAX_SQNR_LOSS_DB, MIN_QDQ_SQNR_DB)
    qnn_record("smoke", checks, model="attention-16a8w")
    assert checks[0].ok, f"the QDQ graph itself is broken: {parity.failures(checks[:1])}"
    assert all(c.ok for c in checks), parity.failures(checks)


def test_fp16_lowers_and_runs_close_to_fp32(block_fp16: Built, qnn_record) -> None:
    check = agreement.close_to_fp32(block_fp16.reference["fp32"], block_fp16.output,
                                    MIN_FP16_SQNR_DB)
    qnn_record("smoke", [check], model="attention-fp16")
    assert check.ok, parity.failures([check])
