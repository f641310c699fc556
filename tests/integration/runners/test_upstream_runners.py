"""ExecuTorch's own qnn_llama_runner / qnn_executor_runner, built from the source tree as a cache
entry, held to the Python host runner on the x86 HTP emulator.

The runners run with ``LD_LIBRARY_PATH`` = the emulator SDK's library folder only (the QNN
libraries the backend opens); every executorch library comes from ``$ORIGIN``.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.devices.runner_output import observer_stats, read_raw_logits
from pytest_qnn_genai.elf import read_elf
from pytest_qnn_genai.runners import (
    DESCRIPTION,
    EXECUTOR_RUNNER,
    LLAMA_RUNNER,
    RUNNERS,
    RunnerBuild,
    RunnerBuildError,
    build_runners,
)
from pytest_qnn_genai.runners.sources import check_tree, find_wheel, read_set
from tests.support.upstream import require_source_tree

RUN_TIMEOUT_S = 300
KV_MODE, HYBRID_MODE = 0, 1
IDS_FILE = "prompt_ids.raw"
# ET_LOG's line (the runtime's default PAL): "I 00:00:00.000328 executorch:runner.cpp:151] ..."
ET_LOG_LINE = re.compile(r"^[DIWEF] \d\d:\d\d:\d\d\.\d+ executorch:([\w.+-]+):\d+\]", re.MULTILINE)
TK_LOG_LINE = re.compile(r"^[DIWEF] tokenizers:", re.MULTILINE)

pytestmark = pytest.mark.emulator


@pytest.fixture(scope="session", autouse=True)
def src(qnn_settings) -> Path:
    """Upstream's source tree, found when the tests run (skipped without one, failed under CI)."""
    return require_source_tree(qnn_settings.executorch_src)


@pytest.fixture(scope="session")
def runners(qnn_pipeline, src: Path) -> RunnerBuild:
    return RunnerBuild.load(qnn_pipeline.runners_entry(src, logging=True).path)


@pytest.fixture(scope="session")
def quiet_runners(qnn_pipeline, src: Path) -> RunnerBuild:
    return RunnerBuild.load(qnn_pipeline.runners_entry(src, logging=False).path)


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    outputs_txt: str
    logits: Path | None


def run_llama_runner(binary: Path, pte: Path, tokenizer: Path, prompt_ids: list[int],
                     seq_len: int, eval_mode: int, sdk_lib: Path, workdir: Path,
                     decoder_model_version: str) -> Run:
    """One greedy run with the prompt as ids, as a phone run calls it (devices/llama_runs.py)."""
    workdir.mkdir(parents=True, exist_ok=True)
    np.asarray(prompt_ids, dtype=np.uint64).tofile(workdir / IDS_FILE)
    cmd = [str(binary), "--model_path", str(pte), "--tokenizer_path", str(tokenizer),
           "--tokenized_prompt", IDS_FILE, "--seq_len", str(seq_len), "--eval_mode", str(eval_mode),
           "--temperature", "0", "--decoder_model_version", decoder_model_version,
           "--output_path", "outputs.txt"]
    if eval_mode == KV_MODE:
        cmd += ["--dump_logits_path", "logits.bin"]
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["LD_LIBRARY_PATH"] = str(sdk_lib)
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                          errors="replace", timeout=RUN_TIMEOUT_S)
    outputs = workdir / "outputs.txt"
    logits = workdir / "logits.bin"
    return Run(proc.returncode, proc.stdout, proc.stderr,
               outputs.read_text(errors="replace") if outputs.is_file() else "",
               logits if logits.is_file() else None)


@dataclass(frozen=True)
class Request:
    pte: Path
    tokenizer: Path  # what the runner reads (llama2.c tokenizer.bin, tiktoken ranks)
    tokenizer_model: Path  # what the harness's tokenizer reads
    prompt_ids: list[int]
    max_new_tokens: int
    decoder_model_version: str
    sdk_lib: Path

    @property
    def seq_len(self) -> int:  # prompt + output (token_generator.cpp)
        return len(self.prompt_ids) + self.max_new_tokens

    def run(self, build: RunnerBuild, eval_mode: int, workdir: Path,
            binary: Path | None = None) -> Run:
        return run_llama_runner(binary or build.llama_runner, self.pte, self.tokenizer,
                                self.prompt_ids, self.seq_len, eval_mode, self.sdk_lib, workdir,
                                self.decoder_model_version)


@pytest.fixture
def request_(qnn_pipeline, qnn_case, qnn_target, qnn_sdk) -> Request:
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer
    from pytest_qnn_genai.stages.recipe import decoder_model_version

    tokenizer = load_tokenizer(qnn_case.path("tokenizer_model"))
    return Request(qnn_pipeline.pte(qnn_case, qnn_target).pte, qnn_case.path("tokenizer_bin"),
                   qnn_case.path("tokenizer_model"), encode(tokenizer, qnn_case.eval_prompt),
                   qnn_case.max_new_tokens, decoder_model_version(qnn_case), qnn_sdk.host_lib_dir)


