"""Checks a ``--device`` session must pass before any test runs, each failure one line.

:func:`validate` turns every setup problem (adb client, runner binary, QNN libraries, device
state, SoC) into a :class:`DeviceSetupError` whose message starts with the option to fix, for a
``pytest.UsageError``. :func:`device_targets` gives the session's targets: one per ``--device``
entry, or one pooled ``device`` per SoC when several phones serve several xdist workers.

A ``--device`` entry is ``SERIAL`` or ``SERIAL@HOST:PORT`` (a phone behind another adb server,
:mod:`.pool`); everything here takes the entry and :func:`adb_device` resolves its server, so a
device lab's phones are probed, named in messages and test ids by the entry the user typed.
"""
from __future__ import annotations

import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.devices.adb import AdbDevice, RetryPolicy
from pytest_qnn_genai.devices.libraries import LibraryError, device_libraries
from pytest_qnn_genai.devices.library_builds import (
    LibraryBuildError,
    LibraryBuildWarning,
    LibrarySet,
    library_set,
)
from pytest_qnn_genai.devices.pool import device_address, same_phones
from pytest_qnn_genai.devices.transport import DeviceHealthError, DeviceInfo, TransportError
from pytest_qnn_genai.devices.workspace import EXECUTOR_NAME
from pytest_qnn_genai.targets import SocSpec, Target

if TYPE_CHECKING:
    from pytest_qnn_genai.settings import Settings

# The device of a test id when several phones serve several xdist workers: every worker must
# collect the same ids, so the serial is resolved per worker (pool.assign_device) at run time.
POOLED_DEVICE = "device"
PROBE_TIMEOUT_S = 5.0  # each adb call made at session start (state, features, getprop)


class DeviceSetupError(ValueError):
    """A ``--device`` run cannot start; the message is one line naming the option to fix."""


def libs_root(settings: Settings) -> tuple[str, Path]:
    """(option, folder) holding the phone's QNN libraries: --qnn-device-libs, else --qnn-sdk."""
    if settings.qnn_device_libs:
        return "--qnn-device-libs", Path(settings.qnn_device_libs).expanduser()
    if settings.qnn_sdk:
        return "--qnn-sdk", Path(settings.qnn_sdk).expanduser()
    raise DeviceSetupError("--qnn-device-libs: a phone run needs the Android QNN libraries: pass "
                           "--qnn-device-libs DIR or --qnn-sdk pointing at a real QNN SDK")


def adb_device(settings: Settings, entry: str, command_timeout_s: float = 60.0,
               retry: RetryPolicy | None = None) -> AdbDevice:
    """An AdbDevice for the ``--device`` entry (``SERIAL``: --adb-host's server, else the
    client's default; ``SERIAL@HOST:PORT``: that server) with --adb-path applied."""
    address = device_address(entry, settings.adb_host)
    return AdbDevice(address.serial, adb_path=settings.adb_path, host=address.host,
                     port=address.port, command_timeout_s=command_timeout_s,
                     retry=retry or RetryPolicy())


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def probe(settings: Settings, serial: str, socs: Sequence[SocSpec],
          timeout_s: float = PROBE_TIMEOUT_S) -> DeviceInfo:
    """Ask adb (once, ``timeout_s`` per call, no retries) whether ``serial`` is online and is
    every SoC in ``socs``; DeviceSetupError with what adb said otherwise."""
    device = adb_device(settings, serial, command_timeout_s=timeout_s,
                        retry=RetryPolicy(attempts=1))
    try:
        info = device.health(None)
    except DeviceHealthError as e:
        raise DeviceSetupError(f"--device {serial}: {e.message}") from None
    except TransportError as e:
        said = _one_line(e.output) or e.message
        raise DeviceSetupError(f"--device {serial}: not reachable ({device.describe()}: "
                               f"{e.message}): {said}") from None
    for soc in socs:
        if info.soc != soc.name:
            raise DeviceSetupError(
                f"--soc {soc.name}: device {serial} is {info.soc or 'an unknown SoC'} "
                f"(ro.soc.model={info.soc_model_prop!r}, ro.board.platform="
                f"{info.board_platform!r}); pick a matching --device or fix --soc")
    return info


def validate(settings: Settings, workers: int | None = None, probe_devices: bool = True,
             build_qairt: str | None = None) -> None:
    """Everything a ``--device`` session needs, checked before any test runs.

    ``workers`` is the pytest-xdist worker count (None without xdist); ``build_qairt`` the QAIRT
    version of the SDK that builds the context binaries.
    """
    serials = list(settings.devices)
    if not serials:
        return
    if workers and workers > len(serials):
        raise DeviceSetupError(
            f"--device: pytest-xdist runs {workers} workers but only {len(serials)} --device "
            f"serial(s) were given ({', '.join(serials)}); each worker needs its own phone: "
            f"use -n {len(serials)} or fewer, or pass more --device serials")
    for first, again in same_phones(serials, settings.adb_host):
        address = device_address(again, settings.adb_host)
        raise DeviceSetupError(f"--device: {first} and {again} are the same phone (serial "
                               f"{address.serial} on the adb server at {address.server})")
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
    executor = runner.parent / EXECUTOR_NAME
    runners = [runner, executor] if executor.is_file() else [runner]
    for soc in settings.socs:
        try:
            libs = device_libraries(runners, root, soc, option)
        except LibraryError as e:
            raise DeviceSetupError(str(e)) from None
        check_qairt(preflight(libs.qnn, option), build_qairt, option)


def preflight(qnn_libraries: Sequence[Path], option: str) -> LibrarySet:
    """The version-set preflight of the QNN libraries to push (:mod:`.library_builds`): one
    warning line per library whose build cannot be read, :class:`DeviceSetupError` (one line)
    unless they are one QAIRT build."""
    found = library_set(qnn_libraries)
    for line in found.warnings():
        warnings.warn(LibraryBuildWarning(line), stacklevel=2)
    try:
        found.check(option)
    except LibraryBuildError as e:
        raise DeviceSetupError(str(e)) from None
    return found


def check_qairt(found: LibrarySet, build_qairt: str | None, option: str) -> None:
    """The phone's QNN libraries must be at least as new as the QAIRT that builds the context
    binaries (a QNN runtime refuses a newer context binary at load time, deep in a run)."""
    built = tuple(int(p) for p in (build_qairt or "").split(".")[:3] if p.isdigit())
    pushed = found.version
    if len(built) < 3:
        return  # an SDK that names no release: each program's binary is compared when it runs
    if pushed is None:
        warnings.warn(LibraryBuildWarning(
            f"{option}: no QNN library names its QAIRT release; not compared with QAIRT "
            f"{build_qairt} that builds the context binaries"), stacklevel=2)
        return
    if pushed < built:
        found_text = ".".join(map(str, pushed))
        raise DeviceSetupError(
            f"{option}: the phone's QNN libraries are QAIRT {found_text}, older than QAIRT "
            f"{build_qairt} that builds the context binaries; a QNN runtime cannot load a newer "
            f"context binary: push QAIRT >= {build_qairt} libraries")


def pooled(settings: Settings, workers: int | None) -> bool:
    """True when test ids use :data:`POOLED_DEVICE` (several phones shared by xdist workers)."""
    return len(settings.devices) > 1 and bool(workers)


def device_targets(settings: Settings, workers: int | None) -> list[Target]:
    """The session's targets: per serial, or one pooled ``device`` per SoC under xdist."""
    if not settings.devices:
        return settings.targets
    devices = [POOLED_DEVICE] if pooled(settings, workers) else list(settings.devices)
    return [Target(s, settings.backend, d) for s in settings.socs for d in devices]


