"""A phone for one pytest session: checked, libraries pushed once, then the runners' calls.

:class:`DeviceSession` owns one :class:`AdbDevice` and its :class:`DeviceWorkspace`; a generation
goes through qnn_llama_runner (:mod:`.llama_runs`, its contract), one program through
qnn_executor_runner (:mod:`.executor_runs`);
:class:`DeviceSessions` hands each xdist worker its own phone (held under the per-serial file
lock) and builds its session on first use.
"""
from __future__ import annotations

import getpass
import re
import warnings
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.devices import executor_runs, llama_runs
from pytest_qnn_genai.devices.libraries import AARCH64, LibraryError, device_libraries
from pytest_qnn_genai.devices.library_builds import (
    Build,
    LibraryBuildError,
    LibraryBuildWarning,
    LibrarySet,
)
from pytest_qnn_genai.devices.local import LocalTransport
from pytest_qnn_genai.devices.pool import assign_from_env, device_address, device_lock, lock_path
from pytest_qnn_genai.devices.setup import (
    POOLED_DEVICE,
    DeviceSetupError,
    adb_device,
    libs_root,
    preflight,
)
from pytest_qnn_genai.devices.transport import DeviceInfo
from pytest_qnn_genai.devices.workspace import EXECUTOR_NAME, DeviceWorkspace
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.runtime.result import RunResult
from pytest_qnn_genai.targets import X86_RUNNER, SocSpec, Target

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np

    from pytest_qnn_genai.devices.transport import Transport
    from pytest_qnn_genai.settings import Settings

