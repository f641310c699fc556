"""Parity is identity by default: one quantisation step on one tensor, or one ulp of one logit,
fails and names where; a case's declared tolerance relaxes a pair, with its reason printed."""
from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_qnn_genai.checks import encodings, parity
from pytest_qnn_genai.checks.encodings import Encoding
from pytest_qnn_genai.models import spec

LAYERS, DIM, HIDDEN = 2, 64, 192  # stories260k's shapes: its 16a4w graph's tensors


def _graph() -> dict[str, Encoding]:
    """A 16a4w calibration graph's encodings as ``qdq_encodings`` keys them: 16-bit per-tensor
    activations (uint16, asymmetric) and 4-bit per-channel weights (int8 in [-8, 7], zero point
    0), in graph order."""
    rng = np.random.default_rng(7)
    out: dict[str, Encoding] = {}

    def act(key: str) -> None:
        scale = float(rng.uniform(1e-5, 1e-3))
        out[key] = Encoding(key, encodings._layer(key), (scale,), (int(rng.integers(0, 65535)),),
                            0, 65535, "uint16")

    def weight(key: str, channels: int) -> None:
        scales = tuple(float(x) for x in rng.uniform(1e-3, 2e-2, channels))
        out[key] = Encoding(key, encodings._layer(key.removeprefix("w:")), scales,
                            (0,) * channels, -8, 7, "int8")

    act("input/0")
    for i in range(LAYERS):
        base = f"layers.{i}"
        for proj, channels in (("wq", DIM), ("wk", DIM), ("wv", DIM), ("wo", DIM)):
            weight(f"w:{base}.attention.{proj}/conv2d.default#0.1", channels)
            act(f"{base}.attention.{proj}/conv2d.default#0")
        act(f"{base}.attention/softmax.int#0")
        for proj, channels in (("w1", HIDDEN), ("w3", HIDDEN), ("w2", DIM)):
            weight(f"w:{base}.feed_forward.{proj}/conv2d.default#0.1", channels)
            act(f"{base}.feed_forward.{proj}/conv2d.default#0")
    act("output/linear.default#0")
    return out


def test_identical_graphs_pass() -> None:
    legacy = _graph()
    report = encodings.compare_encodings(legacy, _graph())
    assert report.ok and report.matched == len(legacy)
    checks = report.checks()
    assert all(c.ok for c in checks) and checks[1].judge == "identical to legacy's (0 steps)"


@pytest.mark.parametrize("what,change", [
    ("zero point + 1 (one step)", lambda e: dataclasses.replace(
        e, zero_point=(e.zero_point[0] + 1,) + e.zero_point[1:])),
    ("one channel's scale one ulp larger", lambda e: dataclasses.replace(
        e, scale=(*e.scale[:5], float(np.nextafter(e.scale[5], 1.0)), *e.scale[6:]))),
])
def test_one_difference_on_one_tensor_fails_naming_it(what: str, change) -> None:
    legacy, new = _graph(), _graph()
    key = ("w:layers.1.feed_forward.w2/conv2d.default#0.1" if "channel" in what else
           "layers.1.attention/softmax.int#0")
    new[key] = change(new[key])
    report = encodings.compare_encodings(legacy, new)
    assert not report.ok and list(report.over) == [key], what
    message = parity.failures(report.checks())
    first = message.splitlines()[0]
    assert first.startswith("QDQ encodings identical (worst steps) is ")
    assert first.endswith("which fails identical to legacy's (0 steps).")
    assert f"1 of {len(legacy)} tensors differ; first (graph order) {key}: " in message
    if "channel" in what:
        assert "channel 5 of 64" in message
    else:
        assert "1 steps" in message and "zero point legacy" in message


def test_a_declared_tolerance_relaxes_the_pair_and_says_why() -> None:
    legacy, new = _graph(), _graph()
    key = "layers.0.attention/softmax.int#0"
    new[key] = dataclasses.replace(new[key], zero_point=(new[key].zero_point[0] + 1,))
    report = encodings.compare_encodings(legacy, new, 1.0, "SeqMSE search skipped")
    assert report.ok
    check = report.checks()[1]
    assert check.judge == "≤ 1 steps of legacy's (case tolerance: SeqMSE search skipped)"
    table = parity.ParityTable()
    table.add([check])
    assert table.format()[-1].endswith("ok (tolerance: SeqMSE search skipped)")
    assert check.figure().context["tolerance"] == "SeqMSE search skipped"
    with pytest.raises(ValueError, match="needs a reason"):
        encodings.compare_encodings(legacy, new, 1.0)


