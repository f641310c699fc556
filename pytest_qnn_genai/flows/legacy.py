"""The legacy flow: ExecuTorch's own ``llama.py`` compiling a model case, as a subprocess.

``llama.py`` runs as ``python -c <bootstrap>``: the bootstrap installs the torchtune stand-in of
:mod:`pytest_qnn_genai.compat.torchtune` (in that subprocess only) and then runs the module as
``__main__``. The flags it is given are checked against the installed ``_build_parser()`` first, so
an unsupported combination fails with one :class:`UnsupportedLegacyConfig` message instead of an
argparse exit code twenty seconds into the run.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_qnn_genai
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.sdk.emulator import LIB_SUBDIR
from pytest_qnn_genai.targets import Target

LLAMA_MODULE = "executorch.examples.qualcomm.oss_scripts.llama.llama"
LLAMA_BACKENDS = ("htp", "gpu")  # llama.py's compile() raises ValueError for any other backend
EMULATOR_BACKENDS = ("htp",)  # the x86 emulator is the HTP simulator
PROBE_TIMEOUT_S = 300.0
LOG_TAIL_LINES = 25
RECORD = "legacy.json"
KILL_GRACE_S = 5.0
_PROBE_MARK = "@@pytest-qnn-genai-parser@@"
_PKG_PARENT = str(Path(pytest_qnn_genai.__file__).resolve().parent.parent)

_PRELUDE = f"""\
import sys
sys.path.append({_PKG_PARENT!r})
from pytest_qnn_genai.compat import torchtune
torchtune.install()
"""
_BUILD_BOOTSTRAP = _PRELUDE + f"""\
import runpy
sys.argv[0] = {LLAMA_MODULE!r}
runpy.run_module({LLAMA_MODULE!r}, run_name="__main__", alter_sys=True)
"""
_PROBE_BOOTSTRAP = _PRELUDE + f"""\
import json
from {LLAMA_MODULE} import _build_parser
options = []
for a in _build_parser()._actions:
    if not a.option_strings or a.dest == "help":
        continue
    default = a.default
    try:
        json.dumps(default)
    except TypeError:
        default = repr(default)
    options.append({{"flags": a.option_strings, "dest": a.dest, "default": default,
                    "choices": list(a.choices) if a.choices is not None else None,
                    "required": bool(a.required), "nargs": a.nargs}})
try:
    from executorch.backends.qualcomm.utils.utils import get_soc_to_chipset_map
    socs = sorted(get_soc_to_chipset_map())
except Exception:
    socs = None
print({_PROBE_MARK!r} + json.dumps({{"options": options, "socs": socs}}), flush=True)
"""


class LegacyFlowError(RuntimeError):
    """The legacy ``llama.py`` run failed (the message names the exit code and the log's tail)."""


class UnsupportedLegacyConfig(LegacyFlowError):
    """The case/target asks for something the installed ``llama.py`` cannot do."""


class LegacyTimeout(LegacyFlowError):
    """The legacy run exceeded its time limit; its whole process group was killed."""

    def __init__(self, message: str, pid: int) -> None:
        super().__init__(message)
        self.pid = pid


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
    def load(cls, out_dir: Path) -> "LegacyArtifacts":
        """The run recorded in ``out_dir`` (e.g. a cache entry's folder)."""
        data = json.loads((out_dir / RECORD).read_text())
        return cls(pte=out_dir / data["pte"], decode_qdq=out_dir / data["decode_qdq"],
                   log=out_dir / data["log"], wall_s=data["wall_s"], argv=tuple(data["argv"]),
                   peak_rss_mb=data["peak_rss_mb"])


@dataclass(frozen=True)
class LegacyOption:
    """One option of the installed ``llama.py`` parser."""

    flags: tuple[str, ...]
    dest: str
    default: Any
    choices: tuple[Any, ...] | None
    required: bool


@dataclass(frozen=True)
class LegacyParser:
    """The options (by long flag) and SoC names the installed ``llama.py`` accepts."""

    options: dict[str, LegacyOption]
    socs: tuple[str, ...] | None

    def has(self, flag: str) -> bool:
        return flag in self.options


@dataclass(frozen=True)
class _Finished:
    returncode: int
    wall_s: float
    peak_rss_mb: float | None


def _tail(log: Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:]) or "(empty log)"


