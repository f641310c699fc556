"""Contract tests for the qnn_executor_runner stand-in: each row pins one upstream ExecuTorch rule.

Citations are file:function in pytorch/executorch at 1.5.1 (the wheel's sources).
The backend is the model-free ``ToyExecutor`` below: no QNN, no executorch, seconds to run.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

from tests.support import executor_runner_standin as ex


class ToyExecutor:
    """Program with methods forward/second; inputs f32[2,3], i32[4]; outputs (a*2, b+1).
    ``broken``: its methods fail to load (as a delegate whose init fails)."""

    methods = ("forward", "second")

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken

    def method_name(self, index: int) -> str | None:
        return self.methods[index] if index < len(self.methods) else None

    def input_specs(self, method: str) -> list:
        if self.broken:
            raise RuntimeError("Init failed for backend QnnBackend: 0x1")
        return [(np.float32, (2, 3)), (np.int32, (4,))]

    def execute(self, method: str, inputs: list) -> list:
        return [inputs[0] * 2, inputs[1] + 1]

    def simulated_cost_s(self, method: str, n: int) -> float:
        return 0.01


def executor(tmp_path: Path, lines: list[str] | None, *args: str, outputs: bool = True,
             broken: bool = False):
    """Run the executor stand-in in-process; list entries are made absolute (the phone's are
    relative to the workspace the runner is started in)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "model.pte").touch()
    for i in range(2):
        np.full((2, 3), i, np.float32).tofile(tmp_path / f"_input_{i}_0.raw")
        np.arange(4, dtype=np.int32).tofile(tmp_path / f"_input_{i}_1.raw")
    if lines is not None:
        absolute = [" ".join(str(tmp_path / name) for name in line.split(" ")) for line in lines]
        (tmp_path / "input_list.txt").write_text("".join(f"{line}\n" for line in absolute))
    if outputs:
        (tmp_path / "outputs").mkdir(exist_ok=True)
    argv = ["--model_path", str(tmp_path / "model.pte"), "--input_list_path",
            str(tmp_path / "input_list.txt"), "--output_folder_path", str(tmp_path / "outputs"),
            "--performance_output_path", str(tmp_path / "inference_speed.txt"), *args]
    err = io.StringIO()
    code = ex.run(argv, lambda path: ToyExecutor(broken), io.StringIO(), err)
    return code, err.getvalue()


SIMPLEADB_LIST = ["_input_0_0.raw _input_0_1.raw", "_input_1_0.raw _input_1_1.raw"]


def test_executor_output_naming_and_perf(tmp_path):
    # export_utils.py:generate_inputs writes the list; qnn_executor_runner.cpp:main writes
    # output_<line>_<output>.raw and the mean ms of one line's --iteration runs
    code, err = executor(tmp_path, SIMPLEADB_LIST, "--iteration", "3")
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "outputs").iterdir())
    assert names == ["output_0_0.raw", "output_0_1.raw", "output_1_0.raw", "output_1_1.raw"]
    assert np.array_equal(np.fromfile(tmp_path / "outputs/output_1_0.raw", np.float32),
                          np.full(6, 2, np.float32))
    assert np.array_equal(np.fromfile(tmp_path / "outputs/output_0_1.raw", np.int32),
                          np.arange(1, 5, dtype=np.int32))
    # one line's 3 runs of 10 simulated ms each (+ the real time they took): 30 ms, not divided
    # by --iteration (10) nor summed over the 2 lines (60)
    assert 30 <= float((tmp_path / "inference_speed.txt").read_text()) < 45
    assert "Total 2 inference took" in err


EXECUTOR_ABORT_ROWS = [  # qnn_executor_runner.cpp:main ET_CHECK_MSGs
    (["_input_0_0.raw"], [], "Number of inputs (2) mismatch with input files (1)"),
    (["_input_0_1.raw _input_0_0.raw"], [],
     "Input(0) size mismatch. file bytes: 16, tensor bytes: 24"),
    (SIMPLEADB_LIST, ["--method_index", "2"], "Program has no methods"),
    (SIMPLEADB_LIST, ["--model_path", "gone.pte"], "FileDataLoader::from() failed: 0x22"),
]


@pytest.mark.parametrize(("lines", "args", "message"), EXECUTOR_ABORT_ROWS)
def test_executor_aborts(tmp_path, lines, args, message):
    code, err = executor(tmp_path, lines, *args)
    assert code == 134 and re.search(re.escape(message) + "$", err, re.M)


def test_executor_method_that_fails_to_load_aborts(tmp_path):
    # qnn_executor_runner.cpp:main: ET_CHECK_MSG(method.ok(), "Loading of method %s failed ...")
    code, err = executor(tmp_path, SIMPLEADB_LIST, broken=True)
    assert code == 134
    assert err.splitlines()[-1].endswith("(method.ok()): Loading of method forward failed with "
                                         "status 0x1")


def test_executor_quiet_cases(tmp_path):
    # a missing output folder: std::ofstream fails silently; still exit 0 with a perf file
    code, _ = executor(tmp_path / "a", SIMPLEADB_LIST, outputs=False)
    assert code == 0 and not (tmp_path / "a/outputs").exists()
    assert (tmp_path / "a/inference_speed.txt").exists()
    # no input list: inputs of ones, no outputs, no perf file
    code, err = executor(tmp_path / "b", None)
    assert code == 0 and "Input list not provided" in err
    assert not list((tmp_path / "b/outputs").iterdir())
    # positional arguments are refused
    code, err = executor(tmp_path / "c", SIMPLEADB_LIST, "stray")
    assert code == 1 and "Extra commandline args: stray" in err


UPSTREAM_EXECUTOR_FLAGS = {  # qnn_executor_runner.cpp DEFINE_*
    "model_path": "model.pte", "output_folder_path": "outputs",
    "input_list_path": "input_list.txt", "iteration": 1, "warm_up": 0, "shared_buffer": False,
    "method_index": 0, "etdump_path": "etdump.etdp", "dump_intermediate_outputs": False,
    "debug_output_path": "debug_output.bin", "input_shape_path": "", "output_shape_path": "",
    "debug_buffer_size": 100000000, "performance_output_path": "inference_speed.txt",
    "log_level": 0, "htp_performance_mode": 0, "lpai_fps": 0, "lpai_ftrt_ratio": 0,
    "lpai_client_perf_type": 0, "lpai_affinity": 0, "lpai_core_selection": 0,
    "profile_level": 0, "heap_profiling_path": ""}


def test_executor_flags_defaults():
    assert {k: d for k, (_, d) in ex.FLAGS.items()} == UPSTREAM_EXECUTOR_FLAGS
    with pytest.raises(ex.FlagError, match="illegal value '-1' specified for uint32 flag"):
        ex.parse_gflags(["--method_index", "-1"], ex.FLAGS)
