"""Reviewable snapshots (golden/snapshots/<build label>/test_parity_snapshots.ambr).

Every snapshot is taken from what a build really carries: the QNN compile options read back out
of each built .pte, the argv llama.py was run with, each flow's artifact layout. An upstream change
to llama.py's flags or defaults, to the compile options, or to a flow's artifact layout shows up
as a snapshot diff in review instead of silently changing what is compared; where the two flows
must agree, the test asserts it before it snapshots.
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.checks import parity
from pytest_qnn_genai.flows import config as flow_config
from pytest_qnn_genai.hybrid import CALIBRATION
from pytest_qnn_genai.runtime.pte_info import compile_options, inspect_pte

pytestmark = [pytest.mark.parity, pytest.mark.flow("legacy", "new")]


def test_compile_options_carried_by_both_programs(legacy_artifacts, new_artifacts, parity_table,
                                                  qnn_case, qnn_target, built_for,
                                                  snapshot, qnn_record) -> None:
    legacy, new = compile_options(legacy_artifacts.pte), compile_options(new_artifacts.pte)
    checks = parity.compare_compile_options(legacy, new)
    parity_table.add(checks, prefix=f"[{qnn_case.name} {qnn_target.id}] ")
    qnn_record("parity", checks)
    assert all(c.ok for c in checks), parity.failures(checks)
    assert new["soc_info"]["soc_model"] == qnn_target.soc.name
    assert new["soc_info"]["htp_info"]["htp_arch"] == qnn_target.soc.htp_arch.upper()
    assert new["shared_buffer"] is (not built_for.is_emulator)  # llama.py: not --enable_x86_64
    assert new == snapshot


def test_configuration_agreement(qnn_pipeline, qnn_case, qnn_target, built_for,
                                 new_artifacts, snapshot) -> None:
    """The staged build, read back out of its .pte (methods, IO, constants, compile options) and
    its quantize record (recipe, calibration prompts), carries what llama.py was told to build:
    the argv it ran with, parsed by llama.py's own parser (``flows/config.py``)."""
    legacy = qnn_pipeline.legacy(qnn_case, qnn_target)
    args = flow_config.parse_legacy_argv(legacy.argv)
    told = flow_config.legacy_settings(args, legacy.pte.parent,
                                       flow_config.llama_recipe(args.decoder_model))
    qdq = qnn_pipeline.qdq(qnn_case, built_for)
    assert qdq.path(CALIBRATION) == new_artifacts.qdq_graph  # the record of the build compared
    built = flow_config.staged_settings(inspect_pte(new_artifacts.pte),
                                        compile_options(new_artifacts.pte), qdq.data)
    agreement = flow_config.agreement_of(built, told)
    assert not flow_config.disagreements(agreement), "\n".join(
        flow_config.disagreements(agreement))
    assert agreement == snapshot


@pytest.mark.soc("SM8650")  # the layout does not depend on the SoC: one snapshot
@pytest.mark.flow("legacy")
def test_legacy_artifact_layout(qnn_case, legacy_artifacts, legacy_signature, snapshot) -> None:
    assert qnn_case.model_mode == "hybrid"  # text_decoder: prefill_forward + kv_forward
    assert flow_config.artifact_layout(legacy_artifacts, legacy_signature) == snapshot


@pytest.mark.soc("SM8650")
@pytest.mark.flow("new")
def test_new_artifact_layout(qnn_case, new_artifacts, new_signature, snapshot) -> None:
    assert qnn_case.model_mode == "hybrid"
    assert flow_config.artifact_layout(new_artifacts, new_signature) == snapshot
