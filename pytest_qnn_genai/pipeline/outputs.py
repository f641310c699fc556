"""A program's outputs on the emulator, kept as products: the generation and the logits the gate
judges, under the digests of the program, its inputs and the runtime that ran it.

Contract. On the emulator target a program's outputs are a function of the program's bytes, its
inputs and the runtime: executorch and QAIRT's libraries with the ABI adapter (the cache's tool
versions, in every key) and the host runner's code (the products' code digest).
``tests/integration/runtime/test_emulator_outputs.py`` holds the premise: two runs of one program
on one input are bit-identical. So a warm rerun re-judges a program's outputs without running the
emulator again, and two flows whose programs are the same bytes share one run (a program that
differs by a byte gets its own).

Upstream's x86 runners (the x86-runner target: ``qnn_llama_runner`` on QNN's x86 HTP simulator
on this machine) are kept the same way (:func:`runner_generation`): their outputs are a function
of the program, the request (prompt or ids, length, mode), the case's tokenizer files, the
runner binary and the QNN libraries it loads, all digested into the key;
``tests/integration/runners/test_runner_outputs.py`` holds their premise, two runs of one request
bit-identical.

Hazards. Speed is never read from here: a kept :class:`RunResult` carries the perf of the run
that made it (``extra["outputs_from"]`` names the entry), and the perf suites time their own runs
(:meth:`Pipeline.run_pte <pytest_qnn_genai.pipeline.Pipeline.run_pte>` without ``judged``). A
runtime that stopped being deterministic would make a kept run hide a flaky one: the tests above
are what license keeping them. A phone's runs are never kept: they are the device's, and what
the gate tests there is that very phone.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.runtime.result import PerfStats, RunResult
from pytest_qnn_genai.runtime.work import CONTROL_SOURCE, ProgramWork, count_work, valgrind_version

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pytest_qnn_genai.cache import CacheEntry
    from pytest_qnn_genai.flows.llama_eval import UpstreamSqnr
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.targets import Target

RUN_FILE, LOGITS_FILE, PROMPT_LOGITS_FILE = "run.json", "logits.npy", "prompt_logits.npy"


class Entries(Protocol):
    """What keeps a product: :meth:`Pipeline.entry <pytest_qnn_genai.pipeline.Pipeline.entry>`
    (the product's code digest joins the key)."""

    def entry(self, product: str, inputs: dict[str, object], build: Callable[[Path], object],
              upstream: Sequence[str] = (), label: str = "") -> CacheEntry: ...


@dataclasses.dataclass(frozen=True)
class RunnerRequest:
    """One call of ``qnn_llama_runner`` as the harness makes it (the arguments of
    :meth:`DeviceSession.generate <pytest_qnn_genai.devices.session.DeviceSession.generate>`
    besides the program and the tokenizer files): part of a kept run's key."""

    prompt: str
    max_new_tokens: int
    logits: bool
    decoder_model_version: str
    runner_prompt: bool = False
    prompt_ids: list[int] | None = None
    lookahead: tuple[int, int, int] | None = None


_digests: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256


def file_digest(path: Path) -> str:
    """A file's sha256, once per file version in a process (a 393 MB .pte takes a second)."""
    stat = os.stat(path)
    memo = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
    if memo not in _digests:
        _digests[memo] = file_sha256(path)
    return _digests[memo]


def save_run(result: RunResult, out: Path) -> None:
    """``result`` as ``run.json`` and, when it has them, its logits as ``logits.npy`` and its
    prompt positions' logits as ``prompt_logits.npy``."""
    data = {"prompt_tokens": result.prompt_tokens, "tokens": result.tokens, "text": result.text,
            "perf": result.perf.to_dict(), "device": result.device, "extra": result.extra}
    (out / RUN_FILE).write_text(json.dumps(data, indent=1))
    for name, rows in ((LOGITS_FILE, result.logits), (PROMPT_LOGITS_FILE, result.prompt_logits)):
        if rows is not None:
            np.save(out / name, np.ascontiguousarray(rows))


def load_run(folder: Path, source: str) -> RunResult:
    """A kept generation, saying where it came from (``extra["outputs_from"]``)."""
    data = json.loads((folder / RUN_FILE).read_text())
    logits, prompt_logits = folder / LOGITS_FILE, folder / PROMPT_LOGITS_FILE
    return RunResult(
        prompt_tokens=[int(t) for t in data["prompt_tokens"]],
        tokens=[int(t) for t in data["tokens"]], text=str(data["text"]),
        perf=PerfStats(**data["perf"]),
        logits=np.load(logits) if logits.is_file() else None, device=str(data["device"]),
        extra={**data["extra"], "outputs_from": source},
        prompt_logits=np.load(prompt_logits) if prompt_logits.is_file() else None)


def generation(pipeline: Entries, case: ModelCase, target: Target, pte: Path, prompt: str,
               max_new_tokens: int, decoder_model_version: str) -> RunResult:
    """Greedy generation of ``prompt`` by ``pte`` on the emulator, with its logits: run once per
    program, tokenizer, prompt and length (:data:`products.TARGET_RUN`)."""
    from pytest_qnn_genai.runtime.run import run

    tokenizer = case.path("tokenizer_model")
    inputs: dict[str, object] = {
        "program": file_digest(pte), "tokenizer": file_digest(tokenizer), "prompt": prompt,
        "max_new_tokens": max_new_tokens, "decoder_model_version": decoder_model_version,
        "target": target.id}

    def build(out: Path) -> None:
        save_run(run(pte, tokenizer, prompt, target, max_new_tokens,
                     decoder_model_version=decoder_model_version), out)

    entry = pipeline.entry(products.TARGET_RUN, inputs, build, label=case.name)
    return load_run(entry.path, f"{products.TARGET_RUN} {entry.key}")


def runner_generation(pipeline: Entries, case: ModelCase, target: Target, pte: Path,
                      runtime: Sequence[Path], request: RunnerRequest,
                      run: Callable[[], RunResult]) -> RunResult:
    """What ``run`` (one call of upstream's x86 runner on ``pte``, as ``request`` says: prompt or
    ids, length, logits, mode) gives, run once per program, request, tokenizer files and
    ``runtime`` (the runner binary and the libraries it loads, by content)
    (:data:`products.RUNNER_RUN`)."""
    tokenizers = [case.path(name) for name in ("tokenizer_model", "tokenizer_bin")]
    inputs: dict[str, object] = {
        "program": file_digest(pte),
        "tokenizers": [file_digest(t) for t in tokenizers if t.is_file()],
        "runtime": {Path(f).name: file_digest(Path(f)) for f in runtime},
        "request": dataclasses.asdict(request), "target": target.id}
    entry = pipeline.entry(products.RUNNER_RUN, inputs, lambda out: save_run(run(), out),
                           label=case.name)
    return load_run(entry.path, f"{products.RUNNER_RUN} {entry.key}")


def prompt_logits(pipeline: Entries, target: Target, pte: Path, ids: Sequence[int],
                  label: str = "") -> np.ndarray:
    """The logits of every position of ``ids`` fed to ``pte`` as one prompt on the emulator: run
    once per program and token sequence (:data:`products.TARGET_LOGITS`)."""
    from pytest_qnn_genai.runtime.run import prompt_logits as run_prompt

    inputs: dict[str, object] = {"program": file_digest(pte), "ids": [int(i) for i in ids],
                                 "target": target.id}

    def build(out: Path) -> None:
        np.save(out / LOGITS_FILE, np.ascontiguousarray(run_prompt(pte, target, ids)))

    entry = pipeline.entry(products.TARGET_LOGITS, inputs, build, label=label)
    rows: np.ndarray = np.load(entry.file(LOGITS_FILE))
    return rows


def program_work(pipeline: Entries, target: Target, pte: Path, ids: Sequence[int], steps: int,
                 label: str = "") -> ProgramWork:
    """``pte``'s counted work on the emulator (a prompt pass of ``ids`` and ``steps`` decode
    steps, :mod:`pytest_qnn_genai.runtime.work`): counted once per program, workload, probe and
    valgrind (:data:`products.TARGET_WORK`)."""
    inputs: dict[str, object] = {
        "program": file_digest(pte), "ids": [int(i) for i in ids], "steps": steps,
        "control": file_digest(CONTROL_SOURCE), "valgrind": valgrind_version(),
        "target": target.id}

    def build(out: Path) -> None:
        count_work(pte, ids, steps).save(out)

    entry = pipeline.entry(products.TARGET_WORK, inputs, build, label=label)
    return ProgramWork.load(entry.path)


def upstream_sqnr(pipeline: Entries, case: ModelCase, target: Target, pte: Path,
                  qdq_graph: Path | None, runtime: Sequence[Path]) -> UpstreamSqnr:
    """llama.py's own ``sqnr_eval`` of ``pte`` on ``case``'s prompt
    (:mod:`pytest_qnn_genai.flows.llama_eval`), run once per program, QDQ graph, case and
    ``runtime`` (upstream's x86 runner first, then the libraries it loads, by content)
    (:data:`products.UPSTREAM_SQNR`)."""
    from pytest_qnn_genai.flows.llama_eval import UpstreamSqnr, sqnr_eval

    inputs: dict[str, object] = {
        "program": file_digest(pte), "qdq": file_digest(qdq_graph) if qdq_graph else None,
        "case": case.build_fingerprint(), "prompt": case.eval_prompt,
        "runtime": {Path(f).name: file_digest(Path(f)) for f in runtime}, "target": target.id}
    entry = pipeline.entry(
        products.UPSTREAM_SQNR, inputs,
        lambda out: sqnr_eval(case, target, pte, qdq_graph, Path(runtime[0]), out),
        label=case.name)
    return UpstreamSqnr.load(entry.path)