def _exited(pid: int) -> bool:
    """True once ``pid`` (our child) has exited; it is not reaped, so its group id stays ours."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, SIGKILL it after a grace period, and reap the leader."""
    for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while not _exited(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _exited(proc.pid):
            break
    try:  # stragglers in the group (the unreaped leader keeps the group id ours)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _run_logged(argv: list[str], env: dict[str, str], cwd: Path, log: Path,
                timeout_s: float, what: str, limit_s: float | None = None) -> _Finished:
    """Run ``argv`` in its own process group, output to ``log``; kill the group on timeout."""
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)
    try:
        while not _exited(proc.pid):
            if time.monotonic() - start > timeout_s:
                _kill_group(proc)
                raise LegacyTimeout(
                    f"{what} timed out after {limit_s or timeout_s:g}s; process group {proc.pid} "
                    f"killed. Last lines of {log}:\n{_tail(log)}", proc.pid)
            time.sleep(0.1)
    except BaseException:
        if proc.returncode is None:
            _kill_group(proc)
        raise
    try:  # the leader exited: nothing it started may outlive it
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, status, usage = os.wait4(proc.pid, 0)  # reap, with this child's own peak RSS
    proc.returncode = os.waitstatus_to_exitcode(status)
    rss = usage.ru_maxrss / 1024.0 if usage.ru_maxrss else None  # Linux reports KiB
    return _Finished(proc.returncode, time.monotonic() - start, rss)


def _sdk_env(sdk_root: Path | str | None) -> dict[str, str]:
    env = dict(os.environ)
    root = str(sdk_root) if sdk_root is not None else env.get("QNN_SDK_ROOT")
    if not root:
        raise LegacyFlowError("no QNN SDK is active: call pytest_qnn_genai.sdk.activate(...) "
                              "or set QNN_SDK_ROOT before running the legacy flow")
    lib_dir = str(Path(root) / LIB_SUBDIR)
    ld = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and p != lib_dir]
    env.update(QNN_SDK_ROOT=root, LD_LIBRARY_PATH=os.pathsep.join([lib_dir, *ld]),
               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONUNBUFFERED="1")
    return env


_PARSERS: dict[str, LegacyParser] = {}


def _probe(python: str, timeout_s: float) -> LegacyParser:
    with tempfile.TemporaryDirectory(prefix="qnn-genai-probe-") as tmp:
        log = Path(tmp) / "probe.log"
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONUNBUFFERED="1")
        done = _run_logged([python, "-c", _PROBE_BOOTSTRAP], env, Path(tmp), log,
                           timeout_s, "reading llama.py's options")
        text = log.read_text(errors="replace")
        payload = next((line[len(_PROBE_MARK):] for line in text.splitlines()
                        if line.startswith(_PROBE_MARK)), None)
        if done.returncode != 0 or payload is None:
            raise LegacyFlowError(
                f"cannot import {LLAMA_MODULE} to read its options (exit code {done.returncode}). "
                f"Last lines:\n{_tail(log)}")
    data = json.loads(payload)
    options: dict[str, LegacyOption] = {}
    for o in data["options"]:
        opt = LegacyOption(tuple(o["flags"]), o["dest"], o["default"],
                           tuple(o["choices"]) if o["choices"] is not None else None, o["required"])
        for flag in opt.flags:
            options[flag] = opt
    return LegacyParser(options, tuple(data["socs"]) if data["socs"] is not None else None)


def legacy_parser(timeout_s: float = PROBE_TIMEOUT_S) -> LegacyParser:
    """The options of the installed ``llama.py`` (read once per process, in a subprocess)."""
    if sys.executable not in _PARSERS:
        _PARSERS[sys.executable] = _probe(sys.executable, timeout_s)
    return _PARSERS[sys.executable]


def _portable(value: Any, root: str | None) -> Any:
    if root and isinstance(value, str) and value.startswith(root + os.sep):
        return "<executorch>" + value[len(root):]
    return value


def legacy_parser_defaults() -> dict[str, Any]:
    """``{long flag: default}`` of every ``llama.py`` option, for configuration snapshots.

    Defaults that are files inside the executorch package read ``<executorch>/...``.
    """
    spec = importlib.util.find_spec("executorch")
    root = next(iter(spec.submodule_search_locations), None) if spec else None
    out: dict[str, Any] = {}
    for opt in legacy_parser().options.values():
        out.setdefault(max(opt.flags, key=len), _portable(opt.default, root))
    return dict(sorted(out.items()))


def pte_filename(case: ModelCase) -> str:
    """The .pte name ``llama.py`` writes for a case (its ``export_llama`` naming rule)."""
    name = f"{case.model_mode}_llama_qnn.pte"
    return f"{case.decoder_model}_{name}" if case.decoder_model == "stories260k" else name


def calibration_samples(case: ModelCase) -> list[dict[str, Any]]:
    """``--calib_samples`` content: one single-turn chat per calibration prompt."""
    return [{"messages": [{"role": "user", "content": p}]} for p in case.calibration_prompts]