def _run(logits: np.ndarray, tokens=(5, 9, 2)) -> SimpleNamespace:
    return SimpleNamespace(tokens=list(tokens), logits=logits)


def test_one_ulp_of_one_logit_fails_naming_the_position() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(3, 512)).astype(np.float32)
    other = logits.copy()
    other[2, 300] = np.nextafter(other[2, 300], np.float32(np.inf))
    assert all(c.ok for c in parity.compare_runs(_run(logits), _run(logits.copy())))
    checks = parity.compare_runs(_run(logits), _run(other))
    assert [c.ok for c in checks] == [False, True, True]  # the tokens are the same
    message = parity.failures(checks)
    first, detail = message.splitlines()
    assert first == ("logits values that differ (of 3 rows) is 1 (difference max |diff| 2.38e-07, "
                     "SQNR 164.1 dB), which fails bit-equal to legacy's.")
    assert detail.strip().startswith("first at step 2, vocab index 300: legacy ")
    assert "1 of 1536 values differ" in detail


def test_one_ulp_of_one_qdq_graph_logit_fails() -> None:
    """The QDQ graphs' comparison (``compare_logits`` on every position's row, as
    ``test_qdq_graphs_compute_the_same_outputs`` calls it): equal rows pass, one ulp of one
    logit fails naming its position and vocabulary index."""
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(48, 512)).astype(np.float32)
    same = parity.compare_logits(rows, rows.copy(), what="QDQ graph logits", name="qdq_")
    assert [c.ok for c in same] == [True, True] and same[1].info
    other = rows.copy()
    other[17, 42] = np.nextafter(other[17, 42], np.float32(-np.inf))
    checks = parity.compare_logits(rows, other, what="QDQ graph logits", name="qdq_")
    assert [c.ok for c in checks] == [False, True]
    assert checks[0].name == "qdq_logits_values_differing" and checks[0].new == 1
    assert checks[0].detail.strip().startswith("first at step 17, vocab index 42: legacy ")
    assert parity.failures(checks).startswith(
        "QDQ graph logits values that differ (of 48 rows) is 1 ")


def test_a_tolerance_judges_outputs_by_its_floors() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(3, 512)).astype(np.float32)
    noisy = logits + rng.normal(scale=0.01, size=logits.shape).astype(np.float32)
    loose = spec.ParityTolerance("the flows round the KV cache differently", 0.0, 30.0, 0.995)
    checks = parity.compare_runs(_run(logits), _run(noisy), loose)
    assert all(c.ok for c in checks)
    assert "(case tolerance: the flows round the KV cache differently)" in checks[1].judge
    assert checks[1].verdict == "ok (tolerance: the flows round the KV cache differently)"
    tight = dataclasses.replace(loose, min_logits_sqnr_db=80.0)
    assert not parity.compare_runs(_run(logits), _run(noisy), tight)[1].ok


def test_every_failing_figure_reads_as_one_sentence() -> None:
    """The figure, its value, the threshold and whose threshold it is, in one line each (the
    two messages that read "legacy=fp32 new=11.751 delta=" and "legacy= new=36177 delta=")."""
    from pytest_qnn_genai.checks import agreement, perplexity
    from pytest_qnn_genai.checks.perplexity import Perplexity

    rng = np.random.default_rng(1)
    fp32 = rng.normal(size=(8, 64))
    [sqnr, _] = agreement.qdq_keeps_fp32(fp32, fp32 + rng.normal(scale=0.3, size=fp32.shape),
                                         15.0, 0.9, ("default floor", "default floor"))
    assert not sqnr.ok
    assert parity.failures([sqnr]) == (
        f"QDQ vs fp32 logits SQNR dB is {sqnr.new}, which fails ≥ 15 dB (default floor).")
    ppl = Perplexity("fp32", 150 * math.log(36177.0), 700, 150)
    ceiling = perplexity.ceiling_check(ppl, 1.46, "≤ 1.46 (stories260k spec)")
    assert parity.failures([ceiling]).splitlines()[0] == (
        "fp32 word perplexity (held-out) is 36177, which fails ≤ 1.46 (stories260k spec).")
    size = parity.pte_size(100, 103)
    assert parity.failures([size]) == (
        ".pte size (equal) is 103 (against 100; difference +3 B (+3.00%)), which fails "
        "the same byte count as legacy's.")
