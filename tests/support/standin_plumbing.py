"""What both runner stand-ins share: gflags parsing, upstream's console and clock, the x86
launcher a stand-in runs behind, and its way of ending (a real SIGABRT where upstream aborts).

Every piece is written from upstream's behaviour: gflags' parsing rules, ``ET_LOG``'s line form
(runtime/platform/default/posix.cpp), ``ET_CHECK_MSG`` (runtime/platform/assert.h), the runner's
``time_in_ms`` (extension/llm/runner/util.h)."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

TIME_SCALE_ENV = "QNN_GENAI_STANDIN_TIME_SCALE"
REPO_ROOT = Path(__file__).resolve().parents[2]
ABORT_EXIT = 134  # std::abort() -> SIGABRT, as a shell reports it
LIMIT_EXIT = 2  # something these stand-ins do not model
# c10 ScalarType codes (MethodMeta TensorInfo.dtype()) -> numpy
SCALAR_TYPES = {0: np.uint8, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.int64, 5: np.float16,
                6: np.float32, 7: np.float64, 11: np.bool_, 27: np.uint16, 28: np.uint32,
                29: np.uint64}


class FlagError(Exception):
    """gflags rejected the command line (it prints the message and exits 1)."""


class Abort(Exception):
    """An ET_CHECK failed: upstream logs it and calls std::abort()."""


def parse_gflags(argv: list[str], flags: dict[str, tuple[Callable[[str], Any], Any]],
                 ) -> tuple[dict[str, Any], set[str], list[str]]:
    """(values, names set on the command line, positional args), as gflags parses: flags
    anywhere, ``-x``/``--x``, ``--x=v``/``--x v``, booleans ``--x``/``--nox``/``--x=false``."""
    values = {name: default for name, (_, default) in flags.items()}
    explicit: set[str] = set()
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg, i = argv[i], i + 1
        if arg == "--":
            positional += argv[i:]
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        key, eq, value = arg.lstrip("-").partition("=")
        if key not in flags and key.startswith("no") and flags.get(key[2:], (None,))[0] is bool:
            key, eq, value = key[2:], "=", "false"
        if key not in flags:
            raise FlagError(f"ERROR: unknown command line flag '{key}'")
        kind = flags[key][0]
        if not eq and kind is not bool:
            if i >= len(argv):
                raise FlagError(f"ERROR: flag '{arg}' is missing its argument")
            value, i = argv[i], i + 1
        try:
            truth = {"": True, "1": True, "t": True, "true": True, "y": True, "yes": True,
                     "0": False, "f": False, "false": False, "n": False, "no": False}
            values[key] = truth[value.lower()] if kind is bool else kind(value)
        except (KeyError, ValueError):
            names: dict[object, str] = {bool: "bool", int: "int32", float: "double"}
            name = names.get(kind, getattr(kind, "__name__", str(kind)))
            raise FlagError(f"ERROR: illegal value '{value}' specified for {name} flag "
                            f"'{key}'") from None
        explicit.add(key)
    return values, explicit, positional


class Console:
    """printf stdout (held until a normal exit unless a tty: lost on abort, as stdio buffers)
    and ET_LOG stderr lines in runtime/platform/default/posix.cpp:et_pal_emit_log_message form."""

    def __init__(self, stdout: IO[str], stderr: IO[str]) -> None:
        self.stdout, self.stderr = stdout, stderr
        self._held: list[str] = []
        self._t0 = time.monotonic()

    def out(self, text: str) -> None:
        if self.stdout.isatty():
            self.stdout.write(text)
        else:
            self._held.append(text)

    def flush(self) -> None:
        self.stdout.write("".join(self._held))
        self._held.clear()

    def log(self, level: str, where: str, message: str) -> None:
        t = time.monotonic() - self._t0
        stamp = (f"{int(t // 3600):02d}:{int(t // 60 % 60):02d}:{int(t % 60):02d}."
                 f"{int(t % 1 * 1e6):06d}")
        self.stderr.write(f"{level} {stamp} executorch:{where}] {message}\n")

    def check(self, ok: bool, where: str, func: str, cond: str, message: str | None) -> None:
        """runtime/platform/assert.h: ET_CHECK_MSG (ET_CHECK when ``message`` is None)."""
        if not ok:
            said = f": {cond}" if message is None else f" ({cond}): {message}"
            self.log("F", where, f"In function {func}(), assert failed{said}")
            raise Abort(said)


class Clock:
    """Reported time: the wall clock plus backend-simulated costs, scaled by TIME_SCALE_ENV."""

    def __init__(self, scale: float) -> None:
        self.scale, self.extra = scale, 0.0
        self._wall0, self._t0 = time.time(), time.perf_counter()

    def seconds(self) -> float:
        return self._wall0 + (time.perf_counter() - self._t0 + self.extra) * self.scale

    def ms(self) -> int:
        """extension/llm/runner/util.h:time_in_ms (integer epoch milliseconds)."""
        return int(self.seconds() * 1000)


def time_scale(given: float | None) -> float:
    return float(os.environ.get(TIME_SCALE_ENV) or 1) if given is None else given


def load_backend(spec: str) -> Callable[..., Any]:
    """Import a ``module:function`` backend factory."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"a backend looks like 'package.module:function', got {spec!r}")
    return getattr(importlib.import_module(module_name), attr)