def legacy_argv(case: ModelCase, target: Target, out_dir: Path, calib_file: Path,
                parser: LegacyParser | None = None) -> list[str]:
    """The ``llama.py`` arguments for a compile-only build, checked against its parser."""
    parser = parser or legacy_parser()
    check_supported(case, target, parser)
    args = ["--decoder_model", case.decoder_model, "--model_mode", case.model_mode,
            "--prefill_ar_len", str(case.prefill_ar_len), "--max_seq_len", str(case.max_seq_len),
            "--max_context_len", str(case.max_context_len), "--temperature", "0",
            "--prompt", case.eval_prompt,
            "--checkpoint", str(case.path("checkpoint")), "--params", str(case.path("params")),
            "--tokenizer_model", str(case.path("tokenizer_model")),
            "--tokenizer_bin", str(case.path("tokenizer_bin")),
            "--soc_model", target.soc.name, "--compile_only",
            "--build_folder", str(out_dir / "build-x86" if target.is_emulator else out_dir / "build"),
            "--artifact", str(out_dir), "--calib_samples", str(calib_file)]
    if parser.has("--backend"):
        args += ["--backend", target.backend]
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


def check_supported(case: ModelCase, target: Target, parser: LegacyParser) -> None:
    """Raise :class:`UnsupportedLegacyConfig` for a combination ``llama.py`` cannot build."""
    for flag, why in (("--compile_only", "compile-only builds"),
                      ("--build_folder", "compile-only builds"),
                      ("--artifact", "the output folder"), ("--soc_model", "the target SoC"),
                      ("--prefill_ar_len", "hybrid shapes"), ("--max_seq_len", "hybrid shapes"),
                      ("--max_context_len", "hybrid shapes"), ("--temperature", "greedy decoding"),
                      ("--prompt", "its required prompt"), ("--checkpoint", "the weights"),
                      ("--params", "the model shape"), ("--tokenizer_model", "the tokenizer"),
                      ("--tokenizer_bin", "the runner's tokenizer"),
                      ("--calib_samples", "offline calibration")):
        _require(parser, flag, why)
    _require_choice(parser, "--decoder_model", case.decoder_model, f"model case {case.name}")
    _require_choice(parser, "--model_mode", case.model_mode, f"model case {case.name}")
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


def build_legacy(case: ModelCase, target: Target, out_dir: Path, timeout_s: float = 1200, *,
                 sdk_root: Path | None = None) -> LegacyArtifacts:
    """Compile ``case`` for ``target`` with ``llama.py --compile_only`` into ``out_dir``.

    The QNN SDK is ``sdk_root`` or the one activated in this process (``QNN_SDK_ROOT``).
    ``timeout_s`` bounds the whole call, including reading ``llama.py``'s options the first time.
    """
    deadline = time.monotonic() + timeout_s
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    env = _sdk_env(sdk_root)
    parser = legacy_parser(min(PROBE_TIMEOUT_S, timeout_s))
    calib = out_dir / "calib_samples.json"
    args = legacy_argv(case, target, out_dir, calib, parser)
    calib.write_text(json.dumps(calibration_samples(case), indent=1))
    pte = out_dir / pte_filename(case)
    qdq = out_dir / "decode_qdq.pt2"
    for stale in (pte, qdq):
        stale.unlink(missing_ok=True)
    argv = [sys.executable, "-c", _BUILD_BOOTSTRAP, *args]
    log = out_dir / "legacy_llama.log"
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise LegacyTimeout(f"legacy llama.py: no time left of {timeout_s:g}s to start the build", 0)
    done = _run_logged(argv, env, out_dir, log, remaining,
                       f"legacy llama.py ({case.name}, {target.id})", limit_s=timeout_s)
    if done.returncode != 0:
        raise LegacyFlowError(
            f"legacy llama.py ({case.name}, {target.id}) failed with exit code {done.returncode} "
            f"after {done.wall_s:.0f}s. Last lines of {log}:\n{_tail(log)}")
    missing = [p.name for p in (pte, qdq) if not p.is_file()]
    if missing:
        found = sorted(p.name for p in out_dir.iterdir() if p.is_file())
        raise LegacyFlowError(
            f"legacy llama.py exited 0 but did not write {', '.join(missing)} in {out_dir} "
            f"(found: {', '.join(found) or 'nothing'}). Last lines of {log}:\n{_tail(log)}")
    artifacts = LegacyArtifacts(pte=pte, decode_qdq=qdq, log=log, wall_s=done.wall_s,
                                argv=tuple(argv), peak_rss_mb=done.peak_rss_mb)
    artifacts.save(out_dir)
    return artifacts
