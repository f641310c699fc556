"""Stage: run a built .pte on a target and return the generation (tokens, text, logits, perf).

On the x86 emulator target the .pte runs in this process through :class:`HybridRunner`; phones
are driven over adb by ``pytest_qnn_genai.devices``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_qnn_genai.results import RunResult
from pytest_qnn_genai.targets import Target


class RunStageError(RuntimeError):
    """The run stage cannot start (no SDK active, tokenizer and program disagree, ...)."""


def _load_tokenizer(path: Path):  # -> sentencepiece.SentencePieceProcessor
    import sentencepiece

    if not Path(path).is_file():
        raise RunStageError(f"tokenizer model {path} does not exist")
    return sentencepiece.SentencePieceProcessor(model_file=str(path))


def encode(tokenizer, prompt: str, bos_id: int | None = None) -> list[int]:
    """``[bos] + SentencePiece ids`` of ``prompt`` (bos from the program when it says so)."""
    bos = tokenizer.bos_id() if bos_id is None else bos_id
    return ([bos] if bos >= 0 else []) + list(tokenizer.encode(prompt))


def decode_continuation(tokenizer, prompt_ids: list[int], generated: list[int]) -> str:
    """Text of ``generated`` as it continues the prompt (keeps the leading space SentencePiece
    drops when a piece starts a text), i.e. the runner's output less the echoed prompt."""
    head = tokenizer.decode(prompt_ids)
    full = tokenizer.decode(prompt_ids + generated)
    return full[len(head):] if full.startswith(head) else tokenizer.decode(generated)


def run(pte: Path, tokenizer_model: Path, prompt: str, target: Target,
        max_new_tokens: int, *, device: Any = None, tokenizer_bin: Path | None = None,
        pte_digest: str | None = None) -> RunResult:
    """Greedy-generate up to ``max_new_tokens`` tokens after ``prompt`` with ``pte`` on ``target``.

    The emulator path needs the QNN SDK active in this process (``sdk.activate``). A phone target
    needs ``device`` (a :class:`~pytest_qnn_genai.devices.session.DeviceSession`) and the
    llama2.c ``tokenizer_bin`` the C++ runner reads; ``pte_digest`` names the pushed copy.
    """
    if not target.is_emulator:
        return run_on_device(pte, tokenizer_model, prompt, target, max_new_tokens, device,
                             tokenizer_bin, pte_digest)
    if not os.environ.get("QNN_SDK_ROOT"):
        raise RunStageError("no QNN SDK active: call pytest_qnn_genai.sdk.activate(resolve_sdk(...)) "
                            "before running a .pte on the emulator")
    from pytest_qnn_genai.runtime.host_runner import HybridRunner

    runner = HybridRunner(pte)
    tokenizer = _load_tokenizer(tokenizer_model)
    if tokenizer.get_piece_size() != runner.vocab_size:
        raise RunStageError(f"tokenizer {Path(tokenizer_model).name} has {tokenizer.get_piece_size()} "
                            f"pieces but {Path(pte).name} has vocabulary {runner.vocab_size}")
    prompt_ids = encode(tokenizer, prompt, runner.bos_id)
    result = runner.generate(prompt_ids, max_new_tokens)
    body = prompt_ids[1:] if prompt_ids and prompt_ids[0] == runner.bos_id else prompt_ids
    result.text = decode_continuation(tokenizer, body, result.tokens)
    result.device = target.device
    result.extra.update(target=target.id, prompt=prompt)
    return result


def run_on_device(pte: Path, tokenizer_model: Path, prompt: str, target: Target,
                  max_new_tokens: int, device: Any, tokenizer_bin: Path | None,
                  pte_digest: str | None) -> RunResult:
    """The phone path: push and run through ``device`` (qnn_llama_runner, hybrid mode).

    The runner reports text, not ids: ``tokens`` are the text re-tokenized with
    ``tokenizer_model`` (``extra["tokens_source"]`` says so); ``logits`` is None (the runner
    dumps logits only in kv mode).
    """
    if device is None:
        raise RunStageError(f"{target.id}: a phone run needs a device session "
                            "(pytest_qnn_genai.devices.session.DeviceSession)")
    if tokenizer_bin is None or not Path(tokenizer_bin).is_file():
        raise RunStageError(f"{target.id}: the C++ runner needs the llama2.c tokenizer.bin, "
                            f"got {tokenizer_bin}")
    try:  # executorch.runtime before sentencepiece: the reverse order can crash after activate()
        import executorch.runtime  # noqa: F401
    except ImportError:
        pass
    tokenizer = _load_tokenizer(tokenizer_model)
    prompt_ids = encode(tokenizer, prompt)
    return device.generate(Path(pte), Path(tokenizer_bin), tokenizer, prompt, prompt_ids,
                           max_new_tokens, target, pte_digest)
