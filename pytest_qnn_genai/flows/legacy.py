"""The legacy flow: ExecuTorch's own ``llama.py`` compiling a model case, compile-only.

The flags it is given are checked against the installed ``_build_parser()`` first
(:mod:`pytest_qnn_genai.flows.llama_cli`), so an unsupported combination fails with one
:class:`UnsupportedLegacyConfig` message instead of an argparse exit code twenty seconds into the
run. ``decode_qdq.pt2`` is, despite its name, the calibration-shaped graph (llama.py exports
``calibration_prefill.decoder`` after the encoding override), i.e. the new flow's ``calibration``
graph.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.flows.base import BuildRequest, Flow, FlowOutput
from pytest_qnn_genai.flows.llama_cli import (
    BUILD_BOOTSTRAP,
    PROBE_TIMEOUT_S,
    LegacyFlowError,
    LegacyOption,
    LegacyParser,
    LegacyQnnRefusal,
    LegacyTimeout,
    legacy_parser,
    run_logged,
    sdk_env,
    tail,
)
from pytest_qnn_genai.hybrid import QDQ, TEXT_DECODER
from pytest_qnn_genai.models import families
from pytest_qnn_genai.models.families import LegacyInputs
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.stages.qnn_refusal import refusal_reason
from pytest_qnn_genai.targets import Target

if TYPE_CHECKING:
    from pytest_qnn_genai.stages.quantize import QdqArtifacts

LLAMA_BACKENDS = ("htp", "gpu")  # llama.py's compile() raises ValueError for any other backend
EMULATOR_BACKENDS = ("htp",)  # the x86 emulator is the HTP simulator
RECORD = "legacy.json"


class UnsupportedLegacyConfig(LegacyFlowError):
    """The case/target asks for something the installed ``llama.py`` cannot do."""


@dataclass(frozen=True)
class LegacyArtifacts:
    """What one legacy compile-only run produced."""

    pte: Path
    decode_qdq: Path  # the calibrated QDQ decoder (torch.export), the CPU reference
    log: Path  # stdout + stderr of the run
    wall_s: float
    argv: tuple[str, ...]
    peak_rss_mb: float | None = None  # of the llama.py process (None if not measurable)

    def save(self, out_dir: Path) -> None:
        """Record the run in ``out_dir/legacy.json`` (file names relative to ``out_dir``)."""
        (out_dir / RECORD).write_text(json.dumps({
            "pte": self.pte.name, "decode_qdq": self.decode_qdq.name, "log": self.log.name,
            "wall_s": self.wall_s, "argv": list(self.argv), "peak_rss_mb": self.peak_rss_mb},
            indent=1))

    @classmethod
    def load(cls, out_dir: Path) -> LegacyArtifacts:
        """The run recorded in ``out_dir`` (e.g. a cache entry's folder)."""
        data = json.loads((out_dir / RECORD).read_text())
        return cls(pte=out_dir / data["pte"], decode_qdq=out_dir / data["decode_qdq"],
                   log=out_dir / data["log"], wall_s=data["wall_s"], argv=tuple(data["argv"]),
                   peak_rss_mb=data["peak_rss_mb"])


def pte_filename(case: ModelCase) -> str:
    """The .pte name ``llama.py`` writes for a case (its ``export_llama`` naming rule)."""
    name = f"{case.model_mode}_llama_qnn.pte"
    return f"{case.decoder_model}_{name}" if case.decoder_model == "stories260k" else name


def calibration_samples(case: ModelCase) -> list[dict[str, list[dict[str, str]]]]:
    """``--calib_samples`` content: one single-turn chat per calibration prompt."""
    return [{"messages": [{"role": "user", "content": p}]} for p in case.calibration_prompts]


INPUTS_DIR = "llama-inputs"  # what a case's family lays out for llama.py (removed after the build)
# How long llama.py may build: a hang is found within the base on a toy, and a build's time grows
# with the weights it calibrates, quantizes and compiles (a fixed 20 minutes killed a 135M build
# that was still working, with another build sharing the cores)
BASE_TIMEOUT_S = 1200.0
TIMEOUT_S_PER_CHECKPOINT_MB = 10.0


def build_timeout_s(case: ModelCase) -> float:
    """The time a build of ``case`` gets: the base plus a share per MB of its checkpoint."""
    return BASE_TIMEOUT_S + TIMEOUT_S_PER_CHECKPOINT_MB * case.path("checkpoint").stat().st_size / 1e6


def legacy_argv(case: ModelCase, target: Target, out_dir: Path, calib_file: Path,
                parser: LegacyParser | None = None,
                inputs: LegacyInputs | None = None) -> list[str]:
    """The ``llama.py`` arguments for a compile-only build, checked against its parser; the
    weights and tokenizer flags are the case's family's (``inputs``, else laid out now)."""
    parser = parser or legacy_parser()
    inputs = inputs or case.family.legacy_inputs(case, out_dir / INPUTS_DIR)
    check_supported(case, target, parser, inputs)
    args = ["--decoder_model", case.decoder_model, "--model_mode", case.model_mode,
            "--prefill_ar_len", str(case.prefill_ar_len), "--max_seq_len", str(case.max_seq_len),
            "--max_context_len", str(case.max_context_len), "--temperature", "0",
            "--prompt", case.eval_prompt, *inputs.args,
            "--soc_model", target.soc.name, "--compile_only",
            "--build_folder", str(out_dir / "build-x86" if target.is_emulator else out_dir / "build"),
            "--artifact", str(out_dir), "--calib_samples", str(calib_file)]
    if parser.has("--backend"):
        args += ["--backend", target.backend]
    if case.lookahead is not None:
        window, ngram, gcap = case.lookahead
        args += ["--window", str(window), "--ngram", str(ngram), "--gcap", str(gcap)]
    if target.is_emulator:
        args.append("--enable_x86_64")
    return args


def _require(parser: LegacyParser, flag: str, why: str) -> LegacyOption:
    if not parser.has(flag):
        raise UnsupportedLegacyConfig(
            f"the installed executorch's llama.py has no {flag} option (needed for {why})")
    return parser.options[flag]


def _require_choice(parser: LegacyParser, flag: str, value: str, why: str) -> None:
    opt = _require(parser, flag, why)
    if opt.choices is not None and value not in opt.choices:
        raise UnsupportedLegacyConfig(
            f"llama.py {flag} does not accept {value!r} ({why}); it accepts: "
            f"{', '.join(map(str, opt.choices))}")


def check_supported(case: ModelCase, target: Target, parser: LegacyParser,
                    inputs: LegacyInputs) -> None:
    """Raise :class:`UnsupportedLegacyConfig` for a combination ``llama.py`` cannot build."""
    for flag in (a for a in inputs.args if a.startswith("--")):
        _require(parser, flag, f"the {case.family.NAME} family's weights or tokenizer")
    for flag, why in (("--compile_only", "compile-only builds"),
                      ("--build_folder", "compile-only builds"),
                      ("--artifact", "the output folder"), ("--soc_model", "the target SoC"),
                      ("--prefill_ar_len", "hybrid shapes"), ("--max_seq_len", "hybrid shapes"),
                      ("--max_context_len", "hybrid shapes"), ("--temperature", "greedy decoding"),
                      ("--prompt", "its required prompt"),
                      ("--calib_samples", "offline calibration")):
        _require(parser, flag, why)
    _require_choice(parser, "--decoder_model", case.decoder_model, f"model case {case.name}")
    _require_choice(parser, "--model_mode", case.model_mode, f"model case {case.name}")
    if case.is_lookahead:
        for flag in ("--window", "--ngram", "--gcap"):
            _require(parser, flag, f"lookahead decoding (model case {case.name})")
    if target.is_emulator:
        _require(parser, "--enable_x86_64", "the x86 emulator target")
        if target.backend not in EMULATOR_BACKENDS:
            raise UnsupportedLegacyConfig(
                f"target {target.id}: the x86 emulator only simulates the HTP backend, "
                f"not {target.backend!r}")
    if parser.has("--backend"):
        _require_choice(parser, "--backend", target.backend, f"target {target.id}")
    elif target.backend != "htp":
        raise UnsupportedLegacyConfig(
            f"the installed llama.py has no --backend option; it builds HTP only, not "
            f"{target.backend!r}")
    if target.backend not in LLAMA_BACKENDS:
        raise UnsupportedLegacyConfig(
            f"llama.py builds LLMs for the {'/'.join(LLAMA_BACKENDS)} backends only, "
            f"not {target.backend!r} (target {target.id})")
    if parser.socs is not None and target.soc.name not in parser.socs:
        raise UnsupportedLegacyConfig(
            f"the installed executorch does not know SoC {target.soc.name}; it knows: "
            f"{', '.join(parser.socs)}")
    if case.max_context_len < case.max_seq_len:
        raise UnsupportedLegacyConfig(
            f"model case {case.name}: max_context_len {case.max_context_len} < max_seq_len "
            f"{case.max_seq_len}")
    if case.model_mode in ("hybrid", "lookahead") and case.max_context_len < case.prefill_ar_len:
        raise UnsupportedLegacyConfig(
            f"model case {case.name}: max_context_len {case.max_context_len} < prefill_ar_len "
            f"{case.prefill_ar_len}")
    if not case.calibration_prompts:
        raise UnsupportedLegacyConfig(
            f"model case {case.name} has no calibration_prompts: llama.py needs calibration data "
            "and cannot download any offline")


def build_legacy(case: ModelCase, target: Target, out_dir: Path, timeout_s: float = BASE_TIMEOUT_S, *,
                 sdk_root: Path | None = None) -> LegacyArtifacts:
    """Compile ``case`` for ``target`` with ``llama.py --compile_only`` into ``out_dir``.

    The QNN SDK is ``sdk_root`` or the one activated in this process (``QNN_SDK_ROOT``).
    ``timeout_s`` bounds the whole call, including reading ``llama.py``'s options the first time.
    """
    deadline = time.monotonic() + timeout_s
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    env = sdk_env(sdk_root)
    parser = legacy_parser(min(PROBE_TIMEOUT_S, timeout_s))
    calib = out_dir / "calib_samples.json"
    inputs = case.family.legacy_inputs(case, out_dir / INPUTS_DIR)
    env.update(inputs.env)
    args = legacy_argv(case, target, out_dir, calib, parser, inputs)
    calib.write_text(json.dumps(calibration_samples(case), indent=1))
    pte = out_dir / pte_filename(case)
    qdq = out_dir / "decode_qdq.pt2"
    for stale in (pte, qdq):
        stale.unlink(missing_ok=True)
    argv = [sys.executable, "-c", BUILD_BOOTSTRAP, *args]
    log = out_dir / "legacy_llama.log"
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise LegacyTimeout(f"legacy llama.py: no time left of {timeout_s:g}s to start the build", 0)
    done = run_logged(argv, env, out_dir, log, remaining,
                       f"legacy llama.py ({case.name}, {target.id})", limit_s=timeout_s)
    if done.returncode != 0:
        what = f"legacy llama.py ({case.name}, {target.id})"
        refused = refusal_reason(log.read_text(errors="replace").splitlines())
        if refused is not None:  # QNN's verdict on the graph: remembered under the key
            raise LegacyQnnRefusal(f"{what}: QNN refused the graph at prepare: {refused} (exit "
                                   f"code {done.returncode} after {done.wall_s:.0f}s). Last lines "
                                   f"of {log}:\n{tail(log)}")
        raise LegacyFlowError(
            f"{what} failed with exit code {done.returncode} "
            f"after {done.wall_s:.0f}s. Last lines of {log}:\n{tail(log)}")
    shutil.rmtree(out_dir / INPUTS_DIR, ignore_errors=True)  # links/copies of the case's files
    missing = [p.name for p in (pte, qdq) if not p.is_file()]
    if missing:
        found = sorted(p.name for p in out_dir.iterdir() if p.is_file())
        raise LegacyFlowError(
            f"legacy llama.py exited 0 but did not write {', '.join(missing)} in {out_dir} "
            f"(found: {', '.join(found) or 'nothing'}). Last lines of {log}:\n{tail(log)}")
    artifacts = LegacyArtifacts(pte=pte, decode_qdq=qdq, log=log, wall_s=done.wall_s,
                                argv=tuple(argv), peak_rss_mb=done.peak_rss_mb)
    artifacts.save(out_dir)
    return artifacts


class LegacyFlow(Flow):
    """executorch's llama.py, compile-only (the flow the gate decides when to delete)."""

    name = "legacy"
    stage = "legacy-build"
    in_subprocess = True  # llama.py
    # the bootstrap installs the torchtune stand-in in llama.py's process (a string, not an
    # import); the model families are found at run time (no static import reaches them)
    code = ("pytest_qnn_genai.compat.torchtune", *families.module_names())

    def key(self, case: ModelCase, target: Target) -> dict[str, object]:
        # --enable_x86_64 changes what llama.py builds (no shared buffer, no weight sharing)
        return {"case": case.build_fingerprint(), "soc": target.soc.name,
                "backend": target.backend, "emulator": target.is_emulator}

    def build(self, request: BuildRequest, out: Path) -> None:
        build_legacy(request.case, request.target, out, build_timeout_s(request.case))

    def load(self, folder: Path, qdq: QdqArtifacts | None) -> FlowOutput:
        art = LegacyArtifacts.load(folder)
        return FlowOutput({TEXT_DECODER: art.pte, QDQ: art.decode_qdq},
                          {"wall_s": art.wall_s, "peak_rss_mb": art.peak_rss_mb})


FLOW = LegacyFlow()
