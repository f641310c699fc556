"""A stand-in for ExecuTorch's ``qnn_executor_runner`` (the plumbing both stand-ins share:
:mod:`tests.support.standin_plumbing`).

Contract (examples/qualcomm/executor_runner/qnn_executor_runner.cpp:main, ExecuTorch main
release 1.5.1; identical in release/1.4). Every upstream flag is accepted with its
default (``FLAGS``); a positional argument is refused ("Extra commandline args: ...", exit 1).

* ``--model_path`` missing: abort "FileDataLoader::from() failed: 0x22" (SIGABRT, shell 134);
  ``--method_index`` picks the program's i-th method (past the end: abort "Program has no methods");
  a method that fails to load (a delegate whose init fails returns Internal = 0x1) aborts
  "Loading of method <name> failed with status 0x1";
* if ``--input_list_path`` opens, each line is one inference: raw input files split on single
  spaces (a trailing ``\\r`` dropped), exactly one per method input (else abort "Number of inputs
  (N) mismatch with input files (M)"), each exactly the tensor's byte size (else abort
  "Input(i) size mismatch. file bytes: F, tensor bytes: T") unless both shape files are given;
  the method runs ``--warm_up`` times untimed, then ``--iteration`` times timed (microseconds);
  every output j of line i is written raw as ``<output_folder_path>/output_<i>_<j>.raw`` (the
  folder is not created: upstream's ofstream fails silently when it is missing);
  ``--performance_output_path`` gets the mean, over lines, of the time of the ``--iteration``
  runs of one line, in ms (not divided by ``--iteration``);
* without an input list the inputs are ones, nothing is written but the log;
* ETDump and ``--dump_intermediate_outputs`` files are not written by this stand-in.

Backends: ``$QNN_GENAI_STANDIN_EXECUTOR_BACKEND`` names ``module:function`` called with the
model path, returning an object with ``method_name(index) -> str | None``,
``input_specs(method) -> [(numpy dtype, shape)]`` and ``execute(method, inputs) -> [arrays]``
(optional ``simulated_cost_s(method, 1)``).
``tests.support.standin_backends:executorch_backend`` runs the .pte with ``executorch.runtime``
(the QNN x86 emulator when ``$QNN_SDK_ROOT`` is set).
``$QNN_GENAI_STANDIN_TIME_SCALE`` scales reported times, as in the llama stand-in.
"""
from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from tests.support.standin_plumbing import (
    ABORT_EXIT,
    LIMIT_EXIT,
    Abort,
    Clock,
    Console,
    FlagError,
    exit_like_upstream,
    load_backend,
    parse_gflags,
    time_scale,
    write_launcher,
)

BACKEND_ENV = "QNN_GENAI_STANDIN_EXECUTOR_BACKEND"
HERE = "qnn_executor_runner.cpp"


def uint32(text: str) -> int:
    value = int(text)
    if not 0 <= value < 2**32:
        raise ValueError(text)
    return value


FLAGS: dict[str, tuple[Callable[[str], Any], Any]] = {
    "model_path": (str, "model.pte"), "output_folder_path": (str, "outputs"),
    "input_list_path": (str, "input_list.txt"), "iteration": (int, 1), "warm_up": (int, 0),
    "shared_buffer": (bool, False), "method_index": (uint32, 0),
    "etdump_path": (str, "etdump.etdp"), "dump_intermediate_outputs": (bool, False),
    "debug_output_path": (str, "debug_output.bin"), "input_shape_path": (str, ""),
    "output_shape_path": (str, ""), "debug_buffer_size": (int, 100000000),
    "performance_output_path": (str, "inference_speed.txt"), "log_level": (int, 0),
    "htp_performance_mode": (int, 0), "lpai_fps": (int, 0), "lpai_ftrt_ratio": (int, 0),
    "lpai_client_perf_type": (int, 0), "lpai_affinity": (int, 0),
    "lpai_core_selection": (int, 0), "profile_level": (int, 0), "heap_profiling_path": (str, "")}
RUNTIME_OPTIONS = [("log_level", "log level"), ("htp_performance_mode", "performance mode"),
                   ("profile_level", "profile level"), ("lpai_fps", "LPAI fps"),
                   ("lpai_ftrt_ratio", "LPAI ftrt ratio"), ("lpai_client_perf_type",
                   "LPAI client type"), ("lpai_affinity", "LPAI affinity"),
                   ("lpai_core_selection", "LPAI core selection")]


