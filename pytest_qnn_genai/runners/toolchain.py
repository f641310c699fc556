"""The host tools the runners' build needs: the Debian packages, the compiler and CMake, and a
subprocess runner that logs, reports progress and always ends within its time.

:data:`DEBIAN_PACKAGES` is what ``make build-deps`` installs (the Makefile keeps the same list; a
unit test holds them equal). Their versions (``dpkg-query -W``), ``c++ --version`` and
``cmake --version`` go into the cache key: a system update rebuilds the runners.
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from pytest_qnn_genai.progress import Writer, heartbeat
from pytest_qnn_genai.runners.sources import RunnerBuildError

DEBIAN_PACKAGES = ("cmake", "g++", "libgflags-dev", "libsentencepiece-dev", "libre2-dev",
                   "libpcre2-dev", "nlohmann-json3-dev")
INSTALL_HINT = "run `make build-deps` (apt-get install -y " + " ".join(DEBIAN_PACKAGES) + ")"
PROBE_TIMEOUT_S = 30.0
TAIL_LINES = 15
_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_MAKE_NOISE = re.compile(r"^g?make(\[\d+\])?: ")  # make's own bookkeeping, not the compiler's
# a compiler, linker or CMake error (kept apart: with parallel jobs, another file's warnings can
# push it out of the last lines)
_ERROR = re.compile(r"(^|[\s:])(fatal )?error:|undefined reference|CMake Error")
FIRST_ERRORS = 5


def debian_versions(packages: Sequence[str] = DEBIAN_PACKAGES) -> dict[str, str]:
    """``{package: version}`` of installed Debian packages; one line naming the missing ones and
    ``make build-deps`` if any is not installed."""
    if shutil.which("dpkg-query") is None:
        raise RunnerBuildError("dpkg-query not found: the runners' build is set up for Debian/"
                               f"Ubuntu hosts; install the equivalents of {' '.join(packages)}")
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n", *packages],
        capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    versions = {}
    for line in proc.stdout.splitlines():
        name, version, status = (line.split("\t") + ["", ""])[:3]
        if status.strip() == "ii":  # installed (not only "rc": removed, config files left)
            versions[name.split(":")[0]] = version
    missing = [p for p in packages if p not in versions]
    if missing:
        raise RunnerBuildError(f"the runners' build needs the Debian package(s) "
                               f"{' '.join(missing)}, not installed: {INSTALL_HINT}")
    return versions


def compiler() -> str:
    """The C++ compiler: ``$CXX``, else ``c++`` (Debian's alternative for g++)."""
    return os.environ.get("CXX") or "c++"


def tool_version(tool: str) -> str:
    """The first line of ``tool --version`` (one line naming ``make build-deps`` if it is not
    installed or does not answer)."""
    try:
        proc = subprocess.run([tool, "--version"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S)
    except (FileNotFoundError, PermissionError):
        raise RunnerBuildError(f"{tool} not found: {INSTALL_HINT}") from None
    except subprocess.TimeoutExpired:
        raise RunnerBuildError(f"`{tool} --version` did not answer in {PROBE_TIMEOUT_S:.0f}s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RunnerBuildError(f"`{tool} --version` exited {proc.returncode}: {INSTALL_HINT}")
    return lines[0].strip()


def run_logged(cmd: Sequence[str], what: str, log: Path, deadline: float, write: Writer,
               cwd: Path | None = None) -> None:
    """Run ``cmd`` with its output appended to ``log``, progress lines (``what``, elapsed time,
    make's last ``[ NN%]``) on ``write``, killed (its whole process group) at ``deadline``
    (``time.monotonic()``). Failure or timeout: :class:`RunnerBuildError` whose first line says
    which step failed and how, followed by the output's last lines."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    errors: list[str] = []
    percent = [""]
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise RunnerBuildError(f"{what}: no time left of the build's timeout")
    with open(log, "a", encoding="utf-8", errors="replace") as sink, \
            heartbeat(what, write, status=lambda: percent[0]):
        sink.write(f"$ {' '.join(cmd)}\n")
        sink.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                sink.write(line)
                hit = _PERCENT.match(line)
                if hit:
                    percent[0] = f"[{hit.group(1)}%]"
                elif not _MAKE_NOISE.match(line):
                    tail.append(line.rstrip("\n"))
                    if len(errors) < FIRST_ERRORS and _ERROR.search(line):
                        errors.append(line.rstrip("\n"))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            reader.join(timeout=5)
            raise RunnerBuildError(_report(f"{what} timed out after {remaining:.0f}s (the "
                                           "build's timeout)", errors, tail)) from None
        reader.join(timeout=5)
        if code != 0:
            raise RunnerBuildError(_report(f"{what} failed (exit {code})", errors, tail))


def _report(headline: str, errors: Sequence[str], tail: Sequence[str]) -> str:
    """``headline``, then the first error lines and the last lines of the output, indented."""
    lines = [f"{headline}; " + ("its first errors and last lines:" if errors else "its last lines:")]
    lines += [f"    {line}" for line in errors]
    if errors:
        lines.append("    ...")
    lines += [f"    {line}" for line in tail if line not in errors]
    return "\n".join(lines)
