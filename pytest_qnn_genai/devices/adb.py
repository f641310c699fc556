"""The adb transport: one Android device reached through the real ``adb`` client.

:class:`AdbDevice` is a :class:`~pytest_qnn_genai.devices.transport.Transport`. Every call is
``adb [-H host] [-P port] -s <serial> ...`` under a timeout. A failed call is a
:class:`TransportInfraError` when the client's own message says the link, the server or the
device went away (retried with bounded backoff), a :class:`TransportCommandError` otherwise
(never retried), or a :class:`TransportTimeout`. A shell command prints a start marker first, so
a command that ran and failed is never mistaken for a transport failure, whatever it printed.
A push by digest lands under a temporary name, is renamed, and only then gets its sidecar
``.<name>.sha256``: a broken push is never mistaken for a present file.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pytest_qnn_genai.devices.transport import (
    DeviceHealthError,
    DeviceInfo,
    ShellResult,
    TransportCommandError,
    TransportError,
    TransportInfraError,
    TransportTimeout,
)

T = TypeVar("T")

# What the adb client (29.x and later) prints when the transport, not the command, failed.
INFRA_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE | re.MULTILINE)
    for p in (
        r"device offline",
        r"device '[^']*' not found",
        r"no devices/emulators found",
        r"device still (authorizing|connecting)",
        r"cannot connect to daemon",
        r"daemon not running",
        r"failed to check server version",
        r"server version \(\d+\) doesn't match this client",
        r"protocol fault",
        r"connection reset",
        r"broken pipe",
        r"couldn't read from device",
        r"failed to copy .*: no response",
        r"\d+-byte write failed",
        r"^(adb: )?error: closed$",
    )
)
_PROGRESS_LINE = re.compile(r"^\[\s*\d+%\].*$", re.MULTILINE)
PHONE_WORKSPACE_ROOT = "/data/local/tmp/pytest-qnn-genai"  # every session's folder under it
SHELL_START_MARKER = "__pytest_qnn_genai_shell_started__"
SOC_BY_BOARD_PLATFORM = {
    "lahaina": "SM8350",
    "taro": "SM8450",
    "kalama": "SM8550",
    "pineapple": "SM8650",
    "sun": "SM8750",
    "canoe": "SM8850",
}


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff for infrastructure errors."""

    attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0

    def delays(self) -> list[float]:
        """Sleep before each retry (``attempts - 1`` values)."""
        return [min(self.max_delay_s, self.base_delay_s * 2**i) for i in range(self.attempts - 1)]


def split_adb_host(value: str | None) -> tuple[str | None, int | None]:
    """``--adb-host HOST[:PORT]`` -> (host, port); (None, None) for the default server."""
    if not value:
        return None, None
    host, sep, port = value.rpartition(":")
    if sep and port.isdigit() and host and not host.endswith(":"):
        return host.strip("[]"), int(port)
    return value, None


def is_infra_failure(output: str) -> bool:
    """True if the adb client's output names a transport/server/device failure."""
    return any(p.search(output) for p in INFRA_PATTERNS)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


