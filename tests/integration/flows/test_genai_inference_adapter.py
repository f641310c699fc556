"""The harness's DeviceRunnerAdapter under upstream's real ExecuTorchInferenceStrategy, with a
stand-in ``generate`` (the emulator run is the suites' test): it is upstream's protocol, the
strategy forwards its text and metrics, a failed run is upstream's StageError naming the
inference stage, and a split program list is refused."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_qnn_genai.flows.genai_inference import (
    RESULT_FILE,
    HarnessRunnerAdapter,
    run_inference_stage,
)
from pytest_qnn_genai.runtime.result import PerfStats, RunResult
from pytest_qnn_genai.targets import Target, soc

CASE = SimpleNamespace(folder=Path("."), hf_folder=Path("."), eval_prompt="Once upon a time",
                       max_new_tokens=3)


def _run(pte: Path, prompt: str, n: int) -> RunResult:
    return RunResult([1, 2], [5, 6, 7][:n], f"{prompt} ok", PerfStats(2, n, 0.1, 10.0, 5.0, 0.2))


def test_it_is_upstreams_protocol() -> None:
    from executorch.backends.qualcomm.genai_pipeline.strategies.inference import (
        DeviceRunnerAdapter,
    )

    assert isinstance(HarnessRunnerAdapter(_run, "x", 1), DeviceRunnerAdapter)


def test_the_strategy_reports_the_run(tmp_path) -> None:
    pte = tmp_path / "p.pte"
    pte.write_bytes(b"pte")
    out = run_inference_stage(CASE, Target(soc("SM8650")), pte, _run, tmp_path)
    assert out.inference_results == ["Once upon a time ok"]
    assert out.performance_metrics["token_ids"] == [5, 6, 7]
    assert out.performance_metrics["prompt_token_ids"] == [1, 2]
    record = json.loads((tmp_path / "inference_output" / RESULT_FILE).read_text())
    assert record["tokens"] == [5, 6, 7]


def test_a_failed_run_is_upstreams_stage_error(tmp_path) -> None:
    from executorch.backends.qualcomm.genai_pipeline import StageError

    def broken(pte: Path, prompt: str, n: int) -> RunResult:
        raise RuntimeError("runner exited 1")

    pte = tmp_path / "p.pte"
    pte.write_bytes(b"pte")
    with pytest.raises(StageError, match=r"\[inference\].*runner exited 1"):
        run_inference_stage(CASE, Target(soc("SM8650")), pte, broken, tmp_path)


def test_a_split_program_is_refused(tmp_path) -> None:
    adapter = HarnessRunnerAdapter(_run, "x", 1)
    with pytest.raises(ValueError, match="one .pte expected, got 2"):
        adapter.push_artifacts([tmp_path / "a.pte", tmp_path / "b.pte"])
