"""A per-session working directory on a device: libraries once, artifacts by digest, runs.

Layout under ``/data/local/tmp/pytest-qnn-genai/<session id>/`` (or the root the transport
gives)::

    libQnnHtp.so ...           libraries the runners load (LD_LIBRARY_PATH=. and ADSP_LIBRARY_PATH=.)
    qnn_llama_runner           the LLM runner
    qnn_executor_runner        the one-program runner (pushed on first use)
    artifacts/<digest>/<name>  .pte, tokenizer and prompt-id files
    run/                       outputs of the latest runner invocation

Every file is pushed by digest (:meth:`Transport.push`): unchanged files stay where they are
across sessions. Runners start in the workspace, so relative paths on their command lines are
the workspace's. A runner that exits nonzero raises :class:`RunnerFailedError` naming the exit
code and the last lines of its log, whatever their level (an Android build logs to logcat and a
release build logs nothing, so the log may hold only the loader's or the libraries' words); it is
never run again (only the transport's own failures are retried).
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.devices.runner_output import RunnerFiles
from pytest_qnn_genai.devices.transport import last_lines
from pytest_qnn_genai.files import file_sha256

if TYPE_CHECKING:
    from pytest_qnn_genai.devices.transport import Transport

RUNNER_NAME = "qnn_llama_runner"
EXECUTOR_NAME = "qnn_executor_runner"
RUN_DIR = "run"
RUN_OUTPUTS = ("outputs.txt", "inference_speed.txt", "logits.bin", "run.log")
ABORT_EXIT = 134  # std::abort() -> SIGABRT, as the device shell reports it
LOG_TAIL_LINES = 5
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._+-]+$")
_ENV = " && export LD_LIBRARY_PATH=. && export ADSP_LIBRARY_PATH=."


class RunnerFailedError(RuntimeError):
    """A runner ran and exited nonzero (one line, then its log's last lines)."""

    def __init__(self, summary: str, device: str, exit_code: int, log: str) -> None:
        self.summary = summary
        self.device = device
        self.exit_code = exit_code
        self.log = log
        tail = last_lines(log, LOG_TAIL_LINES)
        super().__init__(f"device {device}: {summary}"
                         + ("\n  " + tail.replace("\n", "\n  ") if tail else ""))


def failure_summary(name: str, exit_code: int, log: str) -> str:
    """One line: the runner, its exit code (an abort named) and the log's most telling line:
    the ``F ... assert failed`` line, else the last ``E`` line, else its last line of any kind
    (a loader's "cannot open shared object file", a release build's silence: nothing)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.startswith("F ")]
    errors = [ln for ln in lines if ln.startswith("E ")]
    what = " (abort)" if exit_code == ABORT_EXIT else ""
    said = fatal[-1] if fatal else errors[-1] if errors else lines[-1] if lines else ""
    return f"{name} exited {exit_code}{what}" + (f": {said}" if said else ": its log is empty")


def _check_name(value: str, what: str) -> str:
    if not _SAFE_NAME.match(value):
        raise ValueError(f"{what} {value!r} may only contain letters, digits, '.', '_', '+' and '-'")
    return value


class DeviceWorkspace:
    """The session's directory on one device, reached through a :class:`Transport`."""

    def __init__(self, device: Transport, session_id: str, root: str | None = None) -> None:
        self.device = device
        root = device.workspace_root if root is None else root
        self.path = f"{root.rstrip('/')}/{_check_name(session_id, 'session id')}"

    def remote(self, *parts: str) -> str:
        """Absolute remote path inside the workspace."""
        return "/".join([self.path, *parts])

    def relative(self, remote: str) -> str:
        """``remote`` as a path from the workspace (where runners start)."""
        prefix = self.path + "/"
        if not remote.startswith(prefix):
            raise ValueError(f"{remote} is not inside the workspace {self.path}")
        return remote[len(prefix):]

    def create(self) -> None:
        """Make the workspace directory (idempotent)."""
        self.device.run(f"mkdir -p {shlex.quote(self.path)}", check=True)

    def remove(self) -> None:
        """Delete the workspace and everything in it."""
        self.device.run(f"rm -rf {shlex.quote(self.path)}", check=True)

    def push_libs(self, paths: Sequence[Path | str]) -> bool:
        """Push libraries into the workspace (each by digest); False when all were there."""
        files = [Path(p) for p in paths]
        names = [p.name for p in files]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate library names in {names}")
        pushed = [self.device.push(p, self.remote(_check_name(p.name, "library")),
                                   file_sha256(p)) for p in files]
        return any(pushed)

    def push_runner(self, runner_path: Path | str, name: str = RUNNER_NAME) -> str:
        """Push a runner binary as ``name`` unless unchanged; its remote path."""
        remote = self.remote(_check_name(name, "runner"))
        self.device.push(Path(runner_path), remote, file_sha256(Path(runner_path)))
        return remote

    def push_artifact(self, path: Path | str, digest: str) -> str:
        """Push a .pte/tokenizer to ``artifacts/<digest>/`` unless already there; its remote path."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(path)
        remote = self.remote("artifacts", _check_name(digest, "digest"),
                             _check_name(path.name, "artifact name"))
        self.device.push(path, remote, digest)
        return remote

    def runner_command(self, pte: str, tokenizer: str, prompt: str | None, seq_len: int,
                       eval_mode: int = 1, dump_logits: bool = False,
                       extra_args: Sequence[str] = (), *, tokenized_prompt: str | None = None,
                       shared_buffer: bool = False, decoder_model_version: str | None = None) -> str:
        """The device shell line that runs qnn_llama_runner with outputs in ``run/``: the prompt
        as text (``prompt``) or as a uint64 id file (``tokenized_prompt``), never both;
        ``--decoder_model_version`` when given (its chat template and extra EOS: upstream's device
        evaluator passes llama.py's ``DECODER_MODEL_VERSION[decoder_model]`` on every run)."""
        if dump_logits and eval_mode != 0:
            raise ValueError("qnn_llama_runner only dumps logits with --eval_mode 0 (kv); "
                             f"got eval_mode={eval_mode}")
        if (prompt is None) == (tokenized_prompt is None):
            raise ValueError("give the runner a prompt or a tokenized prompt, exactly one")
        q = shlex.quote
        given = (f"--prompt {q(prompt)}" if prompt is not None
                 else f"--tokenized_prompt {q(str(tokenized_prompt))}")
        flags = [f"--model_path {q(pte)}", f"--tokenizer_path {q(tokenizer)}", given,
                 f"--seq_len {int(seq_len)}", "--temperature 0", f"--eval_mode {int(eval_mode)}",
                 f"--output_path {RUN_DIR}/outputs.txt",
                 f"--performance_output_path {RUN_DIR}/inference_speed.txt"]
        if dump_logits:
            flags.append(f"--dump_logits_path {RUN_DIR}/logits.bin")
        if shared_buffer:
            flags.append("--shared_buffer")
        if decoder_model_version:
            flags.append(f"--decoder_model_version {q(decoder_model_version)}")
        flags += [q(a) for a in extra_args]
        return (f"cd {q(self.path)} && rm -rf {RUN_DIR} && mkdir {RUN_DIR} && chmod +x {RUNNER_NAME}"
                f"{_ENV} && ./{RUNNER_NAME} {' '.join(flags)} > {RUN_DIR}/run.log 2>&1")

    def _run(self, name: str, command: str, timeout: float, local_dir: Path) -> RunnerFiles:
        """Run ``command`` once, pull the run outputs; RunnerFailedError on a nonzero exit."""
        result = self.device.run(command, timeout)
        files = self.pull_run_outputs(local_dir, result.exit_code)
        if result.exit_code != 0:
            log = files.run_log.read_text(errors="replace") if files.run_log else ""
            log += result.stdout + result.stderr
            raise RunnerFailedError(failure_summary(name, result.exit_code, log),
                                    self.device.serial, result.exit_code, log)
        return files

    def run_llama_runner(self, runner_path: Path | str, pte: str, tokenizer: str,
                         prompt: str | None, seq_len: int, timeout: float,
                         local_dir: Path | str, *, eval_mode: int = 1, dump_logits: bool = False,
                         extra_args: Sequence[str] = (), tokenized_prompt: str | None = None,
                         shared_buffer: bool = False,
                         decoder_model_version: str | None = None) -> RunnerFiles:
        """Run the runner once and pull its outputs and run.log into ``local_dir``.

        ``pte``/``tokenizer``/``tokenized_prompt`` are remote paths (absolute, or from the
        workspace); ``runner_path`` is local. Raises :class:`RunnerFailedError` (after pulling
        run.log) on a nonzero exit.
        """
        command = self.runner_command(pte, tokenizer, prompt, seq_len, eval_mode, dump_logits,
                                      extra_args, tokenized_prompt=tokenized_prompt,
                                      shared_buffer=shared_buffer,
                                      decoder_model_version=decoder_model_version)
        self.push_runner(runner_path)
        return self._run(RUNNER_NAME, command, timeout, Path(local_dir))

    def run_executor_runner(self, runner_path: Path | str, pte: str,
                            inputs: Sequence[Sequence[Path]], timeout: float,
                            local_dir: Path | str, *, shared_buffer: bool = False,
                            method_index: int = 0) -> RunnerFiles:
        """qnn_executor_runner once over ``inputs`` (one line of raw files per inference, as
        SimpleADB lays them out: ``run/_input_<i>_<j>.raw`` in ``run/input_list.txt``), outputs
        into ``run/outputs/`` (made here: the runner does not create it). Pulls run.log and
        inference_speed.txt; the caller pulls the outputs it expects (:meth:`pull_output`)."""
        q = shlex.quote
        self.push_runner(runner_path, EXECUTOR_NAME)
        self.device.run(f"cd {q(self.path)} && rm -rf {RUN_DIR} && mkdir -p {RUN_DIR}/outputs",
                        check=True)
        lines = []
        for i, line in enumerate(inputs):
            names = [f"{RUN_DIR}/_input_{i}_{j}.raw" for j in range(len(line))]
            for local, name in zip(line, names):
                self.device.push(local, self.remote(name), file_sha256(local))
            lines.append(" ".join(names))
        listing = Path(local_dir) / "input_list.txt"
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text("".join(f"{line}\n" for line in lines))
        self.device.push(listing, self.remote(RUN_DIR, "input_list.txt"), file_sha256(listing))
        flags = [f"--model_path {q(pte)}", f"--input_list_path {RUN_DIR}/input_list.txt",
                 f"--output_folder_path {RUN_DIR}/outputs",
                 f"--performance_output_path {RUN_DIR}/inference_speed.txt"]
        if shared_buffer:
            flags.append("--shared_buffer")
        if method_index:
            flags.append(f"--method_index {int(method_index)}")
        command = (f"cd {q(self.path)} && chmod +x {EXECUTOR_NAME}{_ENV} && ./{EXECUTOR_NAME} "
                   f"{' '.join(flags)} > {RUN_DIR}/run.log 2>&1")
        return self._run(EXECUTOR_NAME, command, timeout, Path(local_dir))

    def pull_output(self, name: str, local_dir: Path) -> Path | None:
        """``run/outputs/<name>`` into ``local_dir`` (transfer size-checked); None if the runner
        wrote no such file."""
        remote = self.remote(RUN_DIR, "outputs", _check_name(name, "output"))
        if self.device.run(f"test -f {shlex.quote(remote)}").exit_code != 0:
            return None
        return self.device.pull(remote, Path(local_dir) / name)

    def pull_run_outputs(self, local_dir: Path, exit_code: int) -> RunnerFiles:
        """Pull whichever of outputs.txt, inference_speed.txt, logits.bin, run.log exist."""
        local_dir.mkdir(parents=True, exist_ok=True)
        run_dir = self.remote(RUN_DIR)
        listing = self.device.run(
            f"cd {shlex.quote(run_dir)} && for f in {' '.join(RUN_OUTPUTS)}; do "
            '[ -f "$f" ] && stat -c "%n %s" "$f"; done; true', check=True).stdout
        sizes = dict(line.rsplit(" ", 1) for line in listing.splitlines() if line.strip())
        pulled: dict[str, Path | None] = {}
        for name in RUN_OUTPUTS:
            if name in sizes:
                pulled[name] = self.device.pull(f"{run_dir}/{name}", local_dir / name,
                                                expected_size=int(sizes[name]))
            else:
                (local_dir / name).unlink(missing_ok=True)
                pulled[name] = None
        return RunnerFiles(local_dir=local_dir, outputs_txt=pulled["outputs.txt"],
                           inference_speed_txt=pulled["inference_speed.txt"],
                           logits_bin=pulled["logits.bin"], run_log=pulled["run.log"],
                           exit_code=exit_code)
