"""The new flow's stages (prepare → quantize → compile) on stories260k for SM8650, x86 emulator.

The build is the session's artifact cache entry (shared with the gate suite): quantize writes its
files, and compile loads them back from the entry folder alone (what makes per-stage caching
possible).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pytest_qnn_genai.checks import numerics
from pytest_qnn_genai.hybrid import CALIBRATION, DECODE, PREFILL
from pytest_qnn_genai.models.families import llama2c
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.stages.compile import (
    ARTIFACTS_JSON,
    COMPILE_SPEC_JSON,
    PteArtifacts,
    compile_pte,
    compile_spec_data,
)
from pytest_qnn_genai.stages.prepare import PreparedModel, run_calibration_graph
from pytest_qnn_genai.stages.quantize import (
    GRAPH_FILES,
    QDQ_JSON,
    QdqArtifacts,
    UnsupportedBackendError,
)
from pytest_qnn_genai.targets import Target, soc

pytestmark = [pytest.mark.flow("new")]

TARGET = Target(soc("SM8650"))
# fp32 vs CPU QDQ logits (SQNR, dB) of the trained stories260k, calibration graph, SM8650, measured
# on the eval prompt + 20 held-out stories (corpus seed 1338): min 16.6, median 17.7. Broken
# variants of the same quantization measured <= 11.6 (min / median): random-token calibration
# 10.7 / 11.6, plain 16a4w instead of the recipe 9.8 / 10.7, plain 8a8w 9.2 / 10.5, calibration on
# 4 tokens 2.9 / 3.6.
QDQ_SQNR_FLOOR_DB = 14.0
EMULATOR_COSINE_FLOOR = 0.99  # HTP simulator vs CPU QDQ (notes: ≥ 0.996 for the legacy .pte)
CONSTANTS = {"get_ar_len": 1, "get_max_seq_len": 128, "get_max_context_len": 128,
             "get_max_batch_size": 1, "get_n_layers": 5, "get_n_kv_heads": 4, "get_head_dim": 8,
             "get_dim": 64, "get_vocab_size": 512, "get_use_kv_cache": True,
             "get_kv_io_bit_width": 8, "get_bos_id": 1, "get_eos_id": 2, "get_n_bos": 1,
             "get_n_eos": 1}
# ExecuTorch ScalarType codes
SCALAR_TYPES = {0: torch.uint8, 3: torch.int32, 6: torch.float32, 27: torch.uint16}
# method → (inputs, outputs) as (dtype, shape, count), from notes/legacy-flow.md
IO_TABLE = {
    PREFILL: ([(torch.int32, [1, 32], 1), (torch.uint16, [1, 1, 32, 128], 1),
               (torch.int32, [1, 32], 1), (torch.uint8, [1, 4, 8, 96], 5),
               (torch.uint8, [1, 4, 96, 8], 5)],
              [(torch.uint16, [1, 32, 512], 1), (torch.uint8, [1, 4, 8, 32], 5),
               (torch.uint8, [1, 4, 32, 8], 5)]),
    DECODE: ([(torch.int32, [1, 1], 1), (torch.uint16, [1, 1, 1, 128], 1),
              (torch.int32, [1, 1], 1), (torch.uint8, [1, 4, 8, 127], 5),
              (torch.uint8, [1, 4, 127, 8], 5)],
             [(torch.uint16, [1, 1, 512], 1), (torch.uint8, [1, 4, 8, 1], 5),
              (torch.uint8, [1, 4, 1, 8], 5)]),
}


@pytest.fixture(scope="module")
def build(qnn_pipeline, qnn_sdk, case: ModelCase) -> dict[str, Any]:
    """prepare in memory; quantize and compile through the cache (compile reads quantize's files)."""
    return {"prepared": qnn_pipeline.prepared(case),
            "qdq_dir": qnn_pipeline.qdq_entry(case, TARGET).path,
            "pte_dir": qnn_pipeline.pte_entry(case, TARGET).path}


@pytest.fixture(scope="module")
def prepared(build: dict[str, Any]) -> PreparedModel:
    return build["prepared"]


@pytest.fixture(scope="module")
def qdq(build: dict[str, Any]) -> QdqArtifacts:
    return QdqArtifacts.load(build["qdq_dir"])  # a fresh load of the files


@pytest.fixture(scope="module")
def pte(build: dict[str, Any]) -> PteArtifacts:
    return PteArtifacts.load(build["pte_dir"])


@pytest.fixture(scope="module")
def program(pte: PteArtifacts) -> Any:
    from pytest_qnn_genai.runtime import programs

    return programs.load(pte.pte)[0].program


def _held_out_texts(case: ModelCase) -> list[str]:
    """The eval prompt and four stories the model was not trained or calibrated on."""
    from pytest_qnn_genai.models.corpus import generate

    return [case.eval_prompt, *generate(20, seed=1338)[:4]]


# ---- prepare ---------------------------------------------------------------------------------

def test_prepare_builds_the_three_static_graphs(prepared: PreparedModel) -> None:
    shapes = {name: [(tuple(t.shape), t.dtype) for t in inputs]
              for name, inputs in prepared.example_inputs.items()}
    for name, ar, cache in ((PREFILL, 32, 96), (DECODE, 1, 127), (CALIBRATION, 128, 0)):
        s = shapes[name]
        assert len(s) == 3 + 2 * 5
        assert s[0] == ((1, ar), torch.int32) and s[2] == ((1, ar), torch.int32)
        assert s[1] == ((1, 1, ar, 128), torch.float32)
        assert s[3:8] == [((1, 4, 8, cache), torch.float32)] * 5
        assert s[8:] == [((1, 4, cache, 8), torch.float32)] * 5
        assert prepared.graph_metadata[name]["get_ar_len"] == ar
    assert {k: prepared.metadata[k] for k in CONSTANTS} == CONSTANTS


def test_prepare_reference_matches_llama2c(prepared: PreparedModel, case: ModelCase) -> None:
    """The static LLaMA (permuted wq/wk, convs) computes what llama2.c's model computes."""
    tokens = prepared.encode(case.eval_prompt)
    assert tokens[0] == 1 and len(tokens) > 2
    ours = prepared.reference_logits(tokens)
    with torch.no_grad():
        theirs = llama2c.load_model(case)(torch.tensor([tokens]))[0].numpy()
    assert ours.shape == (len(tokens), 512)
    assert numerics.max_abs(theirs, ours) < 1e-3 * max(1.0, float(np.abs(theirs).max()))
    with pytest.raises(ValueError, match="need 1..128 tokens"):
        prepared.reference_logits([1] * 129)


# ---- quantize --------------------------------------------------------------------------------

def test_quantize_writes_loadable_qdq_graphs(qdq: QdqArtifacts) -> None:
    files = sorted(p.name for p in qdq.out_dir.iterdir() if p.name != "manifest.json")  # cache's
    assert files == sorted([*GRAPH_FILES.values(), QDQ_JSON])
    for name in (PREFILL, DECODE, CALIBRATION):
        gm = qdq.graph(name)
        assert isinstance(gm, torch.fx.GraphModule)
        targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
        assert "quantized_decomposed.quantize_per_tensor.default" in targets
        logits, k_caches, v_caches = gm(*qdq.example_inputs(name))
        ar = qdq.data["graphs"][name]["metadata"]["get_ar_len"]
        assert tuple(logits.shape) == (1, ar, 512) and len(k_caches) == len(v_caches) == 5
    data = json.loads((qdq.out_dir / QDQ_JSON).read_text())
    assert data["recipe"]["default_quant_dtype"] == "16a4w"
    assert data["recipe"]["class"].endswith("LlamaStories260KQuantRecipe")
    assert data["fixed_point_type"] == {"kv_type": "uint8", "io_type": "uint16"}
    meta = data["metadata"]
    assert meta["get_logits_scale"] > 0 and 0 <= meta["get_logits_zero_point"] <= 65535
    kv = [meta[f"get_kv_output_{i}_quant_attr"] for i in range(10)]
    assert all(a[0] > 0 and a[2:] == [0, 255, "torch.uint8"] for a in kv)


def _output_qparams(gm: torch.fx.GraphModule) -> list[tuple[float, int]]:
    """(scale, zero point) of the dequantize feeding each graph output."""
    (out,) = [n for n in gm.graph.nodes if n.op == "output"]
    return [(float(n.args[1]), int(n.args[2])) for n in out.args[0]]


def test_prefill_and_decode_share_the_calibrated_encodings(qdq: QdqArtifacts) -> None:
    """The encoding override: all three graphs end in the same logits/KV encodings."""
    cal, dec, pre = (_output_qparams(qdq.graph(n)) for n in (CALIBRATION, DECODE, PREFILL))
    assert cal == dec == pre
    meta = qdq.metadata
    assert cal[0] == (meta["get_logits_scale"], meta["get_logits_zero_point"])
    # upstream numbers the KV outputs in graph-node order (v0, k0, v1, ...), not output order
    kv = sorted(tuple(meta[f"get_kv_output_{i}_quant_attr"][:2]) for i in range(10))
    assert kv == sorted(cal[1:])


def test_qdq_logits_agree_with_fp32(prepared: PreparedModel, qdq: QdqArtifacts,
                                    case: ModelCase) -> None:
    cal = qdq.graph(CALIBRATION)
    scores = {}
    for prompt in _held_out_texts(case):
        tokens = prepared.encode(prompt)[:128]
        ref = prepared.reference_logits(tokens)
        scores[prompt[:24]] = numerics.sqnr_db(ref, run_calibration_graph(cal, prepared, tokens))
    assert min(scores.values()) >= QDQ_SQNR_FLOOR_DB, scores


# ---- compile ---------------------------------------------------------------------------------

def test_compile_writes_its_records(pte: PteArtifacts) -> None:
    assert json.loads((pte.out_dir / ARTIFACTS_JSON).read_text()) == {
        "text_decoder": "stories260k_hybrid_llama_qnn.pte"}
    assert 500_000 < pte.pte.stat().st_size < 2_020_000  # upstream CI's stories260k size bound


def test_compile_spec_record_says_what_the_program_carries(pte: PteArtifacts) -> None:
    """compile_spec.json is checked against the options read back out of the .pte, and those
    against llama.py's text-decoder spec for --enable_x86_64, written out here (examples/qualcomm/
    oss_scripts/llama/llama.py: use_weight_sharing and shared_buffer = not enable_x86_64,
    use_mha2sha=True, generate_htp_compiler_spec defaults: burst, quantized)."""
    from pytest_qnn_genai.runtime.pte_info import compile_options

    record = json.loads((pte.out_dir / COMPILE_SPEC_JSON).read_text())
    carried = compile_options(pte.pte)
    htp = carried["backend_options"]["htp_options"]
    assert (carried["soc_info"]["soc_model"], carried["soc_info"]["htp_info"]["htp_arch"]) == (
        "SM8650", "V75")
    assert carried["backend_options"]["backend_type"] == "kHtpBackend"
    assert (carried["shared_buffer"], htp["use_weight_sharing"]) == (False, False)
    assert (htp["performance_mode"], htp["precision"]) == ("kHtpBurst", "kHtpQuantized")
    assert (carried["use_mha2sha"], carried["online_prepare"]) == (True, False)
    assert record["soc"] == carried["soc_info"]["soc_model"]
    assert record["shared_buffer"] == carried["shared_buffer"]
    assert record["backend_options"]["use_weight_sharing"] == htp["use_weight_sharing"]
    assert record["backend_options"]["performance_mode"] == htp["performance_mode"]


def test_pte_is_delegated_to_qnn_only(pte: PteArtifacts) -> None:
    from executorch.exir._serialize._program import deserialize_pte_binary

    plans = {p.name: p for p in deserialize_pte_binary(pte.pte.read_bytes()).program.execution_plan}
    assert set(plans) == {PREFILL, DECODE, *CONSTANTS, "get_logits_scale", "get_logits_zero_point",
                          *(f"get_kv_output_{i}_quant_attr" for i in range(10))}
    for name in (PREFILL, DECODE):
        assert [d.id for d in plans[name].delegates] == ["QnnBackend"]
        assert list(plans[name].operators) == []  # nothing left on the portable CPU kernels


def test_pte_io_matches_the_legacy_table(program: Any) -> None:
    for method, (ins, outs) in IO_TABLE.items():
        meta = program.metadata(method)
        for count, get, spec in ((meta.num_inputs(), meta.input_tensor_meta, ins),
                                 (meta.num_outputs(), meta.output_tensor_meta, outs)):
            want = [(dt, shape) for dt, shape, n in spec for _ in range(n)]
            got = [(SCALAR_TYPES[int(get(i).dtype())], list(get(i).sizes())) for i in range(count)]
            assert got == want, method


def test_pte_constant_methods(program: Any, qdq: QdqArtifacts) -> None:
    def value(name: str) -> Any:
        out = program.load_method(name).execute([])
        out = [v.tolist() if hasattr(v, "tolist") else v for v in out]
        return out[0] if len(out) == 1 else out

    assert {name: value(name) for name in CONSTANTS} == CONSTANTS
    meta = qdq.metadata
    assert value("get_logits_scale") == pytest.approx(meta["get_logits_scale"], rel=1e-12)
    assert value("get_logits_zero_point") == meta["get_logits_zero_point"]
    for i in range(10):
        got = value(f"get_kv_output_{i}_quant_attr")
        want = meta[f"get_kv_output_{i}_quant_attr"]
        assert got[0] == pytest.approx(want[0], rel=1e-12) and list(got[1:]) == want[1:]


def test_prefill_on_emulator_matches_cpu_qdq(program: Any, qdq: QdqArtifacts,
                                             prepared: PreparedModel, case: ModelCase) -> None:
    """The .pte's prefill on the HTP simulator reproduces the QDQ prefill graph's logits."""
    tokens = prepared.encode(case.eval_prompt)
    n, ar, ctx = len(tokens), 32, 128
    meta = qdq.metadata
    padded = torch.zeros(1, ar, dtype=torch.int32)
    padded[0, :n] = torch.tensor(tokens, dtype=torch.int32)
    pos = torch.arange(ar, dtype=torch.int32).unsqueeze(0)
    attend = torch.zeros(1, 1, ar, ctx, dtype=torch.bool)
    for row in range(ar):
        attend[..., row, ctx - ar:ctx - ar + row + 1] = True
    cache_zp = [meta[f"get_kv_output_{i}_quant_attr"][1] for i in range(10)]
    caches = [torch.full((1, 4, 8, 96), zp, dtype=torch.uint8) for zp in cache_zp[:5]]
    caches += [torch.full((1, 4, 96, 8), zp, dtype=torch.uint8) for zp in cache_zp[5:]]
    mask_q = attend.to(torch.uint16) * 65535
    out = program.load_method(PREFILL).execute([padded, mask_q, pos, *caches])
    htp = (out[0][0, :n].float() - meta["get_logits_zero_point"]) * meta["get_logits_scale"]

    mask_f = torch.where(attend, 0.0, -255.0)
    zeros = [torch.zeros(c.shape) for c in caches]
    with torch.no_grad():
        cpu = qdq.graph(PREFILL)(padded, mask_f, pos, *zeros)[0][0, :n]
    cos = numerics.rowwise_cosine(cpu.numpy(), htp.numpy())
    assert cos.min() >= EMULATOR_COSINE_FLOOR, cos
    assert (cpu.argmax(-1) == htp.argmax(-1)).float().mean() >= 0.8


# ---- no compile needed -----------------------------------------------------------------------

def test_compile_spec_data_for_a_phone_and_unsupported_backends() -> None:
    phone = compile_spec_data(Target(soc("SM8750"), device="R5CX12345"))
    assert phone["soc"] == "SM8750" and phone["htp_arch"] == "v79"
    assert phone["shared_buffer"] is True and phone["backend_options"]["use_weight_sharing"] is True
    assert phone["graph_names"] == [DECODE, PREFILL]
    for backend in ("gpu", "lpai"):
        with pytest.raises(UnsupportedBackendError, match=f"backend '{backend}' is not supported"):
            compile_spec_data(Target(soc("SM8650"), backend=backend))


def test_prepare_refuses_what_it_does_not_implement(case: ModelCase) -> None:
    import dataclasses

    from pytest_qnn_genai.stages.prepare import UnsupportedCaseError, check_case

    check_case(case)
    check_case(case.variant("lookahead"))  # built: the decode graph at lookahead's length
    check_case(case.variant("kv"))  # built: the decode graph alone
    with pytest.raises(UnsupportedCaseError, match="model_mode 'spec'"):
        check_case(dataclasses.replace(case, model_mode="spec"))
    with pytest.raises(UnsupportedCaseError,
                       match=r"a LlamaModel variant architecture \(MultiScopeAwareLlamaModel\)"):
        check_case(dataclasses.replace(case, decoder_model="gemma3-1b"))
    check_case(dataclasses.replace(case, decoder_model="smollm2_135m"))  # R3: built
    with pytest.raises(UnsupportedCaseError, match=r"graph sharding .* \(num_sharding=3\)"):
        check_case(dataclasses.replace(case, decoder_model="llama3_2-3b_instruct"))


def test_prepare_asks_static_llama_for_r3_where_llama_py_does(case: ModelCase) -> None:
    """SpinQuant R3 is static_llama's own Hadamard rotation of q and k, switched on by the model
    config (``r3``: smollm2_135m's True, stories260k's False), as llama.py's process_model_args
    sets ``enable_r3``: the graph of an R3 model carries the rotation buffer, another's not."""
    import dataclasses

    from pytest_qnn_genai.stages.prepare import _build_graph, _model_args

    r3 = dataclasses.replace(case, decoder_model="smollm2_135m")
    assert _model_args(r3, PREFILL).enable_r3 is True
    assert _model_args(case, PREFILL).enable_r3 is False
    sd = case.family.load_checkpoint(case)
    assert any("r3_weight" in n for n, _ in _build_graph(r3, PREFILL, sd).named_buffers())
    assert not any("r3_weight" in n for n, _ in _build_graph(case, PREFILL, sd).named_buffers())


def test_prepare_builds_the_lookahead_decode_graph_at_its_length(qnn_sdk, case: ModelCase) -> None:
    """A lookahead build's decode graph takes llama.py's next_power_of_two((window + gcap) x
    (ngram - 1)) tokens (16 for stories260k's), its prefill and calibration graphs are the
    hybrid build's."""
    from pytest_qnn_genai.stages.prepare import prepare

    lookahead = prepare(case.variant("lookahead"))
    assert lookahead.graph_metadata[DECODE]["get_ar_len"] == 16
    assert lookahead.example_inputs[DECODE][0].shape == (1, 16)
    assert lookahead.graph_metadata[PREFILL]["get_ar_len"] == case.prefill_ar_len
    assert lookahead.graph_metadata[CALIBRATION]["get_ar_len"] == case.max_context_len


def test_compile_refuses_qdq_of_another_soc(qdq: QdqArtifacts, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="quantized for SM8650/htp"):
        compile_pte(qdq, Target(soc("SM8750")), tmp_path)
    assert not any(tmp_path.iterdir())
