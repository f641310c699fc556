"""The parity comparisons as plain functions, on synthetic inputs (no builds)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_qnn_genai.checks import encodings, parity
from pytest_qnn_genai.checks.encodings import Encoding
from pytest_qnn_genai.checks.parity import Signature
from pytest_qnn_genai.models.spec import ParityTolerance


def _sig(**overrides) -> Signature:
    io = {m: {"inputs": [("int32", (1, n)), ("uint16", (1, 1, n, 128))],
              "outputs": [("uint16", (1, n, 512))]} for m, n in
          (("prefill_forward", 32), ("kv_forward", 1))}
    constants = {"get_max_seq_len": 128, "get_logits_scale": 0.0123, "get_logits_zero_point": 31000}
    sig = Signature(("get_logits_scale", "get_logits_zero_point", "get_max_seq_len", "kv_forward",
                     "prefill_forward"), io, constants, 1000)
    for k, v in overrides.items():
        object.__setattr__(sig, k, v)
    return sig


def test_identical_signatures_pass() -> None:
    assert all(c.ok for c in parity.compare_signatures(_sig(), _sig()))


def test_signature_differences_are_named() -> None:
    new = _sig()
    new = Signature(new.methods, {**new.io, "kv_forward": {
        "inputs": [("int32", (1, 1)), ("uint8", (1, 1, 1, 128))],
        "outputs": new.io["kv_forward"]["outputs"]}},
        {**new.constants, "get_max_seq_len": 256, "get_logits_scale": 0.0124}, 1000)
    checks = parity.compare_signatures(_sig(), new)
    msg = parity.failures(checks)
    assert "kv_forward inputs" in msg and "inputs[1]: legacy ('uint16'" in msg
    assert "get_max_seq_len: legacy 128 new 256" in msg
    assert "get_logits_scale" in msg


def _enc(key, scale, zp, qmin=0, qmax=255, dtype="uint8") -> Encoding:
    return Encoding(key, encodings._layer(key.removeprefix("w:")), (scale,), (zp,), qmin, qmax, dtype)


def test_encoding_steps() -> None:
    a = _enc("layers.0.attention/add.Tensor#0", 0.01, 128)
    assert encodings.encoding_steps(a, a) == 0.0
    assert encodings.encoding_steps(a, _enc(a.key, 0.01, 129)) == pytest.approx(1.0)  # one step
    assert encodings.compare_encodings({a.key: a}, {a.key: _enc(a.key, 0.01, 129)}).over
    assert encodings.encoding_steps(a, _enc(a.key, 0.02, 128)) > 1.0
    assert math.isinf(encodings.encoding_steps(a, _enc(a.key, 0.01, 32768, 0, 65535, "uint16")))


def test_encodings_with_nothing_matched_fail_instead_of_passing_vacuously() -> None:
    a = _enc("layers.0.attention/add.Tensor#0", 0.01, 128)
    b = _enc("layers.0.attention/mul.Tensor#0", 0.01, 128)
    for legacy, new in (({}, {}), ({a.key: a}, {b.key: b})):
        report = encodings.compare_encodings(legacy, new)
        assert report.matched == 0 and not report.ok
        assert not any(c.ok for c in report.checks())


def test_encoding_report_has_a_per_layer_table() -> None:
    legacy = {k: _enc(k, 0.01, 128) for k in ("layers.0.attention/add.Tensor#0",
                                               "layers.1.feed_forward/mul.Tensor#0", "input/0")}
    new = dict(legacy)
    new["layers.1.feed_forward/mul.Tensor#0"] = _enc("layers.1.feed_forward/mul.Tensor#0", 0.03, 128)
    del new["input/0"]
    report = encodings.compare_encodings(legacy, new)
    assert not report.ok and report.only_legacy == ["input/0"]
    table = report.table()
    assert "layers.1" in table and "layers.1.feed_forward/mul.Tensor#0" in table
    assert "only in legacy: input/0" in table
    assert [r[0] for r in report.worst_per_layer()] == ["layers.0", "layers.1"]


def test_runs_and_table() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 16)).astype(np.float32)
    a = SimpleNamespace(tokens=[1, 2, 3, 4], logits=logits)
    b = SimpleNamespace(tokens=[1, 2, 9, 9], logits=logits + 0.5)
    checks = parity.compare_runs(a, b)
    assert not all(c.ok for c in checks)
    assert "first differs at step 2" in parity.failures(checks)
    assert all(c.ok for c in parity.compare_runs(a, SimpleNamespace(tokens=[1, 2, 3, 4],
                                                                     logits=logits.copy())))
    table = parity.ParityTable()
    table.add(checks, prefix="[x] ")
    table.merge(table.to_dicts())  # rows shipped back from a worker are not duplicated
    lines = table.format()
    assert lines[0].split("  ")[:1] == ["check"] and lines[0].split() == [
        "check", "legacy", "/", "A", "new", "/", "B", "delta", "verdict"]
    assert len(lines) == 2 + len(checks)
    # the same byte count by default: one byte more fails; a case's reasoned tolerance allows 5 %
    assert parity.pte_size(100, 100).ok and not parity.pte_size(100, 101).ok
    loose = ParityTolerance(reason="another recipe", max_encoding_steps=1)
    assert parity.pte_size(100, 104, loose).ok
    assert not parity.pte_size(100, 106, loose).ok
    assert "(case tolerance: another recipe)" in parity.pte_size(100, 104, loose).judge
    assert parity.pte_size(100, 104, loose).name == "pte_bytes"  # report history keys on it
