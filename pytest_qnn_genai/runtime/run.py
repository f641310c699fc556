"""The run stage: a built .pte on a target → the generation (tokens, text, logits, perf).

On the x86 emulator target the .pte runs in this process through :class:`HybridRunner`; phones
are driven over adb by ``pytest_qnn_genai.devices`` with ExecuTorch's own runners
(``qnn_llama_runner`` for a generation, ``qnn_executor_runner`` for one program). A phone run
never falls back to the host: a phone target without a device session is an error.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.runtime.result import RunResult
from pytest_qnn_genai.runtime.tokenizer import (
    decode_continuation,
    encode,
    load_tokenizer,
    stop_ids,
)
from pytest_qnn_genai.sdk import require_active
from pytest_qnn_genai.targets import Target

if TYPE_CHECKING:
    import torch

    from pytest_qnn_genai.devices.session import DeviceSession


class RunStageError(RuntimeError):
    """The run stage cannot start (no SDK active, tokenizer and program disagree, ...)."""


def run(pte: Path, tokenizer_model: Path, prompt: str, target: Target,
        max_new_tokens: int, *, device: DeviceSession | None = None, tokenizer_bin: Path | None = None,
        pte_digest: str | None = None, logits: bool = False,
        decoder_model_version: str | None = None) -> RunResult:
    """Greedy-generate up to ``max_new_tokens`` tokens after ``prompt`` with ``pte`` on ``target``.

    The emulator path needs the QNN SDK active in this process (``sdk.activate``) and always has
    logits. A phone target needs ``device`` (a
    :class:`~pytest_qnn_genai.devices.session.DeviceSession`) and the llama2.c ``tokenizer_bin``
    the C++ runner reads; ``pte_digest`` names the pushed copy; ``logits`` asks for a second,
    kv-mode run that dumps them (the only way the runner gives logits);
    ``decoder_model_version`` is the runner's ``--decoder_model_version`` (on either target: the
    EOS pieces generation stops at; None is the runner's default, llama2).
    """
    if not target.is_emulator:
        return run_on_device(pte, tokenizer_model, prompt, target, max_new_tokens, device,
                             tokenizer_bin, pte_digest, logits, decoder_model_version)
    require_active("running a .pte on the emulator")
    from pytest_qnn_genai.runtime.host_runner import HybridRunner

    runner = HybridRunner(pte)
    tokenizer = load_tokenizer(tokenizer_model)
    if tokenizer.vocab_size > runner.vocab_size:  # fewer is fine: the runner scores the
        # program's vocabulary (runner.cpp: "runtime vocab_size might be different, use output")
        raise RunStageError(f"tokenizer {Path(tokenizer_model).name} has {tokenizer.vocab_size} "
                            f"pieces but {Path(pte).name} has vocabulary {runner.vocab_size}")
    prompt_ids = encode(tokenizer, prompt)  # BOS and EOS from the tokenizer, as the C++ runner
    result = runner.generate(prompt_ids, max_new_tokens,
                             eos_ids=stop_ids(tokenizer, decoder_model_version))
    body = prompt_ids[1:] if prompt_ids and prompt_ids[0] == tokenizer.bos_id else prompt_ids
    result.text = decode_continuation(tokenizer, body, result.tokens)
    result.device = target.device
    result.extra.update(target=target.id, prompt=prompt)
    return result


def _require_device(target: Target, device: DeviceSession | None) -> None:
    if device is None:  # never a silent fall-back to the host for a phone target
        raise RunStageError(f"{target.id}: a phone run needs a device session "
                            "(pytest_qnn_genai.devices.session.DeviceSession)")


def run_on_device(pte: Path, tokenizer_model: Path, prompt: str, target: Target,
                  max_new_tokens: int, device: DeviceSession | None, tokenizer_bin: Path | None,
                  pte_digest: str | None, logits: bool = False,
                  decoder_model_version: str | None = None) -> RunResult:
    """The phone path: push and run through ``device`` (qnn_llama_runner: hybrid mode for the
    text and perf; with ``logits``, kv mode for the logits and the exact generated ids).

    Without ``logits`` the runner reports text, not ids: ``tokens`` are the text re-tokenized with
    ``tokenizer_model`` and ``logits`` is None; ``extra["tokens_source"]`` says which.
    """
    _require_device(target, device)
    if tokenizer_bin is None or not Path(tokenizer_bin).is_file():
        raise RunStageError(f"{target.id}: the C++ runner needs the llama2.c tokenizer.bin, "
                            f"got {tokenizer_bin}")
    try:  # executorch.runtime before sentencepiece: the reverse order can crash after activate()
        import executorch.runtime  # noqa: F401
    except ImportError:
        pass
    tokenizer = load_tokenizer(tokenizer_model)
    prompt_ids = encode(tokenizer, prompt)
    return device.generate(Path(pte), Path(tokenizer_bin), tokenizer, prompt, prompt_ids,
                           max_new_tokens, target, pte_digest, logits=logits,
                           decoder_model_version=decoder_model_version)


def run_method(pte: Path, inputs: Sequence[torch.Tensor], target: Target, *,
               device: DeviceSession | None = None, pte_digest: str | None = None,
               method: str = "forward") -> list[torch.Tensor]:
    """One inference of a one-method program on ``target``: in this process on the emulator,
    through ``qnn_executor_runner`` on a phone (``device``)."""
    import torch

    if target.is_emulator:
        require_active("running a .pte on the emulator")
        from pytest_qnn_genai.runtime.programs import run_method as run_here

        return list(run_here(Path(pte), inputs, method))
    _require_device(target, device)
    arrays = [t.detach().contiguous().numpy() for t in inputs]
    return [torch.from_numpy(a) for a in device.run_method(Path(pte), arrays, pte_digest, method)]
