"""checks.program, what the gate's ``test_pte_program`` and smoke's ``test_only_qnn_delegate``
assert of a program read back: the program the case asks for passes; another delegate, an
operator left on CPU, another constant, KV cache IO of another width or ``head_dim``, another
prefill length, layer count or vocabulary each fails, naming the method, input or constant."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_qnn_genai.checks.program import HybridShape, constant_problems, io_problems, qnn_only
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


SHAPE = HybridShape(prefill_ar=32, context=128, layers=2, kv_heads=4, head_dim=16, vocab=512,
                    kv_dtype="uint8")


def _hybrid(shape: HybridShape = SHAPE) -> PteInfo:
    """The program ``shape`` asks for (what the gate reads back out of a good build)."""
    def graph(name: str, n: int) -> MethodInfo:
        past = shape.context - n
        keys = TensorMeta(shape.kv_dtype, (1, shape.kv_heads, shape.head_dim, past))
        values = TensorMeta(shape.kv_dtype, (1, shape.kv_heads, past, shape.head_dim))
        inputs = (TensorMeta("int32", (1, n)), TensorMeta("uint16", (1, 1, n, shape.context)),
                  TensorMeta("int32", (1, n)), *[keys] * shape.layers, *[values] * shape.layers)
        new_kv = TensorMeta(shape.kv_dtype, (1, shape.kv_heads, shape.head_dim, n))
        outputs = (TensorMeta("uint16", (1, n, shape.vocab)), *[new_kv] * (2 * shape.layers))
        return MethodInfo(name, inputs, outputs, ("QnnBackend",), ())

    return PteInfo(Path("x.pte"), 1, {"prefill_forward": graph("prefill_forward", shape.prefill_ar),
                                      "kv_forward": graph("kv_forward", 1)})


def test_the_program_the_case_asks_for_passes_and_each_other_shape_fails() -> None:
    assert io_problems(_hybrid(), SHAPE) == []
    kv16 = _hybrid(replace(SHAPE, kv_dtype="uint16"))  # the KV IO of another bit width
    assert io_problems(kv16, SHAPE) == [
        "prefill_forward input 3: (dtype, shape) ('uint16', (1, 4, 16, 96)), want "
        "('uint8', (1, 4, 16, 96))",
        "kv_forward input 3: (dtype, shape) ('uint16', (1, 4, 16, 127)), want "
        "('uint8', (1, 4, 16, 127))"]
    wide = _hybrid(replace(SHAPE, head_dim=32))  # head_dim not ModelArgs'
    assert [p.split(":")[0] for p in io_problems(wide, SHAPE)] == [
        "prefill_forward input 3", "kv_forward input 3"]
    ar16 = _hybrid(replace(SHAPE, prefill_ar=16))  # another prefill_ar_len
    assert io_problems(ar16, SHAPE)[0].startswith("prefill_forward input 0: (dtype, shape) "
                                                  "('int32', (1, 16)), want ('int32', (1, 32))")
    one_layer = io_problems(_hybrid(replace(SHAPE, layers=1)), SHAPE)  # a layer short
    assert [p.split(":")[0] for p in one_layer] == [
        "prefill_forward input 4", "prefill_forward outputs", "kv_forward input 4",
        "kv_forward outputs"]  # the values' cache where the keys' second layer should be
    assert one_layer[1] == "prefill_forward outputs: 3, want 5"
    missing_kv = _hybrid()
    cut = missing_kv.methods["kv_forward"]
    missing_kv.methods["kv_forward"] = replace(cut, inputs=cut.inputs[:-1])
    assert io_problems(missing_kv, SHAPE) == ["kv_forward input: 6, want 7"]
    vocab = _hybrid(replace(SHAPE, vocab=256))
    assert io_problems(vocab, SHAPE) == [
        "prefill_forward output 0: (dtype, shape) ('uint16', (1, 32, 256)), want "
        "('uint16', (1, 32, 512))",
        "kv_forward output 0: (dtype, shape) ('uint16', (1, 1, 256)), want "
        "('uint16', (1, 1, 512))"]
    only_prefill = _hybrid()
    del only_prefill.methods["kv_forward"]
    assert io_problems(only_prefill, SHAPE) == ["kv_forward: no such method"]


def test_each_constant_is_held_to_the_case_and_the_qdq_graph() -> None:
    constants = {"get_max_seq_len": 128, "get_bos_id": 1, "get_logits_scale": 0.0123}
    exact, close = {"get_max_seq_len": 128, "get_bos_id": 1}, {"get_logits_scale": 0.0123}
    assert constant_problems(constants, exact, close) == []
    assert constant_problems({**constants, "get_logits_scale": 0.0123 * (1 + 1e-9)}, exact,
                             close) == []  # float rounding of one value
    assert constant_problems({**constants, "get_max_seq_len": 256}, exact, close) == [
        "get_max_seq_len: the program says 256, want 128"]
    assert constant_problems({**constants, "get_logits_scale": 0.0124}, exact, close) == [
        "get_logits_scale: the program says 0.0124, want 0.0123"]
    assert constant_problems({"get_logits_scale": 0.0123}, exact, close) == [
        "get_max_seq_len: the program has no such constant method",
        "get_bos_id: the program has no such constant method"]
