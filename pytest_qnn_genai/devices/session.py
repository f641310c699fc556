"""A phone for one pytest session: checked, libraries pushed once, then one runner call per run.

:class:`DeviceSession` owns one :class:`AdbDevice` and its :class:`DeviceWorkspace`;
:class:`DeviceSessions` hands each xdist worker its own phone (held under the per-serial file
lock) and builds its session on first use.
"""
from __future__ import annotations

import getpass
import re
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_qnn_genai.devices.adb import AdbDevice, DeviceInfo
from pytest_qnn_genai.devices.pool import assign_from_env, device_lock
from pytest_qnn_genai.devices.runner_output import parse_runner_files
from pytest_qnn_genai.devices.setup import (
    POOLED_DEVICE,
    DeviceSetupError,
    adb_device,
    find_device_libs,
    libs_root,
)
from pytest_qnn_genai.devices.workspace import DeviceWorkspace
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.runtime.result import RunResult
from pytest_qnn_genai.targets import SocSpec, Target

if TYPE_CHECKING:
    from sentencepiece import SentencePieceProcessor

    from pytest_qnn_genai.plugin.options import Settings

RUN_TIMEOUT_S = 900.0  # one runner invocation
TOKENS_NOTE = "re-tokenized from the runner's text with the case's tokenizer (the runner reports no ids)"


def workspace_id(serial: str) -> str:
    """A stable per-user workspace name, so unchanged libraries stay pushed across sessions."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "user"
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{user}-{serial}")


@dataclass
class DeviceSession:
    """One phone for this session: health-checked, libraries and runner pushed once."""

    device: AdbDevice
    soc: SocSpec
    runner: Path
    libs: list[Path]
    local_dir: Path
    run_timeout_s: float = RUN_TIMEOUT_S
    info: DeviceInfo | None = None
    workspace: DeviceWorkspace | None = None
    runs: int = 0

    @classmethod
    def from_settings(cls, settings: Settings, serial: str, soc: SocSpec, local_dir: Path,
                      **adb_options: Any) -> DeviceSession:
        option, root = libs_root(settings)
        try:
            libs = find_device_libs(root, soc)
        except DeviceSetupError as e:
            raise DeviceSetupError(f"{option}: {e}") from None
        if not settings.runner or not Path(settings.runner).is_file():
            raise DeviceSetupError(f"--runner: {settings.runner!r} is not a file")
        return cls(adb_device(settings, serial, **adb_options), soc,
                   Path(settings.runner).expanduser(), libs, local_dir)

    @property
    def serial(self) -> str:
        return self.device.serial

    def start(self) -> DeviceInfo:
        """Health check (online, shell v2, SoC), workspace, libraries and runner (hash-marked)."""
        if self.info is None:
            info = self.device.health_check(self.soc.name)
            self.workspace = DeviceWorkspace(self.device, workspace_id(self.serial))
            self.workspace.create()
            self.workspace.push_libs(self.libs)
            self.workspace.push_runner(self.runner)
            self.info = info
        return self.info

    def generate(self, pte: Path, tokenizer_bin: Path, tokenizer: SentencePieceProcessor, prompt: str,
                 prompt_ids: list[int], max_new_tokens: int, target: Target,
                 pte_digest: str | None = None) -> RunResult:
        """Run ``pte`` once with qnn_llama_runner (hybrid, greedy) and parse what it left.

        qnn_llama_runner prefills the prompt (first token), then decodes while its position is
        below ``--seq_len``: ``max_new_tokens`` tokens take ``seq_len = prompt + max_new - 1``.
        """
        self.start()
        ws = self.workspace
        remote_pte = ws.push_artifact(pte, pte_digest or file_sha256(Path(pte)))
        remote_tok = ws.push_artifact(tokenizer_bin, file_sha256(Path(tokenizer_bin)))
        self.runs += 1
        out = self.local_dir / f"{self.serial}-run{self.runs}"
        files = ws.run_llama_runner(self.runner, remote_pte, remote_tok, prompt,
                                    len(prompt_ids) + max_new_tokens - 1, self.run_timeout_s, out,
                                    eval_mode=1)
        result = parse_runner_files(files, prompt, device=self.serial, prompt_tokens=prompt_ids)
        result.tokens = retokenize(tokenizer, prompt, result.text)
        result.extra.update(target=target.id, prompt=prompt, tokens_source=TOKENS_NOTE,
                            serial=self.serial, soc=self.info.soc if self.info else "",
                            logits_note="hybrid runs (--eval_mode 1) cannot dump logits")
        return result


def retokenize(tokenizer: SentencePieceProcessor, prompt: str, text: str) -> list[int]:
    """SentencePiece ids of ``text`` as it continues ``prompt`` (ids after the prompt's own)."""
    head = list(tokenizer.encode(prompt))
    full = list(tokenizer.encode(prompt + text))
    if full[:len(head)] == head:
        return full[len(head):]
    return list(tokenizer.encode(text))


class DeviceSessions:
    """This process's phone(s): each xdist worker gets one serial, locked for the session."""

    def __init__(self, settings: Settings, local_dir: Path, lock_dir: Path | None = None,
                 **adb_options: Any) -> None:
        self.settings = settings
        self.local_dir = Path(local_dir)
        self.lock_dir = lock_dir
        self.adb_options = adb_options
        self._sessions: dict[tuple[str, str], DeviceSession] = {}
        self._locks = ExitStack()
        self._locked: set[str] = set()

    def serial_of(self, target: Target) -> str:
        """The serial behind a target (the pooled ``device`` resolves to this worker's phone)."""
        if target.device != POOLED_DEVICE:
            return target.device
        serial = assign_from_env(self.settings.devices)
        if serial is None:
            raise DeviceSetupError("--device: a pooled device target without --device serials")
        return serial

    def session(self, target: Target) -> DeviceSession:
        """The started session for ``target``'s phone (lock taken, libraries pushed)."""
        serial = self.serial_of(target)
        key = (serial, target.soc.name)
        if key not in self._sessions:
            if serial not in self._locked:
                self._locks.enter_context(device_lock(serial, self.lock_dir))
                self._locked.add(serial)
            session = DeviceSession.from_settings(self.settings, serial, target.soc,
                                                  self.local_dir, **self.adb_options)
            session.start()
            self._sessions[key] = session
        return self._sessions[key]

    def close(self) -> None:
        """Release the device locks."""
        self._sessions.clear()
        self._locked.clear()
        self._locks.close()
