"""The work probe: run one program's prompt pass and decode steps with callgrind counting only
inside each execute call (``python -m pytest_qnn_genai.runtime.work_probe``, under valgrind, by
:func:`pytest_qnn_genai.runtime.work.count_work`).

Contract: argv is ``<control .so> <pte> <prompt ids, comma-separated> <decode steps>``; each
execute call is dumped as its own callgrind file tagged ``<phase>:<call>``, the phase named by the
graph that serves it in a hybrid program (``prefill_forward`` for the prompt pass, ``kv_forward``
for the decode steps) whatever the method: a kv-mode program runs both through ``kv_forward``.
The QNN SDK is the parent's (``QNN_SDK_ROOT``). The hazard: torch's own threads spin in OpenMP
and the emulator's worker threads poll; the first is turned off here (one torch thread: the
inputs are made outside the counted calls anyway), the second is left out when the dumps are
read (``work.SYNC``).
"""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.hybrid import PREFILL

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_qnn_genai.runtime.programs import Method
    from pytest_qnn_genai.untyped import Upstream


class _Counted:
    """A loaded method whose ``execute`` is counted (one callgrind dump per call)."""

    def __init__(self, method: Method, control: ctypes.CDLL, calls: dict[str, int]) -> None:
        self.method, self.control, self.calls = method, control, calls
        self.phase = PREFILL

    def execute(self, inputs: Sequence[object]) -> list[Upstream]:
        self.control.work_start()
        out = self.method.execute(inputs)
        n = self.calls[self.phase] = self.calls.get(self.phase, -1) + 1
        self.control.work_stop(f"{self.phase}:{n}".encode())
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
    from pytest_qnn_genai.hybrid import DECODE
    from pytest_qnn_genai.runtime.host_runner import HybridRunner

    runner = HybridRunner(pte)
    calls: dict[str, int] = {}
    counted = {k: _Counted(m, control, calls)
               for k, m in runner._methods.items()}  # noqa: SLF001 - the probe's own seam
    runner._methods.update(counted)  # noqa: SLF001
    gen = runner.start([int(i) for i in ids_text.split(",")], int(steps_text) + 1,
                       stop_at_eos=False)
    while not gen.done:
        for method in counted.values():  # the prompt pass until the first token, then decode
            method.phase = DECODE if gen.tokens else PREFILL
        gen.step()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
