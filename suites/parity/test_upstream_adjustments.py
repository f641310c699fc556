"""Each adjustment the harness makes to upstream's code, dropped alone: upstream's own failure,
named, as a strict xfail.

genai_pipeline gets through on a Hugging Face case only with the adjustments of
``flows/genai_run.py`` (``ADJUSTMENTS``); llama.py's package imports only beside the torchtune
stand-in (``compat/torchtune.py``). Each test here runs upstream's path with exactly one of them
removed (or all, for genai's defaults) and expects upstream's recorded failure: its stage, its
exception type and its message. A different failure fails the test; a pass (upstream fixed it)
XPASSes, which fails the run until the adjustment is removed.
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable

import pytest

from pytest_qnn_genai.flows import genai_front, genai_run
from pytest_qnn_genai.flows.genai_run import GenAIRun

pytestmark = [pytest.mark.parity, pytest.mark.flow("genai")]

DYNAMIC_CACHE = r"Found <class 'transformers\.cache_utils\.DynamicCache'> in output"
TWO_INPUTS = r"forward\(\) takes 2 positional arguments but 3 were given"
NO_BODY = r"DefaultCompilerAdapter has no body yet"
IMPORT_TIMEOUT_S = 300


class UpstreamFailure(Exception):  # noqa: N818 - the expected upstream failure, not an error
    """Upstream failed exactly as recorded (the strict xfails' ``raises``)."""


def expect_upstream(run: Callable[[], object], stage: str, cause: type[BaseException],
                    pattern: str) -> None:
    """Run ``run``; upstream's ``StageError`` from ``stage`` caused by ``cause`` matching
    ``pattern`` becomes :class:`UpstreamFailure`; any other failure propagates as it is."""
    try:
        run()
    except genai_front.GenAIStageFailed as e:
        if genai_front.is_upstream_failure(e, stage, cause, pattern):
            raise UpstreamFailure(str(e)) from e
        raise


@pytest.fixture
def genai_case_run(qnn_pipeline, hf_case, qnn_target, tmp_path) -> GenAIRun:
    """The case's genai build request as the gate makes it, in a scratch folder."""
    return GenAIRun(hf_case, qnn_pipeline.build_target(qnn_target), artifact_dir=tmp_path)


def _without(run: GenAIRun, adjustment: str | None) -> Callable[[], None]:
    return lambda: genai_run.run_without(run, adjustment)


@pytest.mark.xfail(raises=UpstreamFailure, strict=True,
                   reason="genai_pipeline's defaults: the model is loaded with use_cache on and "
                          "torch.export meets a DynamicCache in its output")
def test_upstreams_defaults(genai_case_run) -> None:
    expect_upstream(_without(genai_case_run, None), genai_front.QUANTIZATION, RuntimeError,
                    DYNAMIC_CACHE)


@pytest.mark.xfail(raises=UpstreamFailure, strict=True,
                   reason="GenAIPipeline hands its stages no extra_options: the calibration "
                          "dataset never reaches preparation, whose default adapter yields "
                          "(input_ids, attention_mask) for a one-input graph")
def test_without_stage_options_forwarding(genai_case_run) -> None:
    expect_upstream(_without(genai_case_run, genai_run.FORWARDING), genai_front.QUANTIZATION,
                    TypeError, TWO_INPUTS)


@pytest.mark.xfail(raises=UpstreamFailure, strict=True,
                   reason="the model's config.json says use_cache: torch.export meets a "
                          "DynamicCache in the output")
def test_without_use_cache_off(genai_case_run) -> None:
    expect_upstream(_without(genai_case_run, genai_run.USE_CACHE), genai_front.QUANTIZATION,
                    RuntimeError, DYNAMIC_CACHE)


@pytest.mark.xfail(raises=UpstreamFailure, strict=True,
                   reason="the default calibration adapter yields (input_ids, attention_mask) "
                          "for a graph exported with input_ids alone")
def test_without_one_input_calibration(genai_case_run) -> None:
    expect_upstream(_without(genai_case_run, genai_run.CALIBRATION), genai_front.QUANTIZATION,
                    TypeError, TWO_INPUTS)


@pytest.mark.xfail(raises=UpstreamFailure, strict=True,
                   reason="executorch 1.5.1: DefaultCompilerAdapter.compile_model has no body")
def test_without_compiler_injection(genai_case_run) -> None:
    expect_upstream(_without(genai_case_run, genai_run.COMPILER), genai_run.COMPILATION,
                    NotImplementedError, NO_BODY)


TORCHTUNE_MISSING = r"ModuleNotFoundError: No module named 'torchtune'"


@pytest.mark.xfail(raises=UpstreamFailure, strict=True,
                   reason="llama.py's package imports torchtune (PyPI's 0.6.1 does not import "
                          "against this torchao); the harness stands in for its names")
def test_llama_py_without_the_torchtune_stand_in() -> None:
    """``import executorch.examples.qualcomm.oss_scripts.llama`` in a fresh interpreter of this
    environment, without the stand-in."""
    done = subprocess.run([sys.executable, "-c", "import executorch.examples.qualcomm."
                           "oss_scripts.llama"], capture_output=True, text=True,
                          timeout=IMPORT_TIMEOUT_S, check=False)
    if done.returncode != 0 and re.search(TORCHTUNE_MISSING, done.stderr):
        raise UpstreamFailure(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr[-2000:]
