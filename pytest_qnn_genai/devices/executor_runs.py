"""One program through ``qnn_executor_runner`` on a phone (the smoke block), as SimpleADB runs it.

Contract (examples/qualcomm/executor_runner/qnn_executor_runner.cpp ``main`` at ExecuTorch
1.5.1; SimpleADB in backends/qualcomm/export_utils.py), checked here so that a runner
breaking it fails the run:

* the runner runs the program's ``--method_index``-th method (``Program::get_method_name``: the
  order the program stores its execution plans in, read back here), 0 by default;
* each input-list line is one inference: raw files split on single spaces, one per method input
  in order, each exactly the tensor's byte size (the runner aborts otherwise): checked here
  first, by dtype and shape against the program's own metadata;
* line ``i``'s output ``j`` is written raw to ``<output folder>/output_<i>_<j>.raw``; the runner
  does not create the folder (its ``ofstream`` fails silently: exit 0, nothing written), so the
  workspace makes it, and a missing or wrong-sized output is a
  :class:`~pytest_qnn_genai.devices.llama_runs.RunnerContractError`;
* ``--shared_buffer`` is passed exactly when the program was compiled with it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai.devices.llama_runs import RunnerContractError, RunnerRequestError

if TYPE_CHECKING:
    from pytest_qnn_genai.devices.workspace import DeviceWorkspace
    from pytest_qnn_genai.runtime.pte_info import TensorMeta


def _numpy(meta: TensorMeta, where: str) -> np.dtype:
    try:
        return np.dtype(meta.dtype)
    except TypeError:
        raise RunnerRequestError(f"{where}: dtype {meta.dtype} has no raw numpy form") from None


def run_method(ws: DeviceWorkspace, runner: Path, pte: Path, pte_digest: str,
               inputs: Sequence[np.ndarray], local_dir: Path, timeout_s: float,
               method: str = "forward") -> list[np.ndarray]:
    """``method``'s outputs for one inference of ``inputs`` on the phone."""
    from pytest_qnn_genai.runtime.pte_info import compile_options, inspect_pte

    info = inspect_pte(pte)
    if method not in info.plan_order:
        raise RunnerRequestError(f"{Path(pte).name} has no method {method!r} (it has "
                                 f"{', '.join(info.plan_order)})")
    meta = info.methods[method]
    if len(inputs) != len(meta.inputs):
        raise RunnerRequestError(f"{method} takes {len(meta.inputs)} inputs, {len(inputs)} given")
    local_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for j, (array, want) in enumerate(zip(inputs, meta.inputs)):
        dtype = _numpy(want, f"{method} input {j}")
        if np.asarray(array).dtype != dtype or tuple(np.shape(array)) != want.shape:
            raise RunnerRequestError(f"{method} input {j} is {want.dtype}{list(want.shape)}, got "
                                     f"{np.asarray(array).dtype}{list(np.shape(array))}")
        files.append(local_dir / f"_input_0_{j}.raw")
        files[-1].write_bytes(np.ascontiguousarray(array).tobytes())
    remote_pte = ws.push_artifact(pte, pte_digest)
    ws.run_executor_runner(runner, remote_pte, [files], timeout_s, local_dir,
                           shared_buffer=bool(compile_options(pte)["shared_buffer"]),
                           method_index=info.plan_order.index(method))
    outputs = []
    for j, out in enumerate(meta.outputs):
        dtype, name = _numpy(out, f"{method} output {j}"), f"output_0_{j}.raw"
        pulled = ws.pull_output(name, local_dir)
        if pulled is None:
            raise RunnerContractError(f"qnn_executor_runner exited 0 but wrote no {name}")
        size, nbytes = pulled.stat().st_size, dtype.itemsize * math.prod(out.shape)
        if size != nbytes:
            raise RunnerContractError(f"{name} holds {size} bytes; {method} output {j} "
                                      f"{out.dtype}{list(out.shape)} is {nbytes}")
        outputs.append(np.fromfile(pulled, dtype=dtype).reshape(out.shape))
    return outputs
