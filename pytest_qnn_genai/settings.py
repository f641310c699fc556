"""The resolved settings of one session, and where the cache lives by default (no pytest here).

:class:`Settings` is what every knob of the plugin resolves to (the knob table that fills it, with
its parsers and precedence, is ``plugin/options.py``). It is frozen and typed, and sits below
every room that reads it, so the device and perf rooms take it (or the values they need) without
importing the plugin. :func:`default_cache_dir` is the one place the cache's default location is
read from the environment (the plugin's default, ``python -m pytest_qnn_genai.cache``, and
``scripts/loopback_phone.py``).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai import targets
from pytest_qnn_genai.targets import SocSpec

if TYPE_CHECKING:
    from pytest_qnn_genai.shards import Shard

CACHE_DIR_ENV = "QNN_GENAI_CACHE_DIR"
ARTIFACTS = "artifacts"  # the artifact cache's folder in the cache folder (beside the QNN SDK's)


def artifacts_dir(cache_dir: Path) -> Path:
    """Where the artifact cache lives in ``cache_dir``."""
    return cache_dir / ARTIFACTS


_FALSE_WORDS = ("", "0", "false", "no", "off")


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``$CI`` says this is a CI run (GitHub, GitLab and most services set ``CI=true``):
    there a golden update is refused unless forced, and a missing tool fails instead of skipping.
    """
    environ = os.environ if environ is None else environ
    return environ.get("CI", "").strip().lower() not in _FALSE_WORDS


def default_cache_dir(environ: Mapping[str, str] | None = None, *, explicit: bool = True) -> Path:
    """``$QNN_GENAI_CACHE_DIR`` (when ``explicit``), else ``$XDG_CACHE_HOME/pytest-qnn-genai``,
    else ``~/.cache/pytest-qnn-genai``. The plugin reads the variable through its knob (so the
    command line beats it) and asks with ``explicit=False`` for the fallback alone."""
    environ = os.environ if environ is None else environ
    if explicit and environ.get(CACHE_DIR_ENV):
        return Path(environ[CACHE_DIR_ENV]).expanduser()
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-qnn-genai"


@dataclass(frozen=True)
class Settings:
    """The resolved knobs of one pytest session (built by ``plugin.options.resolve``)."""

    socs: tuple[SocSpec, ...]
    backend: str
    devices: tuple[str, ...]
    qnn_sdk: str | None
    cache_dir: Path
    cache_max_gb: float | None
    remote_cache: str | None
    rebuild: bool
    models: tuple[str, ...]
    case_dirs: tuple[Path, ...]  # --qnn-cases DIR (repeatable)
    shard: Shard | None  # --qnn-shard K/N
    nightly: bool
    update_golden: bool
    force_update: bool  # --qnn-force-update: an update under CI=true
    golden_dir: Path
    report_dir: Path | None
    compare_to: Path | None
    perf_noise: float
    perf_min_tokens: int
    perf_min_seconds: float
    perf_ratio_floor: float
    perf_accepted_floor: float
    perf_rounds: int
    ab_pairs: tuple[tuple[str, str], ...]
    adb_host: str | None
    adb_path: str
    runner: str | None
    qnn_device_libs: str | None
    executorch_src: Path | None
    prebuild: bool

    @property
    def targets(self) -> list[targets.Target]:
        """Every SoC × device this session runs on: the phones, else the emulator both ways
        (the host runner in this process, and upstream's runners on this machine)."""
        devices = self.devices or (targets.EMULATOR, targets.X86_RUNNER)
        return [targets.Target(s, self.backend, d) for s in self.socs for d in devices]

    @property
    def x86_runner_missing(self) -> str | None:
        """Why upstream's runners cannot run on this machine this session, or None: they need
        a source tree to build them from or a prebuilt x86 ``--runner``."""
        if self.executorch_src is not None or (self.runner and not self.devices):
            return None
        return ("needs ExecuTorch's own runners for x86: pass --executorch-src DIR (an ExecuTorch "
                "source tree to build them from) or --runner PATH (a prebuilt x86 "
                "qnn_llama_runner, qnn_executor_runner beside it)")

    @property
    def artifacts_dir(self) -> Path:
        return artifacts_dir(self.cache_dir)

    @property
    def device_label(self) -> str:
        return ",".join(self.devices) if self.devices else targets.EMULATOR
