"""A deliberately perturbed new flow must fail the parity checks with a readable per-layer diff.

Each perturbation is one flipped setting of the quantize stage: the calibration graph is
calibrated on the first calibration prompt only (instead of all of them), or, for the Llama 3.2
family, without the SeqMSE weight-scale search llama.py runs for it (the gap the parity suite
found in the staged flow), or, for Qwen3, without what llama.py does for ``qwen3-0_6b`` that it
does for neither other family (calibration samples through the chat template; masked softmax).
Only that graph is quantized (no decode/prefill graphs, no compile), through the cache under its
own key, so the cost is one export + calibrate + convert.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from unittest import mock

import pytest

from pytest_qnn_genai.checks import encodings, parity
from tests.support.perturbed import perturbed_calibration_graph

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase

pytestmark = [pytest.mark.parity, pytest.mark.flow("legacy", "new")]


@pytest.fixture(scope="session")
def perturbed_qdq(qnn_pipeline, qnn_sdk, case, sm8650_emulator) -> Path:
    return perturbed_calibration_graph(qnn_pipeline, case, sm8650_emulator,
                                        case.calibration_prompts[:1], {"calibration_prompts": 1},
                                        "one calibration prompt")


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
    assert "QDQ encodings identical (worst steps) is " in message
    header = message.splitlines()[3].split()
    assert header[:5] == ["layer", "worst", "tensor", "steps", "n"]
    assert any(line.strip().startswith("layers.") for line in message.splitlines())


def test_one_step_on_one_tensor_of_the_real_graph_fails_naming_it(qnn_pipeline, qnn_sdk, case,
                                                                  sm8650_emulator, legacy) -> None:
    """The two flows' real calibration graphs are identical (the check passes unchanged); the new
    graph's table with one activation's zero point moved by one (a one-step shift of its range)
    fails, naming that tensor first and alone."""
    import dataclasses

    from pytest_qnn_genai.hybrid import CALIBRATION

    legacy_enc = qnn_pipeline.qdq_encodings(legacy.decode_qdq).encodings
    new_enc = qnn_pipeline.qdq_encodings(
        qnn_pipeline.qdq(case, sm8650_emulator).path(CALIBRATION)).encodings
    assert encodings.compare_encodings(legacy_enc, new_enc).ok  # the flows as they are
    key = next(k for k, e in new_enc.items() if k.startswith("layers.1.") and e.qmax == 65535)
    e = new_enc[key]
    shifted = {**new_enc, key: dataclasses.replace(e, zero_point=(e.zero_point[0] + 1,))}
    report = encodings.compare_encodings(legacy_enc, shifted)
    message = parity.failures(report.checks())
    print(message)
    assert not report.ok and list(report.over) == [key]
    assert report.over[key] == pytest.approx(1.0)
    assert f"1 of {report.matched} tensors differ; first (graph order) {key}: 1 steps" in message


@pytest.fixture(scope="session")
def llama3_case() -> ModelCase:
    from pytest_qnn_genai.models.registry import available

    return available()["llama3_2_toy"]


@pytest.fixture(scope="session")
def without_seq_mse(qnn_pipeline, qnn_sdk, llama3_case, sm8650_emulator) -> Path:
    """llama3_2_toy's calibration graph quantized as the staged flow once did, without llama.py's
    SeqMSE search: every calibration prompt, no SeqMSE."""
    from pytest_qnn_genai.stages import recipe

    return perturbed_calibration_graph(
        qnn_pipeline, llama3_case, sm8650_emulator, llama3_case.calibration_prompts,
        {"seq_mse_candidates": 0}, "without SeqMSE",
        mock.patch.object(recipe, "seq_mse_candidates", lambda case: 0))


def test_quantize_without_seq_mse_fails_llama3_parity(qnn_pipeline, qnn_sdk, llama3_case,
                                                      sm8650_emulator, without_seq_mse) -> None:
    from pytest_qnn_genai.hybrid import CALIBRATION
    from pytest_qnn_genai.stages.recipe import seq_mse_candidates

    assert seq_mse_candidates(llama3_case) > 0  # llama.py's LLMModelConfig asks for the search
    legacy = qnn_pipeline.legacy(llama3_case, sm8650_emulator)
    legacy_enc = encodings.qdq_encodings(encodings.load_qdq(legacy.decode_qdq))
    staged = qnn_pipeline.qdq(llama3_case, sm8650_emulator).path(CALIBRATION)
    with_search = encodings.compare_encodings(
        legacy_enc, encodings.qdq_encodings(encodings.load_qdq(staged)))
    without = encodings.compare_encodings(
        legacy_enc, encodings.qdq_encodings(encodings.load_qdq(without_seq_mse)))
    print(without.table())
    assert with_search.ok and not with_search.over  # the staged flow as it is: the same encodings
    assert not without.ok and not without.only_legacy and not without.only_new
    assert max(without.over.values()) > encodings.MAX_ENCODING_STEPS
    # SeqMSE searches the scales of the linear layers' weights: those are what drift
    assert all(key.startswith("w:") for key in without.over), sorted(without.over)


@pytest.fixture(scope="session")
def qwen3_case():  # -> ModelCase
    from pytest_qnn_genai.models.registry import available

    return available()["qwen3_toy"]


def _against_legacy(pipeline, case, target, perturbed: Path) -> encodings.EncodingReport:
    from pytest_qnn_genai.hybrid import CALIBRATION

    legacy = encodings.qdq_encodings(encodings.load_qdq(pipeline.legacy(case, target).decode_qdq))
    staged = pipeline.qdq(case, target).path(CALIBRATION)
    assert encodings.compare_encodings(
        legacy, encodings.qdq_encodings(encodings.load_qdq(staged))).ok  # the flow as it is
    return encodings.compare_encodings(
        legacy, encodings.qdq_encodings(encodings.load_qdq(perturbed)))


def test_calibrating_without_the_chat_template_fails_qwen3_parity(
        qnn_pipeline, qnn_sdk, qwen3_case, sm8650_emulator) -> None:
    """llama.py wraps each --calib_samples message in the tokenizer's chat template for an
    instruct model with a Hugging Face tokenizer (qwen3), and for neither other family."""
    from pytest_qnn_genai.models.families import qwen3

    def raw(case, tokenizer, prompt: str) -> list[int]:
        return tokenizer.encode(prompt, bos=True, eos=False)

    perturbed = perturbed_calibration_graph(
        qnn_pipeline, qwen3_case, sm8650_emulator, qwen3_case.calibration_prompts,
        {"calibration": "no chat template"}, "without the chat template",
        mock.patch.object(qwen3, "calibration_ids", raw))
    report = _against_legacy(qnn_pipeline, qwen3_case, sm8650_emulator, perturbed)
    print(report.table())
    assert not report.ok and not report.only_legacy and not report.only_new
    assert max(report.over.values()) > encodings.MAX_ENCODING_STEPS


def test_an_additive_mask_instead_of_masked_softmax_fails_qwen3_parity(
        qnn_pipeline, qnn_sdk, qwen3_case, sm8650_emulator) -> None:
    """llama.py builds qwen3-0_6b with masked softmax (its config, QNN >= 2.35)."""
    from pytest_qnn_genai.stages import prepare as prepare_stage

    perturbed = perturbed_calibration_graph(
        qnn_pipeline, qwen3_case, sm8650_emulator, qwen3_case.calibration_prompts,
        {"prepare": "additive mask"}, "without masked softmax",
        mock.patch.object(prepare_stage, "masked_softmax", lambda case: False))
    report = _against_legacy(qnn_pipeline, qwen3_case, sm8650_emulator, perturbed)
    print(report.table())
    assert not report.ok


def test_one_zero_point_step_in_the_deployed_decode_graph_is_named(
        qnn_pipeline, qnn_sdk, legacy, case, sm8650_emulator) -> None:
    """The override that carries the calibrated encodings into ``kv_forward`` moves one
    mid-graph activation by one zero-point step: the calibration graphs still agree tensor for
    tensor, so only the deployed graph's comparison (suites/parity
    ``test_deployed_graphs_carry_legacys_encodings``) can see it, and it names the tensor."""
    from pytest_qnn_genai.hybrid import DECODE

    legacy_enc = encodings.qdq_encodings(encodings.load_qdq(legacy.decode_qdq))
    graph = encodings.load_qdq(qnn_pipeline.qdq(case, sm8650_emulator).path(DECODE))
    assert encodings.compare_encodings(legacy_enc, encodings.qdq_encodings(graph)).ok
    quantize = [n for n in graph.graph.nodes if n.op == "call_function"
                and "quantize_per_tensor" in str(n.target) and "dequantize" not in str(n.target)
                and n.args[0].op != "placeholder"]
    planted = quantize[len(quantize) // 2]  # mid-graph
    args = list(planted.args)
    args[2] = int(args[2]) + 1  # one zero-point step
    planted.args = tuple(args)
    moved = encodings.qdq_encodings(graph)
    report = encodings.compare_encodings(legacy_enc, moved)
    [key] = [k for k in moved if moved[k].zero_point != legacy_enc[k].zero_point]
    checks = report.checks(DECODE)
    message = parity.failures(checks)
    print(message)
    assert not report.ok and list(report.over) == [key]
    assert checks[1].name == "kv_forward_encoding_worst_steps" and not checks[1].ok
    assert f"1 of {report.matched} tensors differ; first (graph order) {key}: 1 steps" in message