def test_the_build_is_a_self_contained_cached_folder(qnn_pipeline, runners: RunnerBuild,
                                                     src: Path) -> None:
    again = qnn_pipeline.runners_entry(src, logging=True)
    assert again.hit and again.path == runners.folder  # built once, then served by the cache
    wheel = find_wheel()
    libs = sorted({lib for r in RUNNERS for lib in runners.needs[r]})
    assert "libexecutorch_backend_qnn.so" in runners.needs[LLAMA_RUNNER]
    assert "libexecutorch_etdump.so" in runners.needs[EXECUTOR_RUNNER]
    files = {p.name for p in runners.folder.iterdir()} - {"manifest.json"}  # the cache's own
    assert files == {*RUNNERS, *libs, DESCRIPTION}
    for runner in RUNNERS:
        info = read_elf(runners.folder / runner)
        assert (info.machine, info.runpath, info.rpath) == ("x86_64", ("$ORIGIN",), ())
        assert set(runners.needs[runner]) & set(info.needed)  # it links them itself
    for lib in libs:
        assert (runners.folder / lib).read_bytes() == (wheel.lib_dir / lib).read_bytes()
    venv = str(wheel.root.parent)
    assert not any(venv.encode() in (runners.folder / r).read_bytes() for r in RUNNERS)


def test_llama_runner_generates_the_host_runners_tokens(request_: Request, runners: RunnerBuild,
                                                        tmp_path: Path) -> None:
    from pytest_qnn_genai.runtime.host_runner import HybridRunner
    from pytest_qnn_genai.runtime.tokenizer import decode_continuation, load_tokenizer, stop_ids

    tokenizer = load_tokenizer(request_.tokenizer_model)
    stops = stop_ids(tokenizer, request_.decoder_model_version)
    host = HybridRunner(request_.pte).generate(request_.prompt_ids, request_.max_new_tokens,
                                                eos_ids=stops)
    p = len(request_.prompt_ids)

    hybrid = request_.run(runners, HYBRID_MODE, tmp_path / "hybrid")
    assert hybrid.returncode == 0, hybrid.stderr[-2000:]
    observer = observer_stats(hybrid.stdout)[-1]
    assert observer["prompt_tokens"] == p
    # generated_tokens counts decode steps; prefill made one more
    assert observer["generated_tokens"] + 1 == len(host.tokens)
    ended_at_eos = host.tokens[-1] in stops
    body = host.tokens[:-1] if ended_at_eos else host.tokens
    expected = decode_continuation(tokenizer, request_.prompt_ids, body)
    if ended_at_eos:
        expected += tokenizer.piece(host.tokens[-1])
    assert hybrid.outputs_txt == IDS_FILE + expected  # the echoed prompt is the ids file's path

    # kv mode dumps the logits: the runner's own greedy ids, prompt rows then one per decode step
    kv = request_.run(runners, KV_MODE, tmp_path / "kv")
    assert kv.returncode == 0, kv.stderr[-2000:]
    assert kv.logits is not None
    rows = read_raw_logits(kv.logits, host.logits.shape[1], "uint16")
    assert rows.shape[0] == p + observer_stats(kv.stdout)[-1]["generated_tokens"]
    assert [int(t) for t in np.argmax(rows[p - 1:], axis=1)] == host.tokens


def test_a_library_missing_beside_the_runner_fails_the_run(request_: Request,
                                                            runners: RunnerBuild,
                                                            tmp_path: Path) -> None:
    copy = tmp_path / "pushed"
    shutil.copytree(runners.folder, copy)
    whole = request_.run(runners, HYBRID_MODE, tmp_path / "whole", binary=copy / LLAMA_RUNNER)
    assert whole.returncode == 0 and observer_stats(whole.stdout), whole.stderr[-2000:]
    (copy / "libexecutorch_backend_qnn.so").unlink()
    broken = request_.run(runners, HYBRID_MODE, tmp_path / "broken", binary=copy / LLAMA_RUNNER)
    assert broken.returncode == 127
    assert ("error while loading shared libraries: libexecutorch_backend_qnn.so"
            in broken.stderr), broken.stderr


def test_the_no_logging_build_keeps_the_observer_line_only(request_: Request, src: Path,
                                                           runners: RunnerBuild,
                                                           quiet_runners: RunnerBuild,
                                                           tmp_path: Path) -> None:
    assert not quiet_runners.logging and runners.logging
    assert quiet_runners.folder != runners.folder
    own = {Path(p).name for p in read_set(check_tree(src), find_wheel()).tree}
    loud = request_.run(runners, HYBRID_MODE, tmp_path / "loud")
    quiet = request_.run(quiet_runners, HYBRID_MODE, tmp_path / "quiet")
    assert loud.returncode == 0 and quiet.returncode == 0, quiet.stderr[-2000:]
    runner_lines = [f for f in ET_LOG_LINE.findall(loud.stderr) if f in own]
    assert "runner.cpp" in runner_lines and "stats.h" in runner_lines  # the control
    assert TK_LOG_LINE.search(loud.stderr)
    assert [f for f in ET_LOG_LINE.findall(quiet.stderr) if f in own] == []
    assert not TK_LOG_LINE.search(quiet.stderr)
    assert observer_stats(quiet.stdout)[-1]["generated_tokens"] == \
        observer_stats(loud.stdout)[-1]["generated_tokens"]
    assert quiet.outputs_txt == loud.outputs_txt


def test_a_broken_source_fails_with_the_compilers_error(tmp_path: Path, src: Path) -> None:
    tree = tmp_path / "executorch"
    shutil.copytree(src, tree)
    broken = tree / "extension/llm/tokenizers/src/bpe_tokenizer_base.cpp"
    broken.chmod(0o644)
    broken.write_text("this is not C++;\n" + broken.read_text())
    with pytest.raises(RunnerBuildError) as exc:
        build_runners(tree, tmp_path / "out", timeout_s=900)
    headline, *tail = str(exc.value).splitlines()
    assert headline.startswith("build qnn_llama_runner + qnn_executor_runner failed (exit ")
    assert any("bpe_tokenizer_base.cpp" in line and "error" in line for line in tail), tail
    assert not (tmp_path / "out").exists()
