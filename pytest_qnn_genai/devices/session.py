"""A phone for one pytest session: checked, libraries pushed once, then one runner call per run.

:func:`validate` turns every setup problem of ``--device`` runs (adb client, runner binary, QNN
libraries, device state, SoC) into one line prefixed by the option to fix, for a
``pytest.UsageError``. :class:`DeviceSession` owns one :class:`AdbDevice` and its
:class:`DeviceWorkspace`; :class:`DeviceSessions` hands each xdist worker its own phone (held
under the per-serial file lock) and builds its session on first use.
"""
from __future__ import annotations

import getpass
import re
import shutil
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from pytest_qnn_genai.devices.adb import (AdbDevice, AdbError, DeviceHealthError, DeviceInfo,
                                          RetryPolicy, split_adb_host)
from pytest_qnn_genai.devices.pool import assign_from_env, device_lock
from pytest_qnn_genai.devices.runner_output import parse_runner_files
from pytest_qnn_genai.devices.workspace import DeviceWorkspace
from pytest_qnn_genai.digest import file_sha256
from pytest_qnn_genai.results import RunResult
from pytest_qnn_genai.targets import SocSpec, Target

# The device of a test id when several phones serve several xdist workers: every worker must
# collect the same ids, so the serial is resolved per worker (pool.assign_device) at run time.
POOLED_DEVICE = "device"
PROBE_TIMEOUT_S = 5.0  # each adb call made at session start (state, features, getprop)
RUN_TIMEOUT_S = 900.0  # one runner invocation
DEVICE_FIXTURES = frozenset({"qnn_run", "qnn_devices"})
TOKENS_NOTE = "re-tokenized from the runner's text with the case's tokenizer (the runner reports no ids)"


class DeviceSetupError(ValueError):
    """A ``--device`` run cannot start; the message is one line naming the option to fix."""


