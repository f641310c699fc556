"""A per-session working directory on the device: libraries once, artifacts by digest, runs.

Layout under ``/data/local/tmp/pytest-qnn-genai/<session id>/``::

    libQnnHtp.so ...           QNN libraries (LD_LIBRARY_PATH=. and ADSP_LIBRARY_PATH=.)
    .libs.sha256               content hash of the pushed library set
    qnn_llama_runner           the runner binary, .runner.sha256 beside it
    artifacts/<digest>/<name>  .pte and tokenizer files, pushed only if absent
    run/                       outputs of the latest runner invocation
"""
from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from pytest_qnn_genai.devices.adb import AdbCommandError, AdbDevice
from pytest_qnn_genai.devices.runner_output import RunnerFiles
from pytest_qnn_genai.files import file_sha256

DEFAULT_ROOT = "/data/local/tmp/pytest-qnn-genai"
LIBS_MARKER = ".libs.sha256"
RUNNER_MARKER = ".runner.sha256"
RUNNER_NAME = "qnn_llama_runner"
RUN_DIR = "run"
RUN_OUTPUTS = ("outputs.txt", "inference_speed.txt", "logits.bin", "run.log")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class RunnerFailedError(AdbCommandError):
    """The runner ran and exited nonzero; ``output`` holds the tail of its run.log."""


def files_digest(paths: Sequence[Path]) -> str:
    """One hash over a set of files: their names and contents, order-independent."""
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.name):
        digest.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def _check_name(value: str, what: str) -> str:
    if not _SAFE_NAME.match(value):
        raise ValueError(f"{what} {value!r} may only contain letters, digits, '.', '_' and '-'")
    return value


