"""executorch's ``llama.py`` as a command: its bootstrap, its parser, and a bounded subprocess.

``llama.py`` runs as ``python -c <bootstrap>``: the bootstrap installs the torchtune stand-in of
:mod:`pytest_qnn_genai.compat.torchtune` (in that subprocess only) and then runs the module as
``__main__``. Its options are read once per interpreter from the installed ``_build_parser()`` in a
subprocess of their own (importing the llama package is slow and pulls in lm_eval).

Every subprocess runs in its own process group with a deadline: on timeout the whole group is
killed (SIGTERM, then SIGKILL), so a hung QNN compile never outlives the test session. Its leader
also dies with the process that started it (``PR_SET_PDEATHSIG``, set by a launcher before it
execs the command): a pytest ended by a signal Python does not turn into an exception (SIGTERM
from CI, SIGKILL) runs no ``except`` block, and a build left running would hold the cache's lock
and gigabytes of memory with nobody to wait for it.
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

import pytest_qnn_genai
from pytest_qnn_genai.sdk import require_active
from pytest_qnn_genai.sdk.emulator import LIB_SUBDIR
from pytest_qnn_genai.stages.qnn_refusal import QnnRefusal

LLAMA_MODULE = "executorch.examples.qualcomm.oss_scripts.llama.llama"
PROBE_TIMEOUT_S = 300.0
LOG_TAIL_LINES = 25
KILL_GRACE_S = 5.0
_PROBE_MARK = "@@pytest-qnn-genai-parser@@"
# argv: the parent's pid, then the command. PR_SET_PDEATHSIG (1) survives exec; a parent that died
# before it was set is seen as a changed parent pid.
_DIE_WITH_PARENT = ("import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9); "
                    "os.getppid() == int(sys.argv[1]) or os._exit(137); "
                    "os.execvp(sys.argv[2], sys.argv[2:])")
_PKG_PARENT = str(Path(pytest_qnn_genai.__file__).resolve().parent.parent)

PRELUDE = f"""\
import sys
sys.path.append({_PKG_PARENT!r})
from pytest_qnn_genai.compat import torchtune
torchtune.install()
"""
BUILD_BOOTSTRAP = PRELUDE + f"""\
import runpy
sys.argv[0] = {LLAMA_MODULE!r}
runpy.run_module({LLAMA_MODULE!r}, run_name="__main__", alter_sys=True)
"""
_PROBE_BOOTSTRAP = PRELUDE + f"""\
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


class LegacyQnnRefusal(QnnRefusal, LegacyFlowError):
    """llama.py failed because QNN refused its graph at prepare (its log says so): remembered
    under the build's key like the staged compile's refusal."""


class LegacyTimeout(LegacyFlowError):
    """The legacy run exceeded its time limit; its whole process group was killed."""

    def __init__(self, message: str, pid: int) -> None:
        super().__init__(message)
        self.pid = pid


@dataclass(frozen=True)
class LegacyOption:
    """One option of the installed ``llama.py`` parser."""

    flags: tuple[str, ...]
    dest: str
    default: object  # argparse values: str, int, float, bool, None, lists of those
    choices: tuple[object, ...] | None
    required: bool


@dataclass(frozen=True)
class LegacyParser:
    """The options (by long flag) and SoC names the installed ``llama.py`` accepts."""

    options: dict[str, LegacyOption]
    socs: tuple[str, ...] | None

    def has(self, flag: str) -> bool:
        return flag in self.options


@dataclass(frozen=True)
class Finished:
    """How a bounded subprocess ended."""

    returncode: int
    wall_s: float
    peak_rss_mb: float | None


def tail(log: Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:]) or "(empty log)"


def _exited(pid: int) -> bool:
    """True once ``pid`` (our child) has exited; it is not reaped, so its group id stays ours."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
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


def run_logged(argv: list[str], env: dict[str, str], cwd: Path, log: Path,
                timeout_s: float, what: str, limit_s: float | None = None) -> Finished:
    """Run ``argv`` in its own process group, output to ``log``; kill the group on timeout, and
    its leader when this process dies."""
    start = time.monotonic()
    launch = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv]
    with open(log, "wb") as out:
        proc = subprocess.Popen(launch, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)
    try:
        while not _exited(proc.pid):
            if time.monotonic() - start > timeout_s:
                _kill_group(proc)
                raise LegacyTimeout(
                    f"{what} timed out after {limit_s or timeout_s:g}s; process group {proc.pid} "
                    f"killed. Last lines of {log}:\n{tail(log)}", proc.pid)
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
    return Finished(proc.returncode, time.monotonic() - start, rss)


def sdk_env(sdk_root: Path | str | None = None) -> dict[str, str]:
    """This process's environment for a llama.py subprocess: the QNN SDK (``sdk_root`` or the
    active one) on ``QNN_SDK_ROOT`` and ``LD_LIBRARY_PATH``, Hugging Face offline."""
    env = dict(os.environ)
    root = str(sdk_root) if sdk_root is not None else str(require_active("the legacy flow"))
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
        done = run_logged([python, "-c", _PROBE_BOOTSTRAP], env, Path(tmp), log,
                           timeout_s, "reading llama.py's options")
        text = log.read_text(errors="replace")
        payload = next((line[len(_PROBE_MARK):] for line in text.splitlines()
                        if line.startswith(_PROBE_MARK)), None)
        if done.returncode != 0 or payload is None:
            raise LegacyFlowError(
                f"cannot import {LLAMA_MODULE} to read its options (exit code {done.returncode}). "
                f"Last lines:\n{tail(log)}")
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


def _portable(value: object, root: str | None) -> object:
    if root and isinstance(value, str) and value.startswith(root + os.sep):
        return "<executorch>" + value[len(root):]
    return value


def legacy_parser_defaults() -> dict[str, object]:
    """``{long flag: default}`` of every ``llama.py`` option, for configuration snapshots.

    Defaults that are files inside the executorch package read ``<executorch>/...``.
    """
    spec = importlib.util.find_spec("executorch")
    locations = (spec.submodule_search_locations or []) if spec else []
    root = next(iter(locations), None)
    out: dict[str, object] = {}
    for opt in legacy_parser().options.values():
        out.setdefault(max(opt.flags, key=len), _portable(opt.default, root))
    return dict(sorted(out.items()))


