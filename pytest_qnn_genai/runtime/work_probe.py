"""The work probe: run one program's prompt pass and decode steps with callgrind counting only
inside each execute call (``python -m pytest_qnn_genai.runtime.work_probe``, under valgrind, by
:func:`pytest_qnn_genai.runtime.work.count_work`).

Contract: argv is ``<control .so> <pte> <prompt ids, comma-separated> <decode steps>``; each
execute call is dumped as its own callgrind file tagged ``<method>:<call>``. The QNN SDK is the
parent's (``QNN_SDK_ROOT``). The hazard: torch's own threads spin in OpenMP and the emulator's
worker threads poll; the first is turned off here (one torch thread: the inputs are made outside
the counted calls anyway), the second is left out when the dumps are read (``work.SYNC``).
"""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_qnn_genai.runtime.programs import Method
    from pytest_qnn_genai.untyped import Upstream


class _Counted:
    """A loaded method whose ``execute`` is counted (one callgrind dump per call)."""

    def __init__(self, name: str, method: Method, control: ctypes.CDLL) -> None:
        self.name, self.method, self.control, self.calls = name, method, control, 0

    def execute(self, inputs: Sequence[object]) -> list[Upstream]:
        self.control.work_start()
        out = self.method.execute(inputs)
        self.control.work_stop(f"{self.name}:{self.calls}".encode())
        self.calls += 1
        return out


def main(argv: list[str]) -> int:
    control_path, pte, ids_text, steps_text = argv
    control = ctypes.CDLL(control_path)
    control.work_stop.argtypes = [ctypes.c_char_p]
    if not control.work_under_valgrind():
        print("work probe: not under valgrind", file=sys.stderr)
        return 2
    from pytest_qnn_genai.sdk.loader import activate, resolve_sdk

    sdk = resolve_sdk(None, Path.home(), provision=False)
    if sdk is None:
        print("work probe: no QNN SDK in QNN_SDK_ROOT", file=sys.stderr)
        return 2
    activate(sdk)
    import torch

    torch.set_num_threads(1)
    from pytest_qnn_genai.runtime.host_runner import HybridRunner

    runner = HybridRunner(pte)
    runner._methods = {k: _Counted(k, m, control)  # noqa: SLF001 - the probe's own seam
                       for k, m in runner._methods.items()}  # noqa: SLF001
    gen = runner.start([int(i) for i in ids_text.split(",")], int(steps_text) + 1,
                       stop_at_eos=False)
    while not gen.done:
        gen.step()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
