"""The layer-by-layer comparison of a program with its deployed decode QDQ graph, on
stories260k's kv build: QNN's tensor dump (a dumping build of the same decode graph, whose logits
are the shipped program's) paired with the QDQ graph's RMSNorm outputs on the same inputs, every
row far above the toy's floors; a target that leaves the graph at one layer (planted: noise on
one dumped RMSNorm) is named there, and a dump that cannot be paired is one error. Op by op
(``compare_ops``): every op of a layer's feed-forward pairs with its dumped tensor by module and
op, convolutions in QNN's axis order included, and noise planted on one names that op."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pytest_qnn_genai.checks.layer_gap import (
    LayerGapError,
    compare_call,
    compare_ops,
    steepest_fall,
)
from pytest_qnn_genai.hybrid import DECODE
from pytest_qnn_genai.runtime.host_runner import HybridRunner
from pytest_qnn_genai.runtime.intermediates import dump_call
from pytest_qnn_genai.stages.compile_dumping import (
    DUMPING_NODES,
    NotKvModeError,
    compile_dumping,
)

VARIANT = "kv"


@pytest.fixture(scope="module")
def one_call(qnn_pipeline, qnn_sdk, case, sm8650_emulator, tmp_path_factory):  # noqa: ANN001, ANN201
    """(the QDQ decode graph, the call's inputs, the dump, the shipped program's logits, the
    graph QNN was given), the third call of the eval prompt (two tokens in the cache)."""
    kv = case.variant(VARIANT)
    qdq = qnn_pipeline.qdq(kv, sm8650_emulator)
    dumping = compile_dumping(qdq, sm8650_emulator, tmp_path_factory.mktemp("dumping"))
    nodes = json.loads((dumping.parent / DUMPING_NODES).read_text())
    runner = HybridRunner(qnn_pipeline.pte(kv, sm8650_emulator).pte)
    ids = qnn_pipeline.prepared(kv).encode(kv.eval_prompt)[:3]
    *_, (inputs, outputs) = runner.decode_calls(ids)
    dumped_outputs, dumped = dump_call(dumping, DECODE, inputs)
    assert torch.equal(dumped_outputs[0], outputs[0])  # the dump is the shipped computation
    logits = ((outputs[0].to(torch.float32) - runner.logits_zero_point)
              * runner.logits_scale).numpy()
    return qdq.graph(DECODE), inputs, dumped, logits, nodes


def test_every_rms_norm_is_paired_and_the_toy_keeps_its_graph(one_call, case) -> None:
    rows = compare_call(*one_call[:4])
    n_layers = case.params_dict["n_layers"]
    assert [r.where for r in rows[:3]] == ["after the embedding", "after layer 0 attention",
                                           "after layer 0"]
    assert len(rows) == 2 * n_layers + 2 and rows[-1].name == "logits"
    assert all(r.sqnr_db > 35 for r in rows), [(r.where, round(r.sqnr_db, 1)) for r in rows]


def test_a_target_leaving_the_graph_at_one_layer_is_named_there(one_call) -> None:
    graph, inputs, dumped, logits, _ = one_call
    planted = dict(dumped)
    name = "aten_rms_norm_default_6"  # after layer 2
    noise = np.random.default_rng(0).integers(-900, 900, planted[name].shape)
    planted[name] = (planted[name].astype(np.int64) + noise).clip(0, 65535).astype(
        planted[name].dtype)
    before, at = steepest_fall(compare_call(graph, inputs, planted, logits))
    assert at.where == "after layer 2" and before.sqnr_db - at.sqnr_db > 20, (before, at)
    before, at = steepest_fall(compare_call(*one_call[:4]))  # unplanted: the first attention
    assert at.where == "after layer 0 attention", (before, at)


def test_a_dump_that_cannot_be_paired_is_one_error(one_call, qnn_pipeline, case,
                                                    sm8650_emulator, tmp_path) -> None:
    graph, inputs, dumped, logits, nodes = one_call
    with pytest.raises(LayerGapError, match="no op under 'layers.99' pairs"):
        compare_ops(graph, inputs, dumped, nodes, "layers.99")
    short = {k: v for k, v in dumped.items() if k != "aten_rms_norm_default_4"}
    with pytest.raises(LayerGapError, match="the dump lacks"):
        compare_call(graph, inputs, short, logits)
    with pytest.raises(NotKvModeError, match="one method only"):
        compile_dumping(qnn_pipeline.qdq(case, sm8650_emulator), sm8650_emulator, tmp_path)


def test_each_feed_forward_op_is_paired_and_a_planted_op_is_named(one_call) -> None:
    graph, inputs, dumped, _, nodes = one_call
    rows = compare_ops(graph, inputs, dumped, nodes, "layers.1.feed_forward")
    assert [(r.module.rsplit(".", 1)[-1], r.op) for r in rows] == [
        ("w1_conv", "aten.convolution.default"), ("feed_forward", "aten.sigmoid.default"),
        ("feed_forward", "aten.mul.Tensor"), ("w3_conv", "aten.convolution.default"),
        ("feed_forward", "aten.mul.Tensor"), ("w2_conv", "aten.convolution.default")], rows
    assert all(r.sqnr_db > 35 for r in rows), rows
    layer = compare_ops(graph, inputs, dumped, nodes, "layers.1")  # norms, adds, attention
    assert {"aten.rms_norm.default", "aten.add.Tensor"} <= {r.op for r in layer}
    assert all(r.module == "layers.1" or r.module.startswith("layers.1.") for r in layer)
    w3 = rows[3].dumped
    planted = dict(dumped)
    noise = np.random.default_rng(0).integers(-900, 900, planted[w3].shape)
    planted[w3] = (planted[w3].astype(np.int64) + noise).clip(0, 65535).astype(planted[w3].dtype)
    worst = min(compare_ops(graph, inputs, planted, nodes, "layers.1.feed_forward"),
                key=lambda r: r.sqnr_db)
    assert worst.dumped == w3 and worst.sqnr_db < 30, worst
