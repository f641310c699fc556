"""Parity-suite fixtures: each flow's artifacts, program signatures and runs on the target (the
emulator, or the phone through its runner) for the same model case × target, the session's parity
table, and syrupy snapshots under golden/snapshots/<build label>/."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai.checks import parity, perplexity, qdq_windows
from pytest_qnn_genai.flows import genai_front
from pytest_qnn_genai.golden import no_record
from pytest_qnn_genai.golden.snapshots import build_label, golden_extension, snapshot_folder
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.products import needs

BOUNDS_DIR, BOUNDS_FILE = "genai", "qdq_windows.json"

if TYPE_CHECKING:
    import numpy as np

    from pytest_qnn_genai.flows.base import FlowArtifacts
    from pytest_qnn_genai.runtime.result import RunResult


@pytest.fixture(scope="session")
def built_for(qnn_pipeline, qnn_target):
    """The target the case's programs are built for (the emulator's builds for a device that runs
    the x86 simulator: upstream's x86 runners, the loopback phone)."""
    return qnn_pipeline.build_target(qnn_target)


@pytest.fixture
def snapshot(snapshot, qnn_settings, qnn_case, qnn_target, built_for):  # noqa: ANN001 - syrupy's
    """syrupy's snapshot, stored in ``<golden dir>/snapshots/<SoC>-<backend>-<kind of build>``
    (a nightly-tier case's in ``...-nightly``; update with --snapshot-update), named per SoC and
    kind of build, never per serial (``golden.snapshots.build_label``)."""
    return snapshot.use_extension(golden_extension(
        snapshot_folder(qnn_settings.golden_dir, qnn_target, built_for, qnn_case.tier),
        qnn_target.id, build_label(qnn_target, built_for)))


@pytest.fixture(scope="session")
def parity_table(qnn_parity) -> parity.ParityTable:  # noqa: ANN001
    """The session's parity table (printed in the terminal summary)."""
    return qnn_parity


@pytest.fixture(scope="session")
@needs("legacy")
def legacy_artifacts(qnn_pipeline, qnn_sdk, qnn_case, qnn_target) -> FlowArtifacts:
    """llama.py's build of the case for the target (cached): .pte, QDQ graph, build times."""
    return qnn_pipeline.artifacts("legacy", qnn_case, qnn_target)


@pytest.fixture(scope="session")
@needs("new")
def new_artifacts(qnn_pipeline, qnn_sdk, qnn_case, qnn_target) -> FlowArtifacts:
    """The staged flow's build of the case for the target (cached), in the same shape."""
    return qnn_pipeline.artifacts("new", qnn_case, qnn_target)


@pytest.fixture(scope="session")
def legacy_signature(legacy_artifacts) -> parity.Signature:
    """The legacy program's methods, constants and IO, read back from its .pte."""
    return parity.program_signature(legacy_artifacts.pte)


@pytest.fixture(scope="session")
def new_signature(new_artifacts) -> parity.Signature:
    """The staged program's methods, constants and IO, read back from its .pte."""
    return parity.program_signature(new_artifacts.pte)


def _run(pipeline, artifacts, case, target) -> RunResult:
    """A flow's own build on the target: the emulator in this process, a phone through its
    runner (each flow's phone build, pushed by content; logits from the kv-mode run). Judged
    for its outputs only: on the emulator a kept product, shared by programs of the same bytes."""
    return pipeline.run_pte(case, target, artifacts.pte, logits=True, judged=True)


@pytest.fixture(scope="session")
@needs(products.LLM_CONFIG)
def legacy_run(qnn_pipeline, legacy_artifacts, qnn_case, qnn_target):
    """Greedy generation of the eval prompt by the legacy program on the target, with logits."""
    return _run(qnn_pipeline, legacy_artifacts, qnn_case, qnn_target)


@pytest.fixture(scope="session")
@needs(products.LLM_CONFIG)
def new_run(qnn_pipeline, new_artifacts, qnn_case, qnn_target):
    """Greedy generation of the eval prompt by the staged program on the target, with logits."""
    return _run(qnn_pipeline, new_artifacts, qnn_case, qnn_target)


@pytest.fixture(scope="session")
def hf_case(qnn_case):
    """The case, when genai's Hugging Face loader can read it; else xfail with the reason."""
    reason = genai_front.not_huggingface_reason(qnn_case)
    if reason is not None:
        pytest.xfail(reason)
    return qnn_case


@pytest.fixture(scope="session")
def compared_windows(qnn_pipeline, hf_case) -> qdq_windows.Windows:
    """Held-out windows and the eval prompt followed by fp32's greedy continuation."""
    prompt = genai_front.runner_ids(hf_case, hf_case.eval_prompt)
    ref = qnn_pipeline.fp32_reference(hf_case, prompt)
    return qdq_windows.Windows(tuple(perplexity.heldout_documents(hf_case)), tuple(prompt),
                               tuple(ref.tokens))


@pytest.fixture(scope="session")
def fp32_rows(qnn_pipeline, hf_case, compared_windows) -> list[np.ndarray]:
    """transformers' fp32 rows of every window (the independent reference, cached)."""
    return compared_windows.rows([qnn_pipeline.transformers_logits(hf_case, ids)
                                  for ids in compared_windows.ids()])


def _case_bounds(path: Path, case: str) -> dict[str, dict[str, float]] | None:
    """``case``'s bounds in the file at ``path``; None if the file or its entry is absent."""
    try:
        return qdq_windows.load_bounds(path, case) if path.is_file() else None
    except KeyError:
        return None


@pytest.fixture(scope="session")
def genai_bounds(qnn_settings, hf_case) -> tuple[dict[str, dict[str, float]], str]:
    """The case's pair bounds (golden/genai/qdq_windows.json); a case without them fails as no
    record (golden/no_record.py). The tests ask for it first, so a case without bounds fails
    before the flows are built."""
    source = f"golden/{BOUNDS_DIR}/{BOUNDS_FILE}"
    bounds = _case_bounds(qnn_settings.golden_dir / BOUNDS_DIR / BOUNDS_FILE, hf_case.name)
    if bounds is None:
        pytest.fail(no_record.line(source, f"{hf_case.name}'s genai window bounds",
                                   "set them from the figures this test prints (the docs' gates "
                                   "page, genai_pipeline)"), pytrace=False)
    return bounds, source
