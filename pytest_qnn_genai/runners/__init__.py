"""ExecuTorch's own QNN runners (``qnn_llama_runner``, ``qnn_executor_runner``) built for x86_64
from an ExecuTorch source tree against the installed executorch wheel.

- :mod:`.sources`: what the build compiles, links and reads (the cache key's file digests);
- :mod:`.toolchain`: the Debian packages (``make build-deps``), compiler and CMake versions, and
  the logged, time-bounded subprocess the build runs in;
- :mod:`.build`: :func:`build_runners` (the self-contained ``$ORIGIN`` folder) and
  :func:`key_inputs`.

pytest-free; the cache entry is :meth:`pytest_qnn_genai.pipeline.Pipeline.runners_entry`.
"""
from __future__ import annotations

from pytest_qnn_genai.runners.build import (
    DESCRIPTION,
    EXECUTOR_RUNNER,
    LLAMA_RUNNER,
    RUNNERS,
    RunnerBuild,
    build_runners,
    key_inputs,
)
from pytest_qnn_genai.runners.sources import ENV_VAR, RunnerBuildError

__all__ = ["DESCRIPTION", "ENV_VAR", "EXECUTOR_RUNNER", "LLAMA_RUNNER", "RUNNERS", "RunnerBuild",
           "RunnerBuildError", "build_runners", "key_inputs"]