def _shapes(path: str) -> list[list[int]]:
    return [[int(d) for d in line.split(", ")] for line in Path(path).read_text().splitlines()]


def _run_list(flags: dict[str, Any], backend: Any, method: str, con: Console, clock: Clock,
              ) -> None:
    """The input-list branch of qnn_executor_runner.cpp:main."""
    specs = backend.input_specs(method)
    n = len(specs)
    con.log("I", f"{HERE}:485", f"Number of inputs: {n}")
    in_shapes = out_shapes = []
    if flags["input_shape_path"] and flags["output_shape_path"]:
        in_shapes = _shapes(flags["input_shape_path"])
        out_shapes = _shapes(flags["output_shape_path"])
    lines = Path(flags["input_list_path"]).read_text().split("\n")
    if lines[-1] == "":
        lines.pop()  # std::getline yields no empty last line after a final newline
    cost = getattr(backend, "simulated_cost_s", None)
    elapsed_ms, index = 0.0, 0
    for line in lines:
        files = (line[:-1] if line.endswith("\r") else line).split(" ")
        con.check(len(files) == n, f"{HERE}:539", "main", "input_files.size() == num_inputs",
                  f"Number of inputs ({n}) mismatch with input files ({len(files)})")
        con.check(not in_shapes or len(in_shapes) == n, f"{HERE}:547", "main",
                  "expected_input_shapes.size() == num_inputs",
                  f"Number of inputs ({n}) mismatch with input shapes ({len(in_shapes)})")
        inputs = []
        for i, (name, (dtype, shape)) in enumerate(zip(files, specs)):
            data = Path(name).read_bytes() if os.path.isfile(name) else None
            size = len(data) if data is not None else 2**64 - 1  # tellg() == -1
            nbytes = np.dtype(dtype).itemsize * math.prod(shape)
            con.check(bool(in_shapes) or size == nbytes, f"{HERE}:570", "main",
                      "file_size == tensor_meta->nbytes()",
                      f"Input({i}) size mismatch. file bytes: {size}, tensor bytes: {nbytes}")
            inputs.append(np.frombuffer(data or b"", dtype=dtype).reshape(
                in_shapes[i] if in_shapes else shape))
        con.log("I", f"{HERE}:598", f"Perform {flags['warm_up']} inference for warming up")
        outputs, failed = None, None
        for _ in range(flags["warm_up"]):
            outputs = backend.execute(method, inputs)
        con.log("I", f"{HERE}:604", f"Start inference ({index})")
        start = clock.seconds()
        for _ in range(flags["iteration"]):
            try:
                outputs = backend.execute(method, inputs)
            except Exception as e:  # noqa: BLE001 - upstream only sees a failed status
                failed = e
            clock.extra += cost(method, 1) if cost else 0.0
        took = int((clock.seconds() - start) * 1e6) / 1000.0  # microseconds, as ms
        elapsed_ms += took
        its = flags["iteration"]
        con.log("I", f"{HERE}:617",
                f"{its} inference took {took:f} ms, avg {took / its if its else math.nan:f} ms")
        con.check(failed is None, f"{HERE}:623", "main", "status == Error::Ok",
                  f"Execution of method {method} failed with status 0x1")
        if outputs is None:  # --iteration 0 and no warm-up: run once, untimed (not modelled)
            outputs = backend.execute(method, inputs)
        for j, out in enumerate(outputs):
            raw = np.ascontiguousarray(out).tobytes()
            if out_shapes:
                raw = raw[:np.asarray(out).itemsize * math.prod(out_shapes[j])]
            try:
                Path(flags["output_folder_path"], f"output_{index}_{j}.raw").write_bytes(raw)
            except OSError:
                pass  # std::ofstream on a missing folder: nothing written, no error
        index += 1
    avg = elapsed_ms / index if index else math.nan
    con.log("I", f"{HERE}:661", f"Total {index} inference took {elapsed_ms:f} ms, avg {avg:f} ms")
    try:
        Path(flags["performance_output_path"]).write_text(f"{avg:g}")
    except OSError:
        con.check(False, f"{HERE}:675", "main", "false", "Error saving the inference speed file")


