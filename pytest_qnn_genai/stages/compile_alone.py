"""The compile stage in a process of its own: a program's bytes a function of its inputs alone.

Contract. :func:`compile_alone` runs :func:`~pytest_qnn_genai.stages.compile.compile_pte` on a
quantize directory in a fresh interpreter (``multiprocessing``'s spawn: nothing of this process
but its environment, which carries the active QNN SDK, the torch threads and the numeric path) and
returns the artifacts it wrote. An error in the child is raised here as the same exception (a
:class:`~pytest_qnn_genai.stages.qnn_refusal.QnnRefusal` stays one); a child that dies or outlives
``timeout_s`` is killed and is one :class:`CompileProcessError` line; a child whose parent dies is
killed with it.

Why. QNN's lowering keeps state across the programs one process lowers: a second lowering in a
process numbers its tensors on from the first's, and carries bytes of earlier buffers into regions
of the context binary the program does not fill, so the same graphs lowered after other work give
another ``.pte`` (measured: llama3_2_toy's staged program differed from llama.py's in 2,644 bytes
lowered in a long-lived process, and is byte-identical to it lowered alone; the docs' measurements
page, "Parity findings"). llama.py lowers in a process of its own; so does this stage, so the two
flows' bytes can be compared, and an accepted program is found again by its sha256 on any machine.

Hazard. Each compile pays an interpreter's start and executorch's import (seconds), and the child
loads the QDQ graphs itself: the parent must not hold them loaded at 135M size for nothing. Spawn
imports the parent's main script again, so a script that builds guards its body with ``if
__name__ == "__main__":``. The QDQ graphs' bytes still follow the process that quantized them (a
graph quantized after other work can lower to other bytes), which this does not change.
"""
from __future__ import annotations

import multiprocessing
import os
from multiprocessing.connection import Connection
from pathlib import Path

from pytest_qnn_genai.stages.compile import PteArtifacts, compile_pte
from pytest_qnn_genai.stages.quantize import QdqArtifacts
from pytest_qnn_genai.targets import Target

# SmolLM2-135M's compile takes about 25 minutes on two cores (the docs' scaling table): a child
# still lowering after four hours is hung, not slow
COMPILE_TIMEOUT_S = 4 * 3600.0
_REAP_S = 30.0


class CompileProcessError(RuntimeError):
    """The compile process died, outlived its timeout, or raised what cannot cross a pipe."""


def _die_with(parent: int) -> None:
    """Linux's parent-death signal: SIGKILL this process when its parent dies (a killed session
    or prebuild leaves no compile running), and exit now if it is already gone."""
    import ctypes
    import os

    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:
        os._exit(137)


def _child(conn: Connection, parent: int, qdq_dir: str, target: Target, out_dir: str) -> None:
    _die_with(parent)
    error: BaseException | None = None
    try:
        compile_pte(QdqArtifacts.load(Path(qdq_dir)), target, Path(out_dir))
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
        error = e
    try:
        conn.send(error)
    except Exception:  # noqa: BLE001 - an exception that does not pickle: its text does
        conn.send(CompileProcessError(f"{type(error).__name__}: {error}"))
    finally:
        conn.close()


def compile_alone(qdq: QdqArtifacts, target: Target, out_dir: Path,
                  timeout_s: float = COMPILE_TIMEOUT_S) -> PteArtifacts:
    """:func:`compile_pte` of ``qdq`` for ``target`` into ``out_dir``, in a fresh process."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, os.getpid(), str(qdq.out_dir), target,
                                            str(out_dir)),
                       name=f"compile {qdq.out_dir.name}", daemon=True)
    proc.start()
    send.close()  # the child holds the only writer: its death is an EOF here
    error: BaseException | None
    try:
        if not receive.poll(timeout_s):
            error = CompileProcessError(f"compiling {qdq.out_dir} for {target.id} took longer "
                                        f"than {timeout_s:.0f} s: the compile process was killed")
        else:
            error = receive.recv()
    except EOFError:
        proc.join(_REAP_S)
        error = CompileProcessError(f"the compile process for {target.id} died (exit code "
                                    f"{proc.exitcode}) before it said how the compile went")
    finally:
        receive.close()
        proc.join(_REAP_S)
        if proc.is_alive():
            proc.kill()
            proc.join()
    if error is not None:
        raise error
    return PteArtifacts.load(out_dir)
