"""Legacy (executorch's llama.py) vs new (the staged pipeline): same model case, same target.

If these hold for every case × target, the legacy flow can be deleted: the new flow builds a
program with the same interface (methods, constants, IO), the same quantisation encodings (every
tensor identical, in the calibration graph and in the graphs it deploys), QDQ graphs that compute
bit-equal logits on the same tokens, and the same behaviour on the target (bit-equal logits, the
same greedy tokens: on the emulator, or each flow's phone build through the phone's runner), in a
byte-identical .pte. Both flows claim one recipe, so identity is the default; a case's spec may
declare a tolerance for the pair, with its reason (``gate.parity["legacy:new"]``,
``checks/bounds.py``).
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import bounds, encodings, parity, perplexity, program_bytes
from pytest_qnn_genai.hybrid import LOWERED_GRAPHS

pytestmark = [pytest.mark.parity, pytest.mark.flow("legacy", "new")]


def _record(table: parity.ParityTable, record, checks, case, target) -> None:  # noqa: ANN001
    """The rows into the terminal's parity table and, as figures, into the run report."""
    table.add(checks, prefix=f"[{case.name} {target.id}] ")
    record("parity", checks)


# A difference measured where the staged program's QDQ graphs were quantized after other work in
# one process (qwen3_toy for SM8750: quantized again alone, its program is byte-identical to
# llama.py's; the docs' measurements page, "Parity findings"): exactly this xfails, identical bytes
# pass, any other difference fails.
QUANTIZED_AFTER_OTHER_WORK = {
    ("qwen3_toy", "SM8750"): tuple(
        f"method {m} delegate 0 QNN context binary: 1126400 bytes in legacy, 1126400 in new; "
        "2239 bytes differ, first at offset 1048192" for m in LOWERED_GRAPHS),
}


def test_build_times_and_sizes(legacy_artifacts, new_artifacts, parity_table, qnn_case,
                               qnn_target, qnn_record) -> None:
    """The two programs' bytes (sha256, build stamps aside; where they differ) and sizes. Both
    are lowered in a process of their own (llama.py's subprocess, ``stages/compile_alone.py``):
    lowered after other work in one process, the same graphs give other bytes."""
    tolerance = bounds.parity_tolerance(qnn_case, "legacy", "new")
    diff = program_bytes.compare(legacy_artifacts.pte, new_artifacts.pte, ("legacy", "new"))
    pte = [parity.pte_sha256(diff, tolerance), parity.pte_size(*diff.sizes, tolerance)]
    build = parity.Check("build s (cache manifests)", legacy_artifacts.total_build_s,
                         new_artifacts.total_build_s,
                         f"{new_artifacts.total_build_s - legacy_artifacts.total_build_s:+.1f}s "
                         f"{new_artifacts.build_s}", info=True, name="build_s",
                         better="lower")
    _record(parity_table, qnn_record, [build, *pte], qnn_case, qnn_target)
    assert pte[1].ok, parity.failures(pte[1:])
    if diff.parts and diff.parts == QUANTIZED_AFTER_OTHER_WORK.get((qnn_case.name,
                                                                   qnn_target.soc.name)):
        pytest.xfail("the known difference of a program quantized after other work in one "
                     "process: " + "; ".join(diff.parts))
    assert pte[0].ok, parity.failures(pte[:1])


def test_same_methods_constants_and_io(legacy_signature, new_signature, parity_table, qnn_case,
                                       qnn_target, qnn_record) -> None:
    checks = parity.compare_signatures(legacy_signature, new_signature)
    _record(parity_table, qnn_record, checks, qnn_case, qnn_target)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_qdq_encodings_identical(legacy_artifacts, new_artifacts, parity_table, qnn_case,
                                 qnn_target, qnn_pipeline, qnn_record) -> None:
    legacy = qnn_pipeline.qdq_encodings(legacy_artifacts.qdq_graph)  # cached with the graphs
    new = qnn_pipeline.qdq_encodings(new_artifacts.qdq_graph)
    assert legacy.input_shapes == new.input_shapes, \
        "legacy decode_qdq.pt2 is not the calibration graph"
    tolerance = bounds.parity_tolerance(qnn_case, "legacy", "new")
    report = encodings.compare_encodings(legacy.encodings, new.encodings,
                                         tolerance.max_encoding_steps, tolerance.reason)
    checks = report.checks()
    _record(parity_table, qnn_record, checks, qnn_case, qnn_target)
    print(report.table())
    assert report.ok, parity.failures(checks[:1] if not checks[0].ok else checks[1:])