def lib_names(soc: SocSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(required, optional) QNN library file names a phone run of ``soc`` pushes."""
    arch = soc.htp_arch_number
    return (("libQnnHtp.so", f"libQnnHtpV{arch}Stub.so", "libQnnHtpPrepare.so", "libQnnSystem.so",
             f"libQnnHtpV{arch}Skel.so"), ("libqnn_executorch_backend.so",))


def lib_search_dirs(root: Path, soc: SocSpec) -> list[Path]:
    """Where the libraries may sit under ``root``: flat, or a QNN SDK's device-lib layout."""
    return [root, root / "lib" / "aarch64-android", root / "lib" / f"hexagon-{soc.htp_arch}" / "unsigned"]


def find_device_libs(root: Path, soc: SocSpec) -> list[Path]:
    """The library files for ``soc`` under ``root``; DeviceSetupError naming the first missing."""
    required, optional = lib_names(soc)
    dirs = lib_search_dirs(root, soc)
    found: list[Path] = []
    for name in required + optional:
        hit = next((d / name for d in dirs if (d / name).is_file()), None)
        if hit is None and name in required:
            raise DeviceSetupError(
                f"{name} not found in {root} (looked in {', '.join(str(d) for d in dirs)}); "
                f"a {soc.name} phone run needs {', '.join(required)}")
        if hit is not None:
            found.append(hit)
    return found


def libs_root(settings: Any) -> tuple[str, Path]:
    """(option, folder) holding the phone's QNN libraries: --qnn-device-libs, else --qnn-sdk."""
    if settings.qnn_device_libs:
        return "--qnn-device-libs", Path(settings.qnn_device_libs).expanduser()
    if settings.qnn_sdk:
        return "--qnn-sdk", Path(settings.qnn_sdk).expanduser()
    raise DeviceSetupError("--qnn-device-libs: a phone run needs the Android QNN libraries: pass "
                           "--qnn-device-libs DIR or --qnn-sdk pointing at a real QNN SDK")


def adb_device(settings: Any, serial: str, **options: Any) -> AdbDevice:
    """An AdbDevice for ``serial`` with --adb-path and --adb-host applied."""
    host, port = split_adb_host(settings.adb_host)
    return AdbDevice(serial, adb_path=settings.adb_path, host=host, port=port, **options)


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def probe(settings: Any, serial: str, socs: Sequence[SocSpec],
          timeout_s: float = PROBE_TIMEOUT_S) -> DeviceInfo:
    """Ask adb (once, ``timeout_s`` per call, no retries) whether ``serial`` is online and is
    every SoC in ``socs``; DeviceSetupError with what adb said otherwise."""
    device = adb_device(settings, serial, command_timeout_s=timeout_s,
                        retry=RetryPolicy(attempts=1))
    try:
        info = device.health_check(None)
    except DeviceHealthError as e:
        raise DeviceSetupError(f"--device {serial}: {e.message}") from None
    except AdbError as e:
        said = _one_line(e.output) or e.message
        raise DeviceSetupError(f"--device {serial}: not reachable through adb ({e.message}): "
                               f"{said}") from None
    for soc in socs:
        if info.soc != soc.name:
            raise DeviceSetupError(
                f"--soc {soc.name}: device {serial} is {info.soc or 'an unknown SoC'} "
                f"(ro.soc.model={info.soc_model_prop!r}, ro.board.platform="
                f"{info.board_platform!r}); pick a matching --device or fix --soc")
    return info


def validate(settings: Any, workers: int | None = None, probe_devices: bool = True) -> None:
    """Everything a ``--device`` session needs, checked before any test runs.

    ``workers`` is the pytest-xdist worker count (None without xdist).
    """
    serials = list(settings.devices)
    if not serials:
        return
    if workers and workers > len(serials):
        raise DeviceSetupError(
            f"--device: pytest-xdist runs {workers} workers but only {len(serials)} --device "
            f"serial(s) were given ({', '.join(serials)}); each worker needs its own phone: "
            f"use -n {len(serials)} or fewer, or pass more --device serials")
    adb = settings.adb_path
    if not (shutil.which(adb) or (Path(adb).is_file() and "/" in adb)):
        raise DeviceSetupError(f"--adb-path: adb client {adb!r} not found (install adb, e.g. "
                               "apt-get install adb, or pass --adb-path)")
    if probe_devices:
        for serial in serials:
            probe(settings, serial, settings.socs)
    if not settings.runner:
        raise DeviceSetupError("--runner: a phone run needs ExecuTorch's qnn_llama_runner built "
                               "for Android (pass --runner PATH)")
    runner = Path(settings.runner).expanduser()
    if not runner.is_file():
        raise DeviceSetupError(f"--runner: {runner} does not exist")
    option, root = libs_root(settings)
    for soc in settings.socs:
        try:
            find_device_libs(root, soc)
        except DeviceSetupError as e:
            raise DeviceSetupError(f"{option}: {e}") from None


def pooled(settings: Any, workers: int | None) -> bool:
    """True when test ids use :data:`POOLED_DEVICE` (several phones shared by xdist workers)."""
    return len(settings.devices) > 1 and bool(workers)


def device_targets(settings: Any, workers: int | None) -> list[Target]:
    """The session's targets: per serial, or one pooled ``device`` per SoC under xdist."""
    if not settings.devices:
        return settings.targets
    devices = [POOLED_DEVICE] if pooled(settings, workers) else list(settings.devices)
    return [Target(s, settings.backend, d) for s in settings.socs for d in devices]


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
    def from_settings(cls, settings: Any, serial: str, soc: SocSpec, local_dir: Path,
                      **adb_options: Any) -> "DeviceSession":
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

    def generate(self, pte: Path, tokenizer_bin: Path, tokenizer: Any, prompt: str,
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


def retokenize(tokenizer: Any, prompt: str, text: str) -> list[int]:
    """SentencePiece ids of ``text`` as it continues ``prompt`` (ids after the prompt's own)."""
    head = list(tokenizer.encode(prompt))
    full = list(tokenizer.encode(prompt + text))
    if full[:len(head)] == head:
        return full[len(head):]
    return list(tokenizer.encode(text))


class DeviceSessions:
    """This process's phone(s): each xdist worker gets one serial, locked for the session."""

    def __init__(self, settings: Any, local_dir: Path, lock_dir: Path | None = None,
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
