"""The emulator's work figure: the host instructions a program's execute calls run, counted by
Valgrind's callgrind, per prompt pass and per decode step.

Contract. :func:`count_work` runs one program's prompt pass and ``steps`` decode steps in a child
Python under ``valgrind --tool=callgrind --instr-atstart=no`` (:mod:`.work_probe`): instructions
are counted only inside each execute call, and only in the emulator's own code (the QNN HTP
library, ``libQnnHtp*``, and the libm it calls), less the functions its worker threads use to
wait for each other (:data:`SYNC`). What is left is a function of the program, its inputs and the
libraries: the same program counts the same instructions on any day, under any load (the
measurements page, "The emulator's work figure": equal in every process, two at once
included). A :class:`ProgramWork` keeps each method's total and its top kernels by instructions,
so a judge can name the kernels whose work grew.

Hazards. The instructions are x86 instructions of QAIRT's emulator, not HTP cycles: a figure
of the emulator's work on the program, equal for equal programs and moving with the ops a
program runs, never a phone's speed. Thread hand-offs are timing (they spin until a partner is
ready), hence :data:`SYNC`; a QAIRT whose waiting functions have other names shows as two counts
of one program that differ (``tests/integration/runtime/test_work.py`` holds the premise), never
as a silent pass. torch's own threads are off in the probe, and the runner's Python around the
call (inputs, cache writes) is not counted: it is the harness's, not the program's.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pytest_qnn_genai.hybrid import DECODE, PREFILL
from pytest_qnn_genai.sdk.context_binary import extract

CONTROL_SOURCE = Path(__file__).with_name("callgrind_control.c")
WORK_FILE = "work.json"
# the emulator's code: QAIRT's HTP library behind the ABI adapter, and the libm it calls
COUNTED_OBJECTS = ("libQnnHtp", "libm.so", "libm-")
# the emulator's worker threads waiting for each other: counts that follow timing, not work
SYNC = ("continue_execution", "nn_sem_", "sync_bkgrnd_workers", "sched_yield")
# ExecuTorch names each QNN node after its op and a count (``aten_mul_tensor_51``; mha2sha's
# per-head copies add ``_h_<i>``, its concats ``_sha_concat``), and the context binary keeps them
_NODE_NAME = re.compile(rb"aten_[a-z0-9_]+")
_NODE_KIND = re.compile(r"^(aten_.*?)(?:_\d.*)?$")
KERNELS_KEPT = 40  # per method: the kernels a judge can name when the work grows
TIMEOUT_S = 3600  # a 135M prompt pass and a few decode steps take minutes under callgrind


class WorkError(RuntimeError):
    """The work could not be counted (no valgrind, the probe failed): one line."""


@dataclass(frozen=True)
class MethodWork:
    """One method's counted calls: their instructions in total, per call, and by kernel, and
    the method's QNN nodes by op kind (what its context binaries name: the op kinds a judge
    can name when the work grows)."""

    calls: list[int]
    kernels: dict[str, int] = field(default_factory=dict)  # top KERNELS_KEPT, by instructions
    nodes: dict[str, int] = field(default_factory=dict)  # op kind -> nodes

    @property
    def total(self) -> int:
        return sum(self.calls)


@dataclass(frozen=True)
class ProgramWork:
    """A program's work on one workload: its prompt pass (``prefill``: every prefill call of
    one pass) and ``decode`` steps, in instructions (module docstring)."""

    prompt_ids: list[int]
    prefill: MethodWork
    decode: MethodWork

    @property
    def figures(self) -> dict[str, int]:
        """Instructions of the prompt pass and of the decode steps together (each step attends
        to one more position, so the steps differ slightly): what the judges compare."""
        return {"prefill_instructions": self.prefill.total,
                "decode_instructions": self.decode.total}

    def method(self, figure: str) -> MethodWork:
        return self.prefill if figure.startswith("prefill") else self.decode

    def save(self, out: Path) -> None:
        (out / WORK_FILE).write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, folder: Path) -> ProgramWork:
        data = json.loads((folder / WORK_FILE).read_text())
        return cls(data["prompt_ids"], MethodWork(**data["prefill"]), MethodWork(**data["decode"]))


def valgrind() -> str:
    """The valgrind command, or one line saying how to install it."""
    found = shutil.which("valgrind")
    if not found:
        raise WorkError("valgrind is not installed: the emulator's work figure counts "
                        "instructions with callgrind (Debian: apt-get install valgrind; "
                        "`make gate` and `make test` install it)")
    return found


@functools.cache
def valgrind_version() -> str:
    """``valgrind --version`` (part of a counted work's key; asked once per process, not at every
    lookup of a kept count)."""
    try:
        proc = subprocess.run([valgrind(), "--version"], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        raise WorkError("valgrind --version timed out") from None
    return proc.stdout.strip()


def _control_library(folder: Path) -> Path:
    """``callgrind_control.c`` built into ``folder`` (needs valgrind's header)."""
    out = folder / "libwork_control.so"
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        raise WorkError("no C compiler to build the callgrind control library (install gcc)")
    cmd = [compiler, "-O2", "-shared", "-fPIC", "-o", str(out), str(CONTROL_SOURCE)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise WorkError(f"building the callgrind control library timed out: {' '.join(cmd)}") \
            from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise WorkError(f"building the callgrind control library failed: {last} (valgrind's "
                        "header comes with Debian's valgrind package)")
    return out


def count_work(pte: Path, prompt_ids: Sequence[int], steps: int,
               timeout_s: float = TIMEOUT_S) -> ProgramWork:
    """``pte``'s work on ``prompt_ids`` and ``steps`` decode steps (module docstring). Needs the
    QNN SDK active in this process (the probe inherits ``QNN_SDK_ROOT``)."""
    if "QNN_SDK_ROOT" not in os.environ:
        raise WorkError("no QNN SDK active: the work probe runs the program on the emulator")
    with tempfile.TemporaryDirectory(prefix="qnn-work-") as tmp:
        folder = Path(tmp)
        control = _control_library(folder)
        cmd = [valgrind(), "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={folder}/callgrind.%p", sys.executable, "-m",
               "pytest_qnn_genai.runtime.work_probe", str(control), str(pte),
               ",".join(str(int(i)) for i in prompt_ids), str(steps)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise WorkError(f"counting {pte.name}'s work timed out after {timeout_s:g} s") from None
        if proc.returncode != 0:
            tail = [ln for ln in proc.stderr.strip().splitlines() if not ln.startswith("==")]
            raise WorkError(f"the work probe failed on {pte.name} (exit {proc.returncode}): "
                            f"{(tail or ['(no output)'])[-1]}")
        calls: dict[str, list[tuple[int, Counter[str]]]] = {PREFILL: [], DECODE: []}
        for dump in sorted(folder.glob("callgrind.*.*"), key=lambda p: int(p.suffix[1:])):
            tag, kernels = read_dump(dump)
            method = tag.partition(":")[0]
            if method in calls:
                calls[method].append((sum(kernels.values()), kernels))
    if not calls[PREFILL] or not calls[DECODE]:
        raise WorkError(f"the work probe counted no {PREFILL if not calls[PREFILL] else DECODE} "
                        f"call of {pte.name}")
    nodes = node_kinds(pte)
    return ProgramWork([int(i) for i in prompt_ids],
                       _method(calls[PREFILL], nodes.get(PREFILL, nodes.get(DECODE, Counter()))),
                       _method(calls[DECODE], nodes.get(DECODE, Counter())))


def _method(calls: list[tuple[int, Counter[str]]], nodes: Counter[str]) -> MethodWork:
    kernels: Counter[str] = Counter()
    for _, per_call in calls:
        kernels.update(per_call)
    return MethodWork([n for n, _ in calls], dict(kernels.most_common(KERNELS_KEPT)),
                      dict(sorted(nodes.items())))


def node_kinds(pte: Path) -> dict[str, Counter[str]]:
    """Per method, the QNN nodes its context binaries name, counted by op kind
    (``aten_mul_tensor``): the compiled program's op inventory, from the names the binary
    carries."""
    out: dict[str, Counter[str]] = {}
    for blob in extract(pte):
        kinds = out.setdefault(blob.method, Counter())
        for name in {n.decode() for n in _NODE_NAME.findall(blob.binary)}:
            m = _NODE_KIND.match(name)
            kinds[m.group(1) if m else name] += 1
    return out


_NAMED = re.compile(r"\((\d+)\)(?: (.*))?")


def _records(path: Path) -> Iterator[str]:
    with path.open() as f:
        for line in f:
            yield line.rstrip("\n")


def read_dump(path: Path) -> tuple[str, Counter[str]]:
    """One callgrind dump: its tag (``<method>:<call>``) and the emulator's own instructions by
    function (self cost; :data:`COUNTED_OBJECTS` less :data:`SYNC`)."""
    names: dict[str, dict[str, str]] = {"ob": {}, "fn": {}}
    tag, obj, fn, after_call = "", "", "", False
    cost: Counter[str] = Counter()

    def name(kind: str, value: str) -> str:
        m = _NAMED.match(value)
        if not m:
            return value
        if m.group(2):
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), value)

    for line in _records(path):
        if line.startswith("desc: Trigger: Client Request: "):
            tag = line.rpartition(": ")[2]
        elif line.startswith(("ob=", "cob=")):
            value = name("ob", line.partition("=")[2])
            if line.startswith("ob="):
                obj = value.rpartition("/")[2]
        elif line.startswith(("fn=", "cfn=")):
            value = name("fn", line.partition("=")[2])
            if line.startswith("fn="):
                fn = value
        elif line.startswith("calls="):
            after_call = True  # the next cost line is the callee's inclusive cost
        elif line[:1].isdigit() or line[:1] in "+-*":
            if after_call:
                after_call = False
                continue
            parts = line.split()
            if (len(parts) > 1 and obj.startswith(COUNTED_OBJECTS)
                    and not any(wait in fn for wait in SYNC)):
                cost[fn] += int(parts[1])
    return tag, cost
