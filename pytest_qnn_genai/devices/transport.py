"""The seam between the plugin's phone logic and how a device is reached: :class:`Transport`.

Everything above this module (the workspace, the runners' contracts, the device session) talks
to a device only through these five operations and sees only these errors; a transport (adb,
:mod:`.adb`; this machine, :mod:`.local`) is one module that provides them:

- ``describe()``: one line naming the device and how it is reached, for messages;
- ``health(expected_soc)``: online, able to report exit codes, and what it is (SoC, ABI);
- ``push(local, remote, digest)``: make ``remote`` hold ``local``'s content, skipped when the
  device already holds that digest there; the content is complete before it counts as present;
- ``run(command, timeout_s, check)``: one shell command, its real exit code and output, within a
  timeout; a command that started is never run again;
- ``pull(remote, local, expected_size)``: fetch a file, its size checked (a short file is a
  transport failure, fetched again).

Errors: :class:`TransportInfraError` (the link, the server or the device went away: a transport
retries these, bounded), :class:`TransportCommandError` (the command itself failed: never
retried), :class:`TransportTimeout`, :class:`DeviceHealthError`; all :class:`TransportError`.
"""
from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


def last_lines(text: str, count: int = 8) -> str:
    """The last ``count`` non-empty lines of ``text``."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-count:])


class TransportError(Exception):
    """A device call failed; names the device, the command and its last words."""

    def __init__(self, message: str, device: str, command: Sequence[str], output: str = "",
                 returncode: int | None = None) -> None:
        self.message = message
        self.device = device
        self.command = list(command)
        self.output = output
        self.returncode = returncode
        tail = last_lines(output)
        detail = f"\n  command: {shlex.join(self.command)}"
        if returncode is not None:
            detail += f"\n  exit code: {returncode}"
        if tail:
            detail += "\n  last output:\n    " + tail.replace("\n", "\n    ")
        super().__init__(f"device {device}: {message}{detail}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message, self.device, self.command, self.output,
                             self.returncode))


class TransportInfraError(TransportError):
    """The device, the link or the server failed; worth retrying."""


class TransportCommandError(TransportError):
    """The command itself failed (nonzero exit, bad path, wrong output); never retried."""


class TransportTimeout(TransportError):
    """The call did not finish within its timeout; it was killed."""


class DeviceHealthError(TransportError):
    """The device is reachable but not the one asked for, or not ready."""


@dataclass(frozen=True)
class ShellResult:
    """What a device command returned: its real exit code and output."""

    exit_code: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class DeviceInfo:
    """What :meth:`Transport.health` found."""

    serial: str
    soc: str
    soc_model_prop: str = ""
    board_platform: str = ""
    abi: str = ""  # ro.product.cpu.abi: arm64-v8a on a phone, x86_64 on the HTP simulator


class Transport(Protocol):
    """How one device is reached (see the module docstring for each operation's contract)."""

    @property
    def serial(self) -> str:
        """The device's name as the user gave it (an adb serial, ``local``)."""
        ...

    @property
    def workspace_root(self) -> str:
        """The device folder the sessions' workspaces go under (a phone's ``/data/local/tmp``)."""
        ...

    def describe(self) -> str:
        """One line: the device and how it is reached."""
        ...

    def health(self, expected_soc: str | None = None) -> DeviceInfo:
        """Online, exit codes reported, and (if asked) the expected SoC; else DeviceHealthError."""
        ...

    def push(self, local: Path, remote: str, digest: str) -> bool:
        """``remote`` holds ``local`` (content ``digest``) afterwards; True if it was copied."""
        ...

    def run(self, command: str, timeout_s: float | None = None,
            check: bool = False) -> ShellResult:
        """Run ``command`` once; with ``check``, a nonzero exit is a TransportCommandError."""
        ...

    def pull(self, remote: str, local: Path, expected_size: int | None = None) -> Path:
        """Fetch ``remote`` into ``local``, size-checked (``expected_size`` or the remote's)."""
        ...