class AdbDevice:
    """A device addressed by serial through the ``adb`` client binary: the adb
    :class:`~pytest_qnn_genai.devices.transport.Transport`."""

    def __init__(self, serial: str, adb_path: str = "adb", host: str | None = None,
                 port: int | None = None, command_timeout_s: float = 60.0,
                 transfer_timeout_s: float = 600.0, retry: RetryPolicy = RetryPolicy(),
                 env: Mapping[str, str] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._serial = serial
        self.adb_path = adb_path
        self.host = host
        self.port = port
        self.command_timeout_s = command_timeout_s
        self.transfer_timeout_s = transfer_timeout_s
        self.retry = retry
        self.env = dict(env) if env is not None else None
        self._sleep = sleep

    @property
    def serial(self) -> str:
        return self._serial

    @property
    def workspace_root(self) -> str:
        return PHONE_WORKSPACE_ROOT

    def __repr__(self) -> str:
        return f"AdbDevice({self.serial!r}, host={self.host!r}, port={self.port!r})"

    def describe(self) -> str:
        server = f"{self.host or 'localhost'}:{self.port or 5037}"
        return f"{self.serial} through the adb server at {server} ({self.adb_path})"

    def command(self, args: Sequence[str]) -> list[str]:
        """The full client command line for ``args``."""
        cmd = [self.adb_path]
        if self.host:
            cmd += ["-H", self.host]
        if self.port:
            cmd += ["-P", str(self.port)]
        return cmd + ["-s", self.serial, *args]

    def _invoke(self, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """One client call; only a timeout is turned into an exception here."""
        cmd = self.command(args)
        env = None if self.env is None else {**os.environ, **self.env}
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired as exc:
            raise TransportTimeout(f"timed out after {timeout:g} s", self.serial, cmd,
                                   _text(exc.stdout) + _text(exc.stderr)) from None
        return subprocess.CompletedProcess(cmd, proc.returncode, _text(proc.stdout),
                                           _text(proc.stderr))

    def _failure(self, proc: subprocess.CompletedProcess[str], what: str) -> TransportError:
        output = proc.stdout + proc.stderr
        if not _PROGRESS_LINE.sub("", output).strip():
            # adb 29 _exit()s without flushing its message when the link dies mid-transfer
            return TransportInfraError(f"{what} exited {proc.returncode} without an error "
                                       "message (connection lost)", self.serial, proc.args,
                                       output, proc.returncode)
        kind = TransportInfraError if is_infra_failure(output) else TransportCommandError
        return kind(f"{what} failed", self.serial, proc.args, output, proc.returncode)

    def adb(self, args: Sequence[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``adb ... -s serial <args>`` once; raise a classified error on nonzero exit."""
        proc = self._invoke(args, timeout or self.command_timeout_s)
        if proc.returncode != 0:
            raise self._failure(proc, f"adb {args[0] if args else ''}".strip())
        return proc

    def with_retry(self, operation: Callable[[], T]) -> T:
        """Call ``operation``, retrying :class:`TransportInfraError` with bounded backoff."""
        delays = self.retry.delays()
        for attempt in range(len(delays) + 1):
            try:
                return operation()
            except TransportInfraError as exc:
                if attempt == len(delays):
                    raise TransportInfraError(
                        f"gave up after {attempt + 1} attempts: {str(exc).splitlines()[0]}",
                        exc.device, exc.command, exc.output, exc.returncode) from exc
                self._sleep(delays[attempt])
        raise AssertionError("unreachable")

    def get_state(self, timeout: float | None = None) -> str:
        """``adb get-state``: ``device``, ``offline``, ``bootloader``, …"""
        return self.with_retry(lambda: self.adb(["get-state"], timeout).stdout.strip())

    def features(self, timeout: float | None = None) -> set[str]:
        """Features the device's adbd advertises (``shell_v2``, ``stat_v2``, ...)."""
        out = self.with_retry(lambda: self.adb(["features"], timeout).stdout)
        return {line.strip() for line in out.splitlines() if line.strip()}

    def _shell_once(self, command: str, timeout: float) -> ShellResult:
        proc = self._invoke(["shell", f"echo {SHELL_START_MARKER}; {command}"], timeout)
        head, sep, rest = proc.stdout.partition(SHELL_START_MARKER + "\n")
        if not sep:  # the remote shell never started: the client or the link failed
            if proc.returncode == 0:
                raise TransportInfraError("shell output lost (no start marker)", self.serial,
                                          proc.args, proc.stdout + proc.stderr, proc.returncode)
            raise self._failure(proc, "adb shell")
        return ShellResult(proc.returncode, head + rest, proc.stderr)

    def run(self, command: str, timeout_s: float | None = None,
            check: bool = False) -> ShellResult:
        """Run ``command`` in the device shell and return its real exit code and output.

        Transport failures before the command started are retried; a command that ran is
        never re-run. With ``check``, a nonzero exit raises :class:`TransportCommandError`.
        """
        timeout = timeout_s or self.command_timeout_s
        result = self.with_retry(lambda: self._shell_once(command, timeout))
        if check and result.exit_code != 0:
            raise TransportCommandError(f"shell command exited {result.exit_code}", self.serial,
                                        self.command(["shell", command]),
                                        result.stdout + result.stderr, result.exit_code)
        return result

    def getprop(self, name: str, timeout: float | None = None) -> str:
        """Value of a system property ('' when unset)."""
        return self.run(f"getprop {shlex.quote(name)}", timeout, check=True).stdout.strip()

    def remote_size(self, remote: str, timeout: float | None = None) -> int:
        """Size in bytes of a remote file."""
        out = self.run(f"stat -c %s {shlex.quote(remote)}", timeout, check=True).stdout
        return int(out.strip())

    def copy(self, local: Path | str, remote: str, timeout: float | None = None) -> None:
        """Plain ``adb push``; retried on transport failures."""
        if not Path(local).is_file():
            raise FileNotFoundError(local)
        args = ["push", str(local), remote]
        self.with_retry(lambda: self.adb(args, timeout or self.transfer_timeout_s))

    def push(self, local: Path, remote: str, digest: str) -> bool:
        """Push ``local`` to ``remote`` unless its sidecar ``.<name>.sha256`` holds ``digest``:
        into ``<remote>.partial``, renamed, then the sidecar written. True if it pushed."""
        q = shlex.quote
        folder, _, name = remote.rpartition("/")
        sidecar = f"{folder}/.{name}.sha256"
        if self.run(f"cat {q(sidecar)} 2>/dev/null").stdout.strip() == digest:
            return False
        self.run(f"mkdir -p {q(folder)} && rm -f {q(sidecar)}", check=True)
        self.copy(local, remote + ".partial")
        self.run(f"mv {q(remote + '.partial')} {q(remote)} && printf %s {q(digest)} > "
                 f"{q(sidecar)}", check=True)
        return True

    def _pull_once(self, remote: str, local: Path, expected_size: int | None, timeout: float) -> None:
        proc = self._invoke(["pull", remote, str(local)], timeout)
        if proc.returncode != 0:
            raise self._failure(proc, "adb pull")
        if expected_size is not None:
            got = local.stat().st_size
            if got != expected_size:
                raise TransportInfraError(f"truncated pull: got {got} of {expected_size} bytes",
                                          self.serial, proc.args, proc.stdout + proc.stderr, 0)

    def pull(self, remote: str, local: Path, expected_size: int | None = None) -> Path:
        """``adb pull`` with a size check (remote ``stat`` unless ``expected_size`` is given).

        A short file is treated as a transport failure and pulled again.
        """
        local = Path(local)
        if expected_size is None:
            expected_size = self.remote_size(remote)
        self.with_retry(lambda: self._pull_once(remote, local, expected_size,
                                                self.transfer_timeout_s))
        return local

    def health(self, expected_soc: str | None = None) -> DeviceInfo:
        """Online, shell v2 (remote exit codes) and, if asked, the expected SoC (SM8650…)."""
        state = self.get_state()
        if state != "device":
            raise DeviceHealthError(f"state is {state!r}, expected 'device'", self.serial,
                                    self.command(["get-state"]), state)
        if "shell_v2" not in self.features():
            raise DeviceHealthError("adbd lacks shell_v2, so remote exit codes would be lost",
                                    self.serial, self.command(["features"]), "")
        soc_model = self.getprop("ro.soc.model")
        platform = self.getprop("ro.board.platform")
        soc = soc_model or SOC_BY_BOARD_PLATFORM.get(platform.lower(), "")
        info = DeviceInfo(self.serial, soc.upper(), soc_model, platform,
                          self.getprop("ro.product.cpu.abi"))
        if expected_soc and info.soc != expected_soc.upper():
            seen = f"ro.soc.model={soc_model!r}, ro.board.platform={platform!r}"
            raise DeviceHealthError(
                f"is {info.soc or 'an unknown SoC'} ({seen}) but --soc asked for "
                f"{expected_soc.upper()}; pick a matching --device or fix --soc",
                self.serial, self.command(["shell", "getprop ro.soc.model"]), "")
        return info