RUN_TIMEOUT_S = 900.0  # one runner invocation
# ro.product.cpu.abi of a device that runs x86_64 code: there is no x86 Snapdragon, so its HTP is
# QNN's x86 simulator (the loopback phone; this machine through a local transport)
SIMULATOR_ABIS = ("x86_64",)
ABI_MACHINES = {"arm64-v8a": "aarch64", "x86_64": "x86_64"}  # ro.product.cpu.abi -> ELF machine


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

    device: Transport
    soc: SocSpec
    runner: Path
    libs: list[Path]
    local_dir: Path
    run_timeout_s: float = RUN_TIMEOUT_S
    machine: str = AARCH64  # what the runners and libraries are built for
    info: DeviceInfo | None = None
    workspace: DeviceWorkspace | None = None
    runs: int = 0
    qnn_builds: LibrarySet | None = None  # the pushed QNN libraries' builds (the preflight's)
    qnn_option: str = "--qnn-device-libs"
    programs_checked: set[str] = field(default_factory=set)  # digests of compared programs

    @classmethod
    def for_runner(cls, transport: Transport, soc: SocSpec, runner: Path, qnn_root: Path,
                   local_dir: Path, qnn_option: str = "--qnn-device-libs") -> DeviceSession:
        """A session of ``runner`` (``qnn_executor_runner`` beside it, when there) on the device
        behind ``transport``: every library it needs found first (:mod:`.libraries`)."""
        runner = Path(runner).expanduser()
        if not runner.is_file():
            raise DeviceSetupError(f"--runner: {runner} is not a file")
        executor = runner.parent / EXECUTOR_NAME
        runners = [runner, executor] if executor.is_file() else [runner]
        try:
            libs = device_libraries(runners, qnn_root, soc, qnn_option)
        except LibraryError as e:
            raise DeviceSetupError(str(e)) from None
        return cls(transport, soc, runner, libs.files, local_dir, machine=libs.machine,
                   qnn_builds=preflight(libs.qnn, qnn_option), qnn_option=qnn_option)

    def check_program(self, pte: Path, digest: str) -> None:
        """The program's context binaries against the pushed QNN libraries' build (once per
        program): :class:`DeviceSetupError` when the libraries are older than the QAIRT that
        built it, one warning line when either build cannot be told."""
        if self.qnn_builds is None or digest in self.programs_checked:
            return
        self.programs_checked.add(digest)
        lines = []
        for build in context_builds(pte):
            try:
                lines += self.qnn_builds.check_binary(build, pte.name, self.qnn_option)
            except LibraryBuildError as e:
                raise DeviceSetupError(str(e)) from None
        for line in dict.fromkeys(lines):
            warnings.warn(LibraryBuildWarning(line), stacklevel=2)

    @classmethod
    def from_settings(cls, settings: Settings, serial: str, soc: SocSpec, local_dir: Path,
                      transport: Transport | None = None) -> DeviceSession:
        """The session for ``--device`` entry ``serial`` (reached through ``transport``, by
        default adb as the settings say)."""
        option, root = libs_root(settings)
        if not settings.runner:
            raise DeviceSetupError("--runner: a phone run needs ExecuTorch's qnn_llama_runner")
        return cls.for_runner(transport or adb_device(settings, serial), soc,
                              Path(settings.runner), root, local_dir, option)

    @property
    def serial(self) -> str:
        return self.device.serial

    def start(self) -> DeviceInfo:
        """Health check (online, exit codes, SoC, an ABI that runs the runners), workspace,
        libraries and runners pushed by digest."""
        if self.info is None:
            info = self.device.health(self.soc.name)
            if info.abi and ABI_MACHINES.get(info.abi, info.abi) != self.machine:
                raise DeviceSetupError(
                    f"--runner: {self.runner.name} is built for {self.machine} but "
                    f"{self.device.describe()} runs {info.abi} code (ro.product.cpu.abi)")
            self.workspace = DeviceWorkspace(self.device, workspace_id(self.serial))
            self.workspace.create()
            self.workspace.push_libs(self.libs)
            self.workspace.push_runner(self.runner)
            self.info = info
        return self.info

    @property
    def runs_simulator(self) -> bool:
        """True when the device runs x86_64 code, i.e. QNN's x86 HTP simulator: it loads only
        the emulator's builds (see ``Pipeline.build_target``)."""
        return self.start().abi in SIMULATOR_ABIS

    def generate(self, pte: Path, tokenizer_model: Path, tokenizer_bin: Path | None, prompt: str,
                 max_new_tokens: int, target: Target, pte_digest: str | None = None,
                 logits: bool = False, decoder_model_version: str | None = None,
                 runner_prompt: bool = False, prompt_ids: list[int] | None = None,
                 lookahead: tuple[int, int, int] | None = None) -> RunResult:
        """``max_new_tokens`` greedy tokens after ``prompt`` with qnn_llama_runner: the hybrid
        run, and with ``logits`` a kv-mode run that dumps them (:mod:`.llama_runs`);
        ``lookahead`` = ``(window, ngram, gcap)``: a lookahead run instead. The prompt
        is encoded with ``tokenizer_model`` (BOS from the tokenizer, as the runner); the runner
        reads ``tokenizer_bin`` (llama2.c cases), else ``tokenizer_model``."""
        try:  # executorch.runtime before sentencepiece: the reverse order can crash after activate()
            import executorch.runtime  # noqa: F401
        except ImportError:
            pass
        from pytest_qnn_genai.runtime.chat import runner_prompt_ids
        from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

        runner_tokenizer = Path(tokenizer_bin or tokenizer_model)
        if not runner_tokenizer.is_file():
            raise DeviceSetupError(f"{target.id}: the runner's tokenizer {runner_tokenizer} does "
                                   "not exist")
        tokenizer = load_tokenizer(Path(tokenizer_model))
        self.start()
        self.runs += 1
        pte_digest = pte_digest or file_sha256(Path(pte))
        self.check_program(Path(pte), pte_digest)
        result = llama_runs.generate(
            self.session_workspace, self.runner, Path(pte), pte_digest, runner_tokenizer, tokenizer, prompt,
            prompt_ids if prompt_ids is not None
            else runner_prompt_ids(tokenizer, decoder_model_version, prompt) if runner_prompt
            else encode(tokenizer, prompt), max_new_tokens,
            self.local_dir / f"{self.serial}-run{self.runs}", self.run_timeout_s,
            serial=self.serial, logits=logits, decoder_model_version=decoder_model_version,
            runner_prompt=runner_prompt,
            lookahead=llama_runs.Lookahead(*lookahead) if lookahead is not None else None)
        result.extra.update(target=target.id, prompt=prompt, serial=self.serial,
                            soc=self.info.soc if self.info else "")
        return result

    @property
    def session_workspace(self) -> DeviceWorkspace:
        """The started session's workspace."""
        if self.workspace is None:
            raise DeviceSetupError(f"device {self.serial}: the session has not started")
        return self.workspace

    def run_method(self, pte: Path, inputs: Sequence[np.ndarray], pte_digest: str | None = None,
                   method: str = "forward") -> list[np.ndarray]:
        """One inference of a one-method program through qnn_executor_runner (pushed on first
        use from beside ``--runner``, where upstream's build leaves neither: copy it there)."""
        executor = self.runner.parent / EXECUTOR_NAME
        if not executor.is_file():
            raise DeviceSetupError(f"--runner: {EXECUTOR_NAME} not found next to {self.runner} "
                                   "(running a single program on the phone needs it there)")
        self.start()
        self.runs += 1
        pte_digest = pte_digest or file_sha256(Path(pte))
        self.check_program(Path(pte), pte_digest)
        return executor_runs.run_method(
            self.session_workspace, executor, Path(pte), pte_digest, inputs,
            self.local_dir / f"{self.serial}-run{self.runs}", self.run_timeout_s, method)


