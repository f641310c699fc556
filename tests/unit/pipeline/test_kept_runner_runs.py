"""Upstream's x86 runner's judged runs are kept products (``pipeline/outputs.py``), a phone's
never: a judged run is made once per program, request, tokenizer files, runner binary and QNN
libraries, and handed back whole (ids, text, both logits dumps, extra); a change to any of
those gets a run of its own; a run nothing judges (a perf round) and every phone run are made
each time. The device is a protocol-level fake that counts its runs and writes each run's number
into its logits, so a kept run handed back for the wrong call shows as the wrong number. The
premise (two runs of one request bit-identical) is held against the real runner in
``tests/integration/runners/test_runner_outputs.py``."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.pipeline import Pipeline
from pytest_qnn_genai.runtime.result import PerfStats, RunResult
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc

VERSIONS = {"torch": "t", "executorch": "e", "qairt": "q"}
X86 = Target(soc("SM8650"), "htp", X86_RUNNER)
PHONE = Target(soc("SM8650"), "htp", "emulator-5554")
VOCAB = 8


def quiet(_line: str) -> None:
    pass


@dataclass
class Case:
    folder: Path
    name: str = "tiny"
    eval_prompt: str = "Once upon a time"
    max_new_tokens: int = 4
    lookahead: tuple[int, int, int] | None = None
    is_lookahead: bool = False

    def path(self, attr: str) -> Path:
        return self.folder / f"{attr}.bin"


@dataclass
class Runner:
    """DeviceSession's face to the pipeline: its runner, its libraries, generate()."""

    runner: Path
    libs: list[Path]
    calls: list[dict[str, object]] = field(default_factory=list)

    def generate(self, pte: Path, tokenizer_model: Path, tokenizer_bin: Path | None, prompt: str,
                 max_new_tokens: int, target: Target, pte_digest: str | None = None,
                 **kw: object) -> RunResult:
        self.calls.append({"prompt": prompt, "n": max_new_tokens, **kw})
        k = float(len(self.calls))
        ids = list(kw.get("prompt_ids") or [1, 2, 3])  # type: ignore[call-overload]
        return RunResult(ids, [5] * max_new_tokens, f"run {k:g}",
                         PerfStats(len(ids), max_new_tokens, 0.1, 10.0 * k, k, 0.2),
                         logits=np.full((max_new_tokens, VOCAB), k, dtype=np.float32),
                         device=target.device, extra={"hybrid_text": f"run {k:g}"},
                         prompt_logits=np.full((len(ids) - 1, VOCAB), -k, dtype=np.float32))


class Sessions:
    def __init__(self, device: Runner) -> None:
        self.device = device

    def session(self, target: Target) -> Runner:
        return self.device


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "case"
    folder.mkdir()
    for name in ("tokenizer_model", "tokenizer_bin"):
        (folder / f"{name}.bin").write_bytes(name.encode())
    files = {name: tmp_path / name for name in ("program.pte", "qnn_llama_runner", "libQnnHtp.so")}
    for path in files.values():
        path.write_bytes(path.name.encode())
    device = Runner(files["qnn_llama_runner"], [files["libQnnHtp.so"]])
    cache = ArtifactCache(tmp_path / "cache", VERSIONS, progress=quiet)
    pipeline = Pipeline(cache, devices=Sessions(device))
    monkeypatch.setattr(Pipeline, "decoder_model_version", lambda self, case: "llama2")
    return pipeline, Case(folder), device, files


def test_a_judged_x86_run_is_made_once_and_handed_back_whole(setup) -> None:
    pipeline, case, device, files = setup
    first = pipeline.run_pte(case, X86, files["program.pte"], logits=True, judged=True)
    again = pipeline.run_pte(case, X86, files["program.pte"], logits=True, judged=True)
    assert len(device.calls) == 1 and pipeline.cache.stats.builds == 1
    assert again.extra["outputs_from"].startswith("runner-run ")
    assert (again.tokens, again.text, again.prompt_tokens) == (first.tokens, "run 1", [1, 2, 3])
    assert again.logits is not None and np.all(again.logits == 1.0)
    assert again.prompt_logits is not None and np.all(again.prompt_logits == -1.0)
    assert again.extra["hybrid_text"] == "run 1"


@pytest.mark.parametrize("change", ["prompt", "length", "ids", "runner", "library", "program",
                                    "tokenizer"])
def test_another_call_or_runtime_gets_a_run_of_its_own(setup, change: str) -> None:
    pipeline, case, device, files = setup
    pipeline.run_pte(case, X86, files["program.pte"], logits=True, judged=True)
    kw: dict[str, object] = {}
    if change == "prompt":
        kw["prompt"] = "Another prompt"
    elif change == "length":
        kw["max_new_tokens"] = 5
    elif change == "ids":
        kw["prompt_ids"] = [1, 2, 4]
    elif change == "tokenizer":
        case.path("tokenizer_bin").write_bytes(b"another tokenizer.bin")
    else:  # another build of the runner, of a library it loads, of the program: other bytes
        files[{"runner": "qnn_llama_runner", "library": "libQnnHtp.so",
               "program": "program.pte"}[change]].write_bytes(b"rebuilt, other bytes")
    run = pipeline.run_pte(case, X86, files["program.pte"], logits=True, judged=True, **kw)
    assert len(device.calls) == 2 and run.text == "run 2"


def test_runs_nothing_judges_and_a_phones_runs_are_made_each_time(setup) -> None:
    pipeline, case, device, files = setup
    for target, judged in ((X86, False), (X86, False), (PHONE, True), (PHONE, True)):
        pipeline.run_pte(case, target, files["program.pte"], logits=True, judged=judged)
    assert len(device.calls) == 4 and pipeline.cache.stats.builds == 0


def test_the_x86_runners_prompt_logits_are_kept(setup) -> None:
    pipeline, case, device, files = setup
    rows = [pipeline.target_logits(case, X86, files["program.pte"], [1, 2, 3, 4])
            for _ in range(2)]
    assert len(device.calls) == 1 and np.array_equal(rows[0], rows[1])
    assert rows[0].shape == (4, VOCAB)  # three prompt rows and the first generated token's
    pipeline.target_logits(case, PHONE, files["program.pte"], [1, 2, 3, 4])
    assert len(device.calls) == 2