@pytest.mark.parametrize("graph", LOWERED_GRAPHS)
def test_deployed_graphs_carry_legacys_encodings(graph, legacy_artifacts, new_artifacts,
                                                 parity_table, qnn_case, qnn_target,
                                                 qnn_pipeline, qnn_record) -> None:
    """The staged flow's deployed QDQ graphs (``kv_forward``, ``prefill_forward``: what its
    program is compiled from) against legacy's calibration graph, tensor by tensor: the encoding
    override must carry every calibrated encoding into them unchanged (llama.py keeps only its
    calibration graph, whose encodings its own override copies)."""
    legacy = qnn_pipeline.qdq_encodings(legacy_artifacts.qdq_graph)
    deployed = qnn_pipeline.qdq_encodings(
        qnn_pipeline.qdq(qnn_case, qnn_pipeline.build_target(qnn_target)).path(graph))
    tolerance = bounds.parity_tolerance(qnn_case, "legacy", "new")
    report = encodings.compare_encodings(legacy.encodings, deployed.encodings,
                                         tolerance.max_encoding_steps, tolerance.reason)
    checks = report.checks(graph)
    _record(parity_table, qnn_record, checks, qnn_case, qnn_target)
    assert report.ok, parity.failures(checks[:1] if not checks[0].ok else checks[1:])


def test_qdq_graphs_compute_the_same_outputs(qnn_pipeline, qnn_case, legacy_artifacts,
                                             new_artifacts, legacy_run, parity_table,
                                             qnn_target, qnn_record) -> None:
    """Both flows' QDQ calibration graphs (legacy ``decode_qdq.pt2``, the staged ``calibration``
    graph), teacher-forced on the same tokens (the prompt and legacy's generation on the
    target): the logits of every position bit-equal (or within the case's tolerance)."""
    from pytest_qnn_genai.stages.reference import teacher_forced

    prepared = qnn_pipeline.prepared(qnn_case)
    prompt, tokens = list(legacy_run.prompt_tokens), list(legacy_run.tokens)
    logits = {name: teacher_forced(encodings.load_qdq(art.qdq_graph).module(check_guards=False),
                                   prepared, prompt, tokens).logits
              for name, art in (("legacy", legacy_artifacts), ("new", new_artifacts))}
    checks = parity.compare_logits(logits["legacy"], logits["new"],
                                   bounds.parity_tolerance(qnn_case, "legacy", "new"),
                                   what="QDQ graph logits", name="qdq_")
    _record(parity_table, qnn_record, checks, qnn_case, qnn_target)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_same_outputs_on_the_target(legacy_run, new_run, parity_table, qnn_case,
                                    qnn_target, qnn_record) -> None:
    assert legacy_run.prompt_tokens == new_run.prompt_tokens
    checks = parity.compare_runs(legacy_run, new_run,
                                 bounds.parity_tolerance(qnn_case, "legacy", "new"))
    _record(parity_table, qnn_record, checks, qnn_case, qnn_target)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_heldout_perplexity_on_the_target(qnn_pipeline, legacy_artifacts, new_artifacts,
                                          qnn_case, qnn_target, heldout_documents, heldout_fp32,
                                          heldout_target, parity_table, qnn_record) -> None:
    """Both programs score the held-out stories on the target (checks/perplexity.py): the new
    one's word perplexity the same as legacy's (or within the case's tolerance); KL and top-1
    agreement with fp32 shown."""
    docs = heldout_documents
    rows = {name: heldout_target(qnn_pipeline, qnn_case, qnn_target, art.pte, docs)
            for name, art in (("legacy", legacy_artifacts), ("new", new_artifacts))}
    scores = {name: perplexity.score("target", docs, r) for name, r in rows.items()}
    checks = perplexity.parity_checks(scores["legacy"], scores["new"],
                                      perplexity.kl_and_top1(heldout_fp32, rows["legacy"]),
                                      perplexity.kl_and_top1(heldout_fp32, rows["new"]),
                                      bounds.parity_tolerance(qnn_case, "legacy", "new"))
    _record(parity_table, qnn_record, checks, qnn_case, qnn_target)
    assert all(c.ok for c in checks), parity.failures(checks)