def context_builds(pte: Path) -> list[Build | str]:
    """The QAIRT build of each distinct context binary of ``pte``, as QNN's system library
    reports it (:mod:`pytest_qnn_genai.sdk.context_binary`), or why it cannot be read."""
    from pytest_qnn_genai.sdk.context_binary import describe_pte

    try:
        ids = dict.fromkeys(info.build_id for info in describe_pte(Path(pte)))
    except Exception as e:  # noqa: BLE001 - a program not read is a warning naming it, not a crash
        text = str(e).strip()
        return [f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__]
    return [Build.parse(text) or f"unrecognised build id {text!r}" for text in ids]


class DeviceSessions:
    """This process's phone(s): each xdist worker gets one serial, locked for the session."""

    def __init__(self, settings: Settings, local_dir: Path, lock_dir: Path | None = None,
                 connect: Callable[[str], Transport] | None = None,
                 x86: Callable[[], tuple[Path, Path]] | None = None) -> None:
        self.settings = settings
        self.local_dir = Path(local_dir)
        self.lock_dir = lock_dir
        self.connect = connect  # --device entry -> its transport (default: adb, as set up)
        self.x86 = x86  # () -> (upstream's x86 qnn_llama_runner, the x86 QNN libraries' root)
        self._sessions: dict[tuple[str, str], DeviceSession] = {}
        self._locks = ExitStack()
        self._locked: set[str] = set()

    def serial_of(self, target: Target) -> str:
        """The ``--device`` entry behind a target (``SERIAL`` or ``SERIAL@HOST:PORT``; the pooled
        ``device`` resolves to this worker's phone)."""
        if target.device != POOLED_DEVICE:
            return target.device
        serial = assign_from_env(self.settings.devices)
        if serial is None:
            raise DeviceSetupError("--device: a pooled device target without --device serials")
        return serial

    def serves(self, target: Target) -> bool:
        """True if ``target``'s device is one of this session's phones, or upstream's runners
        on this machine."""
        return (target.device == POOLED_DEVICE or target.device in self.settings.devices
                or target.is_x86_runner)

    def _x86_session(self, target: Target) -> DeviceSession:
        """Upstream's x86 runners on this machine (:class:`LocalTransport`), with the x86 QNN
        libraries of the session's SDK."""
        if self.x86 is None:
            raise DeviceSetupError(f"{target.id}: this session has no x86 runners")
        runner, qnn_root = self.x86()
        folder = self.local_dir / f"{X86_RUNNER}-{target.soc.name}"
        return DeviceSession.for_runner(LocalTransport(folder / "device"), target.soc, runner,
                                        qnn_root, folder, qnn_option="--qnn-sdk")

    def session(self, target: Target) -> DeviceSession:
        """The started session for ``target``'s phone (its lock taken, libraries pushed). The
        lock is the phone's (serial and adb server), so two lab hosts' ``emulator-5554`` are
        two phones; so are their local run folders."""
        if target.is_x86_runner:
            key = (X86_RUNNER, target.soc.name)
            if key not in self._sessions:
                self._sessions[key] = self._x86_session(target)
                self._sessions[key].start()
            return self._sessions[key]
        entry = self.serial_of(target)
        phone = device_address(entry, self.settings.adb_host).key
        key = (phone, target.soc.name)
        if key not in self._sessions:
            if phone not in self._locked:
                self._locks.enter_context(device_lock(phone, self.lock_dir))
                self._locked.add(phone)
            local = self.local_dir if phone == entry else self.local_dir / lock_path(phone).stem
            transport = self.connect(entry) if self.connect else None
            session = DeviceSession.from_settings(self.settings, entry, target.soc, local,
                                                  transport)
            session.start()
            self._sessions[key] = session
        return self._sessions[key]

    def close(self) -> None:
        """Release the device locks."""
        self._sessions.clear()
        self._locked.clear()
        self._locks.close()
