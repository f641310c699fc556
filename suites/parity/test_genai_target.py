"""genai_pipeline end to end on the target: the program upstream's stages build (preparation,
quantization with upstream's Hugging Face recipe, compilation through the injected
``CompilerAdapter``: ``flows/genai_run.py``) run where the gate's programs run (the emulator,
upstream's x86 runner, a phone), and judged there.

genai's program is one graph without a KV cache (ids of the whole window in, every position's
logits out), so it is fed the same teacher-forced windows as the QDQ graphs
(``test_genai_front.py``) and held (1) to its own QDQ graph (logits SQNR: what the target loses of
what quantization kept) and (2) beside llama.py's program on the same target and windows (its
kv-mode rows), each figure within bounds set from measurement (``golden/genai/qdq_windows.json``).
Upstream's inference stage then runs genai's program (``window_generate``: one whole-window pass
per token) and what it reports is held to the harness's own run of that program.
"""
from __future__ import annotations

import numpy as np
import pytest

from pytest_qnn_genai.checks import parity, qdq_windows
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.flows import genai_front
from pytest_qnn_genai.flows.genai_inference import RESULT_FILE, stage_matches_run, window_generate
from pytest_qnn_genai.golden import no_record
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.genai import genai_build, window_rows
from pytest_qnn_genai.pipeline.products import needs

pytestmark = [pytest.mark.parity, pytest.mark.flow("legacy", "genai")]

TARGET_VS_QDQ = "genai_target_vs_qdq"  # the bounds' pair names (golden/genai/qdq_windows.json)
VS_LEGACY_ON_TARGET = "genai_vs_legacy_target"


@pytest.fixture(scope="session")
@needs(products.GENAI)
def genai_program(qnn_pipeline, hf_case, qnn_target) -> genai_front.GenAIQdq:
    """genai's build of the case, with its program (built for the target's builds)."""
    built = genai_build(qnn_pipeline, hf_case, qnn_target)[1]
    assert built.pte is not None and built.pte.is_file(), built.record
    return built


@pytest.fixture(scope="session")
def genai_forward(qnn_pipeline, hf_case, qnn_target):
    """genai's program's logits rows of ``ids`` on the target (one whole-window pass)."""
    digests: dict[str, str] = {}

    def forward(pte, ids: list[int]) -> np.ndarray:
        digest = digests.setdefault(str(pte), file_sha256(pte))
        out = qnn_pipeline.run_method(qnn_target, pte,
                                      [genai_front.padded(ids, hf_case.max_context_len)], digest)
        return np.asarray(out[0][0, :len(ids)].float().numpy())
    return forward


@pytest.fixture(scope="session")
def target_metrics(qnn_pipeline, hf_case, qnn_target, compared_windows, fp32_rows, genai_program,
                   genai_forward, legacy_artifacts):
    """On the target: genai's program's and llama.py's program's rows of every window against
    fp32, and genai's QDQ graph's rows (its program's reference)."""
    ids = compared_windows.ids()
    genai_rows = compared_windows.rows([genai_forward(genai_program.pte, w) for w in ids])
    legacy_rows = compared_windows.rows([qnn_pipeline.target_logits(hf_case, qnn_target,
                                                                     legacy_artifacts.pte, w)
                                         for w in ids])
    qdq_rows = window_rows(qnn_pipeline, hf_case, genai_program.graph_path, genai_front.GENAI,
                           compared_windows)
    return ({"legacy target": qdq_windows.metrics(compared_windows, fp32_rows, legacy_rows),
             "genai target": qdq_windows.metrics(compared_windows, fp32_rows, genai_rows),
             "genai QDQ": qdq_windows.metrics(compared_windows, fp32_rows, qdq_rows)},
            qdq_rows, genai_rows)


def _bounds(genai_bounds, name: str) -> tuple[dict[str, float], str]:
    pair_bounds, source = genai_bounds
    if name not in pair_bounds:
        pytest.fail(no_record.line(source, f"genai's {name} bounds", "set them from the figures "
                                   "this test prints (the docs' gates page, genai_pipeline)"),
                    pytrace=False)
    return pair_bounds[name], source


def test_genai_program_on_the_target(genai_bounds, target_metrics, hf_case, qnn_target,
                                     parity_table, qnn_record) -> None:
    """genai's program vs its own QDQ graph (SQNR), and beside llama.py's program on the same
    target (each figure vs fp32 within its measured bound)."""
    m, qdq_rows, genai_rows = target_metrics
    print(f"\n{hf_case.name} {qnn_target.id} programs on the target vs transformers fp32, "
          "teacher-forced windows\n" + qdq_windows.table(m))
    own, source = _bounds(genai_bounds, TARGET_VS_QDQ)
    checks = [qdq_windows.agreement_check("genai target vs its QDQ graph",
                                          "genai_target_vs_qdq_sqnr_db", qdq_rows, genai_rows,
                                          own["min_sqnr_db"], source)]
    print(f"{checks[0].check}: {checks[0].new}")
    pair, source = _bounds(genai_bounds, VS_LEGACY_ON_TARGET)
    checks += qdq_windows.pair_checks("genai vs legacy on the target", m["legacy target"],
                                      m["genai target"], pair, source)
    parity_table.add(checks, prefix=f"[{hf_case.name} {qnn_target.id}] ")
    qnn_record("parity", checks)
    assert all(c.ok for c in checks), parity.failures(checks)


def test_genai_inference_runs_genai_program(qnn_target, hf_case, genai_program, genai_forward,
                                            parity_table, qnn_record, tmp_path) -> None:
    """Upstream's inference stage on genai's own program, held to the harness's run of it."""
    generate = window_generate(hf_case, genai_forward, qnn_target.id)
    own = generate(genai_program.pte, hf_case.eval_prompt, hf_case.max_new_tokens)
    checks = stage_matches_run(hf_case, qnn_target, genai_program.pte, generate, own, tmp_path)
    parity_table.add(checks, prefix=f"[{hf_case.name} {qnn_target.id} genai program] ")
    qnn_record("parity", checks)
    print(f"\n{hf_case.name} {qnn_target.id} genai program, greedy: {own.text!r}")
    assert (tmp_path / "inference_output" / RESULT_FILE).is_file()
    assert all(c.ok for c in checks), parity.failures(checks)