class DeviceWorkspace:
    """The session's directory on one device."""

    def __init__(self, device: AdbDevice, session_id: str, root: str = DEFAULT_ROOT) -> None:
        self.device = device
        self.path = f"{root.rstrip('/')}/{_check_name(session_id, 'session id')}"

    def remote(self, *parts: str) -> str:
        """Absolute remote path inside the workspace."""
        return "/".join([self.path, *parts])

    def create(self) -> None:
        """Make the workspace directory (idempotent)."""
        self.device.shell(f"mkdir -p {shlex.quote(self.path)}", check=True)

    def remove(self) -> None:
        """Delete the workspace and everything in it."""
        self.device.shell(f"rm -rf {shlex.quote(self.path)}", check=True)

    def _read_marker(self, name: str) -> str:
        result = self.device.shell(f"cat {shlex.quote(self.remote(name))} 2>/dev/null")
        return result.stdout.strip() if result.exit_code == 0 else ""

    def _write_marker(self, name: str, value: str) -> None:
        self.device.shell(f"printf %s {value} > {shlex.quote(self.remote(name))}", check=True)

    def _push_set(self, pairs: Sequence[tuple[Path, str]], marker: str) -> bool:
        """Push (local, remote name) pairs unless the marker holds their content hash."""
        locals_ = [local for local, _ in pairs]
        for local in locals_:
            if not local.is_file():
                raise FileNotFoundError(local)
        digest = files_digest(locals_)
        if self._read_marker(marker) == digest:
            return False
        self.create()
        for local, name in pairs:
            self.device.push(local, self.remote(name))
        self._write_marker(marker, digest)  # only after every file arrived
        return True

    def push_libs(self, paths: Sequence[Path | str]) -> bool:
        """Push QNN libraries into the workspace; False when the marker says they are there."""
        files = [Path(p) for p in paths]
        names = [p.name for p in files]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate library names in {names}")
        return self._push_set([(p, _check_name(p.name, "library")) for p in files], LIBS_MARKER)

    def push_runner(self, runner_path: Path | str) -> str:
        """Push the runner binary as ``qnn_llama_runner`` unless unchanged; its remote path."""
        self._push_set([(Path(runner_path), RUNNER_NAME)], RUNNER_MARKER)
        return self.remote(RUNNER_NAME)

    def push_artifact(self, path: Path | str, digest: str) -> str:
        """Push a .pte/tokenizer to ``artifacts/<digest>/`` unless already there; its remote path.

        The file lands under a temporary name and is renamed, so a broken push is never
        mistaken for a present artifact.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(path)
        remote_dir = self.remote("artifacts", _check_name(digest, "digest"))
        remote = f"{remote_dir}/{_check_name(path.name, 'artifact name')}"
        if self.device.shell(f"test -f {shlex.quote(remote)}").exit_code == 0:
            return remote
        self.device.shell(f"mkdir -p {shlex.quote(remote_dir)}", check=True)
        self.device.push(path, remote + ".partial")
        self.device.shell(f"mv {shlex.quote(remote + '.partial')} {shlex.quote(remote)}", check=True)
        return remote

    def runner_command(self, pte: str, tokenizer: str, prompt: str, seq_len: int,
                       eval_mode: int = 1, dump_logits: bool = False,
                       extra_args: Sequence[str] = ()) -> str:
        """The device shell line that runs the runner with outputs in ``run/``."""
        if dump_logits and eval_mode != 0:
            raise ValueError("qnn_llama_runner only dumps logits with --eval_mode 0 (kv); "
                             f"got eval_mode={eval_mode}")
        q = shlex.quote
        flags = [f"--model_path {q(pte)}", f"--tokenizer_path {q(tokenizer)}",
                 f"--prompt {q(prompt)}", f"--seq_len {int(seq_len)}", "--temperature 0",
                 f"--eval_mode {int(eval_mode)}", f"--output_path {RUN_DIR}/outputs.txt",
                 f"--performance_output_path {RUN_DIR}/inference_speed.txt"]
        if dump_logits:
            flags.append(f"--dump_logits_path {RUN_DIR}/logits.bin")
        flags += [q(a) for a in extra_args]
        return (f"cd {q(self.path)} && rm -rf {RUN_DIR} && mkdir {RUN_DIR} && chmod +x {RUNNER_NAME}"
                " && export LD_LIBRARY_PATH=. && export ADSP_LIBRARY_PATH=."
                f" && ./{RUNNER_NAME} {' '.join(flags)} > {RUN_DIR}/run.log 2>&1")

    def run_llama_runner(self, runner_path: Path | str, pte: str, tokenizer: str, prompt: str,
                         seq_len: int, timeout: float, local_dir: Path | str, *,
                         eval_mode: int = 1, dump_logits: bool = False,
                         extra_args: Sequence[str] = ()) -> RunnerFiles:
        """Run the runner once and pull its outputs and run.log into ``local_dir``.

        ``pte``/``tokenizer`` are remote paths from :meth:`push_artifact`; ``runner_path`` is
        local. Raises :class:`RunnerFailedError` (after pulling run.log) on a nonzero exit.
        """
        command = self.runner_command(pte, tokenizer, prompt, seq_len, eval_mode, dump_logits,
                                      extra_args)
        self.push_runner(runner_path)
        result = self.device.shell(command, timeout=timeout)
        files = self.pull_run_outputs(Path(local_dir), result.exit_code)
        if result.exit_code != 0:
            log = files.run_log.read_text(errors="replace") if files.run_log else ""
            raise RunnerFailedError(f"{RUNNER_NAME} exited {result.exit_code}", self.device.serial,
                                    self.device.command(["shell", command]),
                                    log + result.stdout + result.stderr, result.exit_code)
        return files

    def pull_run_outputs(self, local_dir: Path, exit_code: int) -> RunnerFiles:
        """Pull whichever of outputs.txt, inference_speed.txt, logits.bin, run.log exist."""
        local_dir.mkdir(parents=True, exist_ok=True)
        run_dir = self.remote(RUN_DIR)
        listing = self.device.shell(
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