LAUNCHER_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static const char *ENV[][2] = {%(env)s{0, 0}};
static const char *PREFIX[] = {%(prefix)s0};
int main(int argc, char **argv) {
  for (int i = 0; ENV[i][0]; i++) setenv(ENV[i][0], ENV[i][1], 1);
  const char *old = getenv("PYTHONPATH");
  size_t len = strlen(%(repo)s) + (old ? strlen(old) : 0) + 2;
  char *path = malloc(len);
  snprintf(path, len, "%%s%%s%%s", %(repo)s, old && *old ? ":" : "", old ? old : "");
  setenv("PYTHONPATH", path, 1);
  int n = 0;
  while (PREFIX[n]) n++;
  char **args = calloc(n + argc + 1, sizeof(char *));
  for (int i = 0; i < n; i++) args[i] = (char *)PREFIX[i];
  for (int i = 1; i < argc; i++) args[n + i - 1] = argv[i];
  execv(PREFIX[0], args);
  perror("execv");
  return 127;
}
"""
COMPILE_TIMEOUT_S = 60


def _c(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII text is a C string literal


def write_launcher(path: Path, module: str, env: dict[str, str], python: str = sys.executable,
                   ) -> Path:
    """An x86_64 executable (compiled here: a runner is an ELF binary, whose libraries the
    plugin reads before it pushes them) that runs ``python -m module "$@"`` with ``env`` and
    this repo importable. It needs nothing but libc."""
    path.parent.mkdir(parents=True, exist_ok=True)
    source = path.with_name(path.name + ".c")
    source.write_text(LAUNCHER_C % {
        "env": "".join(f"{{{_c(k)}, {_c(v)}}}, " for k, v in env.items()),
        "prefix": "".join(f"{_c(a)}, " for a in (python, "-m", module)),
        "repo": _c(str(REPO_ROOT))})
    done = subprocess.run(["gcc", "-O0", "-o", str(path), str(source)], capture_output=True,
                          text=True, timeout=COMPILE_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"compiling the launcher {path} failed: {done.stderr.strip()}")
    source.unlink()
    return path


def exit_like_upstream(code: int) -> None:
    """End the process: a real SIGABRT where upstream aborts (the shell then reports 134)."""
    if code == ABORT_EXIT:
        sys.stderr.flush()
        os.abort()
    sys.exit(code)


def activate_qnn_sdk() -> None:
    """Make the QNN emulator libraries loadable (the project's loader: the one package import)."""
    sdk_root = os.environ.get("QNN_SDK_ROOT")
    if not sdk_root:
        raise RuntimeError("QNN_SDK_ROOT is not set")
    import executorch.runtime  # noqa: F401  (before activate: host_runner's import hazard)

    from pytest_qnn_genai.sdk import activate, resolve_sdk

    sdk = resolve_sdk(sdk_root, Path(sdk_root))
    if sdk is None:
        raise RuntimeError(f"no QNN SDK at {sdk_root}")
    activate(sdk)
