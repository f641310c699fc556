"""llama.py's own SQNR evaluator on a program the harness already holds: the oracle its figures
are held to.

Contract: :func:`sqnr_eval` runs ``llama.py --pre_gen_pte <folder> --eval_methods sqnr_eval
--enable_x86_64`` for one program of a case (llama.py evaluates every mode as kv mode: the prompt
through ``kv_forward`` a token per call, ``--eval_mode 0``), with upstream's x86
``qnn_llama_runner`` where llama.py runs it from (``<build_folder>/examples/qualcomm/oss_scripts/
llama/``) and the emulator's libraries as ``QNN_SDK_ROOT``. It returns what llama.py logs: FP32
``nn.Module`` vs QNN on the prompt's rows (upstream's ``LlmSpecs.sqnr`` figure), and, given the
program's calibration QDQ graph (llama.py's ``decode_qdq.pt2``), CPU QDQ vs QNN and FP32 vs CPU
QDQ; with the prompt ids it ran (its ``input_tokens.raw``: its chat template, its tokenizer).
Nothing is built: the program and the graph are linked in under the names llama.py reads.

Hazard: llama.py runs the runner through a shell and ignores its exit status, and a log line is
its only result; a figure missing from the log is an error naming the log, never a figure of
nothing.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai.flows.legacy import (
    INPUTS_DIR,
    build_timeout_s,
    calibration_samples,
    legacy_argv,
    pte_filename,
)
from pytest_qnn_genai.flows.llama_cli import (
    BUILD_BOOTSTRAP,
    LegacyFlowError,
    legacy_parser,
    run_logged,
    sdk_env,
    tail,
)

if TYPE_CHECKING:
    from pytest_qnn_genai.models.families import LegacyInputs
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.targets import Target

RESULT = "sqnr_eval.json"
LOG = "sqnr_eval.log"
RUNNER_DIR = "examples/qualcomm/oss_scripts/llama"  # where llama.py runs the x86 runner from
QDQ_NAME = "decode_qdq.pt2"  # llama.py's name for the calibration QDQ graph
_FIGURES = {"fp32_vs_qnn": "FP32 nn.Module and QNN", "qdq_vs_qnn": "CPU QDQ and QNN",
            "fp32_vs_qdq": "FP32 nn.Module and CPU QDQ"}


class LlamaEvalError(LegacyFlowError):
    """llama.py's evaluator ran and gave no figure (one line, the log's tail below it)."""


@dataclass(frozen=True)
class UpstreamSqnr:
    """llama.py's ``sqnr_eval`` of one program on its prompt (module docstring)."""

    prompt_ids: list[int]
    fp32_vs_qnn: float
    qdq_vs_qnn: float | None
    fp32_vs_qdq: float | None

    def save(self, out: Path) -> None:
        (out / RESULT).write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, folder: Path) -> UpstreamSqnr:
        return cls(**json.loads((folder / RESULT).read_text()))


def eval_argv(case: ModelCase, target: Target, out: Path, programs: Path,
              build_folder: Path, inputs: LegacyInputs) -> list[str]:
    """llama.py's arguments for ``sqnr_eval`` of the program in ``programs``: the build's own
    (:func:`~pytest_qnn_genai.flows.legacy.legacy_argv`, the same case and target) with the
    program given instead of compiled."""
    calib = out / "calib_samples.json"
    calib.write_text(json.dumps(calibration_samples(case), indent=1))
    argv = legacy_argv(case, target, out, calib, legacy_parser(), inputs)
    argv.remove("--compile_only")
    argv[argv.index("--build_folder") + 1] = str(build_folder)
    return [*argv, "--pre_gen_pte", str(programs), "--eval_methods", "sqnr_eval"]


def parse_log(text: str) -> dict[str, float]:
    """The SQNR figures llama.py logged, by :data:`_FIGURES` key."""
    out = {}
    for key, between in _FIGURES.items():
        m = re.search(rf"SQNR Eval Score between {re.escape(between)}: (\S+)", text)
        if m:
            out[key] = float(m.group(1))
    return out


def sqnr_eval(case: ModelCase, target: Target, pte: Path, qdq_graph: Path | None,
              llama_runner: Path, out: Path, *, sdk_root: Path | None = None) -> UpstreamSqnr:
    """llama.py's ``sqnr_eval`` of ``pte`` (a build of ``case`` for the emulator ``target``),
    run by ``llama_runner`` (upstream's x86 build); its result and log saved in ``out``
    (module docstring), its working files in a folder of their own, removed after."""
    out = Path(out).resolve()
    with tempfile.TemporaryDirectory(prefix="sqnr-eval-") as tmp:
        try:
            result = _run(case, target, pte, qdq_graph, llama_runner, Path(tmp), sdk_root)
        finally:
            if (Path(tmp) / LOG).is_file():
                shutil.copyfile(Path(tmp) / LOG, out / LOG)
    result.save(out)
    return result


def _run(case: ModelCase, target: Target, pte: Path, qdq_graph: Path | None,
         llama_runner: Path, out: Path, sdk_root: Path | None) -> UpstreamSqnr:
    programs, build = out / "programs", out / "build"
    (build / RUNNER_DIR).mkdir(parents=True, exist_ok=True)
    (build / "lib").mkdir(exist_ok=True)  # the runner finds the wheel's libraries by $ORIGIN
    programs.mkdir(parents=True, exist_ok=True)
    links = {programs / pte_filename(case): pte, build / RUNNER_DIR / llama_runner.name: llama_runner}
    if qdq_graph is not None:
        links[programs / QDQ_NAME] = qdq_graph
    for link, source in links.items():
        link.unlink(missing_ok=True)
        link.symlink_to(Path(source).resolve())
    env = sdk_env(sdk_root)
    inputs = case.family.legacy_inputs(case, out / INPUTS_DIR)
    env.update(inputs.env)
    argv = [sys.executable, "-c", BUILD_BOOTSTRAP,
            *eval_argv(case, target, out, programs, build, inputs)]
    log = out / LOG
    done = run_logged(argv, env, out, log, build_timeout_s(case),
                      f"llama.py sqnr_eval ({case.name}, {target.id})")
    text = log.read_text(errors="replace")
    figures = parse_log(text)
    ids_file = out / "input_tokens.raw"
    if done.returncode != 0 or "fp32_vs_qnn" not in figures or not ids_file.is_file():
        raise LlamaEvalError(f"llama.py sqnr_eval ({case.name}, {target.id}) exited "
                             f"{done.returncode} without its FP32-vs-QNN figure. Last lines of "
                             f"{log}:\n{tail(log)}")
    return UpstreamSqnr([int(i) for i in np.fromfile(ids_file, dtype=np.uint64)],
                        figures["fp32_vs_qnn"], figures.get("qdq_vs_qnn"),
                        figures.get("fp32_vs_qdq"))
