"""The run stage on this machine: a built .pte → the generation (tokens, text, logits, perf).

On the x86 emulator target the .pte runs in this process through :class:`HybridRunner`. Phones
(and upstream's runners on this machine) are driven by :mod:`pytest_qnn_genai.devices` with
ExecuTorch's own runners; the pipeline picks the path by target, and a phone target never falls
back to the host.
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
    import numpy as np
    import torch


class RunStageError(RuntimeError):
    """The run stage cannot start (no SDK active, tokenizer and program disagree, ...)."""


def run(pte: Path, tokenizer_model: Path, prompt: str, target: Target,
        max_new_tokens: int, *, decoder_model_version: str | None = None) -> RunResult:
    """Greedy-generate up to ``max_new_tokens`` tokens after ``prompt`` with ``pte`` in this
    process (the emulator target), with logits.

    Needs the QNN SDK active in this process (``sdk.activate``). ``decoder_model_version`` is the
    runner's ``--decoder_model_version``: the EOS pieces generation stops at (None is the runner's
    default, llama2).
    """
    if not target.is_emulator:
        raise RunStageError(f"{target.id}: not the emulator target; a phone run goes through "
                            "its device session")
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


def prompt_logits(pte: Path, target: Target, ids: Sequence[int]) -> np.ndarray:
    """Logits of every position of ``ids`` fed to ``pte`` as one prompt in this process (the
    emulator target; :meth:`HybridRunner.prompt_logits`): row i predicts ``ids[i + 1]``."""
    if not target.is_emulator:
        raise RunStageError(f"{target.id}: not the emulator target; a phone scores a text "
                            "through its device session")
    require_active("running a .pte on the emulator")
    from pytest_qnn_genai.runtime.host_runner import HybridRunner

    return HybridRunner(pte).prompt_logits(ids)


def run_method(pte: Path, inputs: Sequence[torch.Tensor], method: str = "forward",
               ) -> list[torch.Tensor]:
    """One inference of a one-method program in this process (the emulator)."""
    require_active("running a .pte on the emulator")
    from pytest_qnn_genai.runtime.programs import run_method as run_here

    return list(run_here(Path(pte), inputs, method))
