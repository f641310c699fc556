"""Supported SoCs and the target a test runs on (SoC × backend × device)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset

EMULATOR = "x86-emulator"  # the x86 HTP simulator, driven in this process by the host runner
# the x86 HTP simulator driven by ExecuTorch's own qnn_llama_runner/qnn_executor_runner built for
# x86_64 (what llama.py --enable_x86_64 and upstream's CI run), on this machine
X86_RUNNER = "x86-runner"
BACKENDS = ("htp", "gpu", "lpai")
# Why the gate cannot build an LLM for a backend (measured with executorch 1.5.1); items for such
# a target are skipped at collection with this reason.
UNSUPPORTED_BACKENDS = {
    "gpu": "executorch 1.5.1's QnnQuantizer has no GPU rules (quantizer/annotators/gpu_rules is "
           "missing), so the LLM cannot be quantized for it; llama.py --backend gpu fails too",
    "lpai": "executorch's static LLM flow does not lower to LPAI (llama.py raises "
            "'Unsupported backend lpai')",
}


@dataclass(frozen=True)
class SocSpec:
    """A Snapdragon SoC: its HTP architecture and the name of executorch's ``QcomChipset``."""

    name: str
    htp_arch: str  # "v75"
    marketing: str = ""

    @property
    def chipset(self) -> QcomChipset:  # imported lazily: executorch is slow to import
        from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset

        return getattr(QcomChipset, self.name)

    @property
    def htp_arch_number(self) -> int:
        return int(self.htp_arch.lstrip("v"))


# Every chipset executorch 1.5.1 knows (backends/qualcomm/utils/utils.py), with its HTP arch.
SOCS: dict[str, SocSpec] = {s.name: s for s in (
    SocSpec("SM8350", "v68", "Snapdragon 888"),
    SocSpec("SM8450", "v69", "Snapdragon 8 Gen 1"),
    SocSpec("SM8475", "v69", "Snapdragon 8+ Gen 1"),
    SocSpec("SM8550", "v73", "Snapdragon 8 Gen 2"),
    SocSpec("SM8650", "v75", "Snapdragon 8 Gen 3"),
    SocSpec("SM8750", "v79", "Snapdragon 8 Elite"),
    SocSpec("SM8845", "v81"),
    SocSpec("SM8850", "v81", "Snapdragon 8 Elite Gen 5"),
    SocSpec("SA8255", "v73"),
    SocSpec("SA8295", "v68"),
    SocSpec("SA8797", "v81"),
    SocSpec("SC8380XP", "v73", "Snapdragon X Elite"),
    SocSpec("SSG2115P", "v73"),
    SocSpec("SSG2125P", "v73"),
    SocSpec("SXR1230P", "v73"),
    SocSpec("SXR2230P", "v69"),
    SocSpec("SXR2330P", "v79"),
    SocSpec("SAR2230P", "v81"),
    SocSpec("SW6100", "v81"),
    SocSpec("QCS9100", "v73"),
    SocSpec("QCM6490", "v68"),
)}


class UnknownSocError(ValueError):
    """An SoC name that is not in :data:`SOCS`."""


def soc(name: str) -> SocSpec:
    """Look up an SoC by name (case-insensitive); unknown names list the valid ones."""
    spec = SOCS.get(name.strip().upper())
    if spec is None:
        raise UnknownSocError(f"unknown SoC {name!r}; valid: {', '.join(SOCS)}")
    return spec


@dataclass(frozen=True)
class Target:
    """Where a test runs: an SoC, a QNN backend and a device (adb serial or the emulator)."""

    soc: SocSpec
    backend: str = "htp"
    device: str = EMULATOR

    @property
    def is_emulator(self) -> bool:
        """The simulator in this process (the host runner)."""
        return self.device == EMULATOR

    @property
    def is_x86_runner(self) -> bool:
        """The simulator behind upstream's runners on this machine."""
        return self.device == X86_RUNNER

    @property
    def id(self) -> str:
        """Readable test id, e.g. ``SM8650-htp-emulator``."""
        dev = "emulator" if self.is_emulator else self.device
        return f"{self.soc.name}-{self.backend}-{dev}"


def known_build_target(target: Target) -> Target | None:
    """The target builds for ``target`` are made for, where it is known without asking a device:
    the emulator itself, and the emulator's builds for upstream's x86 runners (the same x86 HTP
    simulator). None for a phone: its builds depend on what it runs (the pipeline asks it)."""
    if target.is_emulator:
        return target
    if target.is_x86_runner:
        return replace(target, device=EMULATOR)
    return None
