"""A pytest plugin (``-p tests.support.loopback_builds``): a loopback phone's builds are the
emulator's.

The loopback phone (``scripts/loopback_phone.py``) runs what is pushed to it on the x86 HTP
simulator, which refuses the weight-shared context of a phone LLM build (its prefill and kv
graphs share weights; measured: "Shared weights buffer isn't supported on this platform", context
creation error 1000). Under this plugin the pipeline builds, keys and pushes the emulator's LLM
artifacts (.pte, legacy build) for a phone target (``Pipeline.build_target``), so the phone's
runners, the transport and the plugin's phone logic are what such a run tests, not a phone LLM
build. The smoke block's phone build (one graph, ``--shared_buffer``) loads on the simulator and
is pushed as it is. A check that holds an LLM artifact to being a phone build (the parity
snapshot's ``shared_buffer``) fails under it, as it must.
"""
from __future__ import annotations

import dataclasses

import pytest

from pytest_qnn_genai.pipeline import Pipeline
from pytest_qnn_genai.targets import EMULATOR, Target

_ORIGINAL = Pipeline.build_target


def _emulator_build(self: Pipeline, target: Target) -> Target:
    return dataclasses.replace(target, device=EMULATOR)


def pytest_configure(config: pytest.Config) -> None:
    Pipeline.build_target = _emulator_build  # type: ignore[method-assign]


def pytest_unconfigure(config: pytest.Config) -> None:
    Pipeline.build_target = _ORIGINAL  # type: ignore[method-assign]
