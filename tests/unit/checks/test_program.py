"""checks.program: a program whose methods are each one QnnBackend call passes; another delegate,
a second call, an operator left on CPU or a missing method fails, naming the method (what the
gate's ``test_pte_program`` and smoke's ``test_only_qnn_delegate`` assert)."""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.checks.program import qnn_only
from pytest_qnn_genai.hybrid import GRAPH_METHODS
from pytest_qnn_genai.runtime.pte_info import MethodInfo, PteInfo, TensorMeta


def _program(**methods: tuple[tuple[str, ...], tuple[str, ...]]) -> PteInfo:
    """A program whose methods have these (delegates, CPU operators)."""
    io = (TensorMeta("int32", (1, 1)),)
    return PteInfo(Path("x.pte"), 1, {name: MethodInfo(name, io, io, delegates, cpu)
                                      for name, (delegates, cpu) in methods.items()})


QNN_ONLY = (("QnnBackend",), ())


def test_a_qnn_only_program_passes() -> None:
    assert qnn_only(_program(prefill_forward=QNN_ONLY, kv_forward=QNN_ONLY), GRAPH_METHODS) == []
    assert qnn_only(_program(forward=QNN_ONLY), ("forward",)) == []


def test_each_way_off_qnn_fails_naming_the_method() -> None:
    left_on_cpu = _program(prefill_forward=QNN_ONLY,
                           kv_forward=(("QnnBackend",), ("aten::add.out",)))
    assert qnn_only(left_on_cpu, GRAPH_METHODS) == ["kv_forward left ops on CPU: aten::add.out"]
    split = _program(prefill_forward=(("QnnBackend", "QnnBackend"), ()), kv_forward=QNN_ONLY)
    assert qnn_only(split, GRAPH_METHODS) == [
        "prefill_forward: delegates ['QnnBackend', 'QnnBackend'], want one QnnBackend call"]
    xnnpack = _program(forward=(("XnnpackBackend",), ()))
    assert qnn_only(xnnpack, ("forward",)) == [
        "forward: delegates ['XnnpackBackend'], want one QnnBackend call"]
    on_cpu_only = _program(forward=((), ("aten::mm.out",)))
    assert qnn_only(on_cpu_only, ("forward",)) == [
        "forward: delegates [], want one QnnBackend call", "forward left ops on CPU: aten::mm.out"]
    assert qnn_only(_program(forward=QNN_ONLY), GRAPH_METHODS) == [
        f"{name}: no such method (the program has forward)" for name in GRAPH_METHODS]