def _run_default(flags: dict[str, Any], backend: Any, method: str, con: Console, clock: Clock,
                 ) -> None:
    """The no-input-list branch: inputs of ones (runner_util/inputs.cpp), timing log only."""
    inputs = [np.ones(shape, dtype=dtype) for dtype, shape in backend.input_specs(method)]
    con.log("I", f"{HERE}:684", "Input list not provided. Inputs prepared with default values set.")
    try:
        backend.execute(method, inputs)
    except Exception:  # noqa: BLE001
        con.check(False, f"{HERE}:690", "main", "status == Error::Ok",
                  f"Execution of method {method} failed with status 0x1")
    con.log("I", f"{HERE}:695", "Model executed successfully.")
    con.log("I", f"{HERE}:698", f"Perform {flags['warm_up']} inferences for warming up")
    for _ in range(flags["warm_up"]):
        backend.execute(method, inputs)
    start = clock.seconds()
    for _ in range(flags["iteration"]):
        backend.execute(method, inputs)
    took = int((clock.seconds() - start) * 1e6) / 1000.0
    its = flags["iteration"]
    con.log("I", f"{HERE}:715",
            f"{its} inferences took {took:f} ms, avg {took / its if its else math.nan:f} ms")


def run(argv: list[str], factory: Callable[[str], Any] | None = None,
        stdout: IO[str] | None = None, stderr: IO[str] | None = None,
        scale: float | None = None) -> int:
    """qnn_executor_runner.cpp:main; the exit code (ABORT_EXIT where upstream calls abort)."""
    con = Console(stdout or sys.stdout, stderr or sys.stderr)
    try:
        flags, explicit, positional = parse_gflags(argv, FLAGS)
    except FlagError as e:
        con.stderr.write(f"{e}\n")
        return 1
    if positional:
        con.log("E", f"{HERE}:219", "Extra commandline args: " + " ".join(positional))
        return 1
    if factory is None:
        if not os.environ.get(BACKEND_ENV):
            con.stderr.write(f"executor_runner_standin: {BACKEND_ENV} is not set\n")
            return LIMIT_EXIT
        factory = load_backend(os.environ[BACKEND_ENV])
    try:
        for name, what in RUNTIME_OPTIONS:
            if name in explicit:
                con.log("I", HERE, f"Setting runtime {what}: {flags[name]}")
        if "heap_profiling_path" in explicit:
            con.log("I", HERE,
                    f"Setting runtime heap_profiling_path: {flags['heap_profiling_path']}")
        model = flags["model_path"]
        con.check(os.path.isfile(model), f"{HERE}:323", "main", "loader.ok()",
                  "FileDataLoader::from() failed: 0x22")
        try:
            backend = factory(model)
        except Exception:  # noqa: BLE001 - Program::load failing
            con.log("E", f"{HERE}:332", f"Failed to parse model file {model}")
            return 1
        con.log("I", f"{HERE}:335", f"Model file {model} is loaded.")
        method = backend.method_name(flags["method_index"])
        con.check(method is not None, f"{HERE}:342", "main", "method_name_result.ok()",
                  "Program has no methods")
        con.log("I", f"{HERE}:345", f"Using method {method}")
        try:
            backend.input_specs(method)  # Program::load_method (delegate init included)
        except Exception:  # noqa: BLE001 - e.g. a context binary the backend cannot create
            con.check(False, f"{HERE}:411", "main", "method.ok()",
                      f"Loading of method {method} failed with status 0x1")
        con.log("I", f"{HERE}:416", "Method loaded.")
        con.log("I", f"{HERE}:479", "Inputs prepared.")
        clock = Clock(time_scale(scale))
        if os.path.isfile(flags["input_list_path"]):
            _run_list(flags, backend, method, con, clock)
        else:
            _run_default(flags, backend, method, con, clock)
    except Abort:
        con.stderr.flush()
        return ABORT_EXIT
    con.flush()
    return 0


def write_executor_launcher(path: Path,
                            backend: str = "tests.support.standin_backends:executorch_backend",
                            env: dict[str, str] | None = None,
                            python: str = sys.executable) -> Path:
    """An executable ``qnn_executor_runner`` stand-in backed by ``backend``."""
    return write_launcher(path, "tests.support.executor_runner_standin",
                          {BACKEND_ENV: backend, **(env or {})}, python)


if __name__ == "__main__":
    exit_like_upstream(run(sys.argv[1:]))
