"""Reviewable snapshots (golden/snapshots/test_parity_snapshots.ambr; update: --snapshot-update).

An upstream change to llama.py's flags or defaults, to the compile spec, or to a flow's artifact
layout shows up as a snapshot diff in review instead of silently changing what is compared.
"""
from __future__ import annotations

import pytest

from pytest_qnn_genai.flows import config as flow_config
from pytest_qnn_genai.targets import EMULATOR, Target, soc

pytestmark = [pytest.mark.parity]

# A fixed list, so the snapshot does not depend on --soc.
SNAPSHOT_SOCS = ("SM8550", "SM8650", "SM8750", "SM8850")


@pytest.mark.parametrize("device", [EMULATOR, "phone"], ids=["emulator", "phone"])
@pytest.mark.parametrize("soc_name", SNAPSHOT_SOCS)
def test_compile_spec(soc_name, device, snapshot) -> None:
    from pytest_qnn_genai.stages.compile import compile_spec_data

    assert compile_spec_data(Target(soc(soc_name), "htp", device)) == snapshot


@pytest.mark.flow("legacy", "new")
@pytest.mark.parametrize("device", [EMULATOR, "phone"], ids=["emulator", "phone"])
def test_configuration_agreement(qnn_case, device, snapshot) -> None:
    from pytest_qnn_genai.flows.llama_cli import legacy_parser_defaults

    defaults = legacy_parser_defaults()
    target = Target(soc("SM8650"), "htp", device)
    assert {"agreement": flow_config.configuration_agreement(qnn_case, target, defaults),
            "legacy_parser_defaults": defaults} == snapshot


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
