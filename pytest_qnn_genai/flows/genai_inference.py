"""genai_pipeline's inference stage on the harness's targets: upstream's ``DeviceRunnerAdapter``
interface implemented over the harness's own way of running a program.

``ExecuTorchInferenceStrategy`` (executorch 1.5.1) pushes the artifacts, executes and pulls the
results through an injected ``DeviceRunnerAdapter``; its only implementation upstream is
``SimpleADB`` (a phone over adb, no timeout). :class:`HarnessRunnerAdapter` implements the same
three calls over a ``generate(pte, prompt, max_new_tokens)`` the caller injects:
``Pipeline.run_pte`` for the case and target, i.e. the emulator in this process or a phone
through its device session (:mod:`pytest_qnn_genai.devices`: the :class:`Transport` pushes by
digest, runs ``qnn_llama_runner`` with a timeout, pulls its outputs). So upstream's strategy
runs exactly the program, prompt and token budget the harness runs, and its reported results
and metrics can be held against the harness's own run of the same program.

The adapter owns prompt encoding and decoding, as upstream's contract says
(``InferenceResult.output_data`` is decoded text); ``pull_results`` writes the run's record
(:data:`RESULT_FILE`) into the strategy's output folder.

genai's own program (``flows/genai_run.py``) is a single graph without a KV cache: ids
``[1, max_context_len]`` in, logits of every position out. :func:`window_generate` is its
``generate``: greedy decoding by one whole-window pass per token through the caller's
``forward`` (``Pipeline.run_method`` on the target), which is how that program is meant to be run.

Hazard: the strategy calls ``push_artifacts`` with the artifacts only; a multi-program list (a
split model) is refused in one line rather than running its first program silently.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.flows.genai_front import runner_ids, upstream

if TYPE_CHECKING:
    import numpy as np

    from pytest_qnn_genai.checks.parity import Check
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.runtime.result import RunResult
    from pytest_qnn_genai.targets import Target
    from pytest_qnn_genai.untyped import Upstream

RESULT_FILE = "genai_inference.json"
Generate = Callable[[Path, str, int], "RunResult"]
Forward = Callable[[Path, list[int]], "np.ndarray"]  # a program's logits rows of ids on a target


class HarnessRunnerAdapter:
    """Upstream's ``DeviceRunnerAdapter`` (push_artifacts, execute, pull_results) over the
    harness's ``generate`` for one case and target (see the module docstring)."""

    def __init__(self, generate: Generate, prompt: str, max_new_tokens: int) -> None:
        self._generate = generate
        self._prompt = prompt
        self._max_new_tokens = max_new_tokens
        self._pte: Path | None = None
        self._result: RunResult | None = None

    def push_artifacts(self, artifact_paths: list[Path], input_data: list[object] | None = None,
                       extra_files: list[str] | None = None) -> None:
        if len(artifact_paths) != 1:
            raise ValueError(f"one .pte expected, got {len(artifact_paths)}: "
                             f"{[str(p) for p in artifact_paths]}")
        pte = Path(artifact_paths[0])
        if not pte.is_file():
            raise FileNotFoundError(f"{pte}: no such program")
        if input_data is not None or extra_files:
            raise ValueError("the adapter encodes the prompt itself; pre-encoded inputs are not "
                             "taken")
        self._pte = pte

    def execute(self, inference_options: dict[str, object] | None = None) -> Upstream:
        if self._pte is None:
            raise RuntimeError("No artifacts have been pushed. Call push_artifacts() first.")
        options = inference_options or {}
        prompt = str(options.get("prompt", self._prompt))
        n = int(str(options.get("max_new_tokens", self._max_new_tokens)))
        self._result = self._generate(self._pte, prompt, n)
        run = self._result
        metrics: dict[str, object] = {**run.perf.to_dict(), "prompt_token_ids": run.prompt_tokens,
                                    "token_ids": run.tokens, "device": run.device,
                                    "pte_sha256": file_sha256(self._pte)}
        return upstream("InferenceResult")(output_data=[run.text], performance_metrics=metrics)

    def pull_results(self, output_dir: Path) -> list[Path]:
        if self._result is None:
            raise RuntimeError("Nothing was executed. Call execute() first.")
        output_dir.mkdir(parents=True, exist_ok=True)
        path = output_dir / RESULT_FILE
        run = self._result
        path.write_text(json.dumps({"prompt_tokens": run.prompt_tokens, "tokens": run.tokens,
                                    "text": run.text, "perf": run.perf.to_dict(),
                                    "device": run.device}, indent=2))
        return [path]


def run_inference_stage(case: ModelCase, target: Target, pte: Path, generate: Generate,
                        artifact_dir: Path) -> Upstream:
    """Upstream's ``InferenceStage(ExecuTorchInferenceStrategy(adapter))`` on ``pte``, its input
    config built as ``GenAIPipeline`` builds it (the artifacts, the context's prompt and SoC);
    its ``InferenceOutputConfig``. A stage failure is upstream's ``StageError``."""
    adapter = HarnessRunnerAdapter(generate, case.eval_prompt, case.max_new_tokens)
    context = (upstream("PipelineContext").builder().with_model(str(case.hf_folder))
               .with_soc(target.soc.name).with_prompt(case.eval_prompt)
               .with_artifact_dir(str(artifact_dir)).build())
    stage = upstream("InferenceStage")(upstream("ExecuTorchInferenceStrategy")(adapter))
    config = upstream("InferenceInputConfig")(
        artifact_paths=[pte], prompt=context.prompt, soc_model=context.soc_model,
        inference_options={"max_new_tokens": case.max_new_tokens})
    return stage.invoke(context, config)


def stage_matches_run(case: ModelCase, target: Target, pte: Path, generate: Generate,
                      own: RunResult, artifact_dir: Path) -> list[Check]:
    """:func:`run_inference_stage` on ``pte``, what it reports held to ``own`` (the harness's run
    of the same program through the same ``generate``)."""
    from pytest_qnn_genai.checks.generation import inference_matches_run

    out = run_inference_stage(case, target, pte, generate, artifact_dir)
    metrics = out.performance_metrics
    return inference_matches_run(own, metrics["prompt_token_ids"], metrics["token_ids"],
                                 out.inference_results, float(metrics["decode_tok_s"]))


def window_generate(case: ModelCase, forward: Forward, device: str) -> Generate:
    """A ``generate(pte, prompt, n)`` for a single-graph, no-cache program (see the module
    docstring): the prompt encoded as the runner encodes it, then ``n`` greedy tokens (fewer when
    the window is full), each from one ``forward`` of every id so far; no stop token."""
    import time

    import numpy as np

    from pytest_qnn_genai.runtime.result import PerfStats, RunResult
    from pytest_qnn_genai.runtime.tokenizer import load_tokenizer

    def generate(pte: Path, prompt: str, n: int) -> RunResult:
        prompt_ids = runner_ids(case, prompt)
        ids, rows = list(prompt_ids), []
        start = time.monotonic()
        while len(ids) - len(prompt_ids) < n and len(ids) < case.max_context_len:
            row = np.asarray(forward(pte, ids)[len(ids) - 1])
            rows.append(row)
            ids.append(int(np.argmax(row)))
        seconds = time.monotonic() - start
        tokens = ids[len(prompt_ids):]
        rate = len(tokens) / seconds if seconds > 0 else 0.0
        text = load_tokenizer(case.path("tokenizer_model")).decode(tokens)
        return RunResult(prompt_ids, tokens, text,
                         PerfStats(len(prompt_ids), len(tokens), 0.0, 0.0, rate, 0.0),
                         np.stack(rows) if rows else None, device)

    return generate
