"""This machine as a device: a :class:`~pytest_qnn_genai.devices.transport.Transport` whose
"remote" paths are a folder here and whose shell is this machine's.

What upstream's CI and llama.py's ``--enable_x86_64`` do: ExecuTorch's own runners, built for
x86_64, run a ``.pte`` on QNN's x86 HTP simulator. Driving them through a transport (not straight
from a fixture) gives the emulator the phone's whole path: the same workspace, pushes by digest,
the same runner command lines and contracts (:mod:`.llama_runs`, :mod:`.executor_runs`), and
libraries found by the runner's own ``$ORIGIN`` and ``LD_LIBRARY_PATH=.``.

- ``push``: a hard link (a copy across file systems) into the folder, under a temporary name
  renamed into place, then a sidecar ``.<name>.sha256``; skipped when the sidecar holds the digest.
- ``run``: ``bash -c`` in a new process group, killed as a group on timeout
  (:class:`TransportTimeout`); its real exit code and output.
- ``pull``: a copy, its size checked.
- ``health``: this machine is whatever SoC is asked for (the simulator is given the SoC by the
  program's context binary); its ABI is the machine's (``x86_64``).
- ``workspace_root``: the sessions' workspaces live under ``root``, not in the phone's
  ``/data/local/tmp``: on one machine that folder is every process's, and each runner call
  empties the workspace's ``run/`` first (measured: another pytest session's x86-runner calls
  made this one's runner read a half-written run folder, "exited 0 but generated nothing").
"""
from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
from pathlib import Path

from pytest_qnn_genai.devices.transport import (
    DeviceInfo,
    ShellResult,
    TransportCommandError,
    TransportTimeout,
)

LOCAL_DEVICE = "local"  # the device name in messages
COMMAND_TIMEOUT_S = 60.0
_ABIS = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64-v8a", "arm64": "arm64-v8a"}


class LocalTransport:
    """Commands and files on this machine, under ``root`` (see the module docstring)."""

    def __init__(self, root: Path, name: str = LOCAL_DEVICE,
                 command_timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        self.root = Path(root)
        self._name = name
        self.command_timeout_s = command_timeout_s

    @property
    def serial(self) -> str:
        return self._name

    @property
    def workspace_root(self) -> str:
        """Where :class:`~pytest_qnn_genai.devices.workspace.DeviceWorkspace` folders go: this
        transport's own folder (see the module docstring)."""
        return str(self.root.resolve() / "data-local-tmp")

    def describe(self) -> str:
        return f"this machine ({platform.machine()}, QNN's x86 HTP simulator) in {self.root}"

    def health(self, expected_soc: str | None = None) -> DeviceInfo:
        self.root.mkdir(parents=True, exist_ok=True)
        abi = _ABIS.get(platform.machine().lower(), platform.machine())
        soc = (expected_soc or "").upper()
        return DeviceInfo(self._name, soc, soc, "", abi)

    def _local(self, remote: str) -> Path:
        path = Path(remote)
        if not path.is_absolute():
            raise ValueError(f"{remote}: the local transport takes absolute paths")
        return path

    def push(self, local: Path, remote: str, digest: str) -> bool:
        target = self._local(remote)
        sidecar = target.with_name(f".{target.name}.sha256")
        if target.is_file() and sidecar.is_file() and sidecar.read_text().strip() == digest:
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        sidecar.unlink(missing_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.unlink(missing_ok=True)
        try:
            os.link(local, partial)
        except OSError:  # another file system, or links not allowed
            shutil.copy2(local, partial)
        os.replace(partial, target)
        sidecar.write_text(digest)
        return True

    def run(self, command: str, timeout_s: float | None = None,
            check: bool = False) -> ShellResult:
        timeout = timeout_s or self.command_timeout_s
        self.root.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(["bash", "-c", command], cwd=self.root, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True,
                                errors="replace")
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise TransportTimeout(f"timed out after {timeout:g} s", self._name,
                                   ["bash", "-c", command], out + err) from None
        result = ShellResult(proc.returncode, out, err)
        if check and result.exit_code != 0:
            raise TransportCommandError(f"shell command exited {result.exit_code}", self._name,
                                        ["bash", "-c", command], out + err, result.exit_code)
        return result

    def pull(self, remote: str, local: Path, expected_size: int | None = None) -> Path:
        source = self._local(remote)
        if not source.is_file():
            raise TransportCommandError(f"no file {remote}", self._name, ["cp", remote, str(local)])
        shutil.copyfile(source, local)
        size = Path(local).stat().st_size
        if expected_size is not None and size != expected_size:
            raise TransportCommandError(f"pulled {size} of {expected_size} bytes of {remote}",
                                        self._name, ["cp", remote, str(local)])
        return Path(local)
