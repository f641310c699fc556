"""Agreement measures between a reference tensor and a tensor under test."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

    from pytest_qnn_genai.runtime.result import RunResult

    Values = np.ndarray | torch.Tensor  # what the measures compare


def _array(x: Values) -> np.ndarray:
    """``x`` as a float64 numpy array of its own shape (a torch tensor detached first)."""
    arr = x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()
    return arr.astype(np.float64)


def _flat(x: Values) -> np.ndarray:
    return _array(x).ravel()


def sqnr_db(reference: Values, test: Values) -> float:
    """Signal-to-quantisation-noise ratio in dB (``inf`` when identical)."""
    ref, out = _flat(reference), _flat(test)
    noise = float(np.sum((ref - out) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def cosine(reference: Values, test: Values) -> float:
    """Cosine similarity of the flattened tensors (1.0 when both are zero)."""
    ref, out = _flat(reference), _flat(test)
    denom = float(np.linalg.norm(ref) * np.linalg.norm(out))
    if denom == 0.0:
        return 1.0 if not ref.any() and not out.any() else 0.0
    return float(np.dot(ref, out) / denom)


def rowwise_cosine(reference: Values, test: Values) -> np.ndarray:
    """Cosine similarity of each row (last axis) of two ``[steps, vocab]`` arrays."""
    ref, out = _array(reference), _array(test)
    ref, out = ref.reshape(ref.shape[0], -1), out.reshape(out.shape[0], -1)
    denom = np.linalg.norm(ref, axis=1) * np.linalg.norm(out, axis=1)
    return np.where(denom == 0, 1.0, np.sum(ref * out, axis=1) / np.where(denom == 0, 1, denom))


def max_abs(reference: Values, test: Values) -> float:
    """Largest absolute elementwise difference."""
    return float(np.max(np.abs(_flat(reference) - _flat(test)))) if _flat(reference).size else 0.0


def accuracy_vs_reference(run: RunResult, reference_logits: Callable[[list[int]], np.ndarray],
                          ) -> dict[str, float]:
    """How much of a reference model a generation keeps: the reference's logits teacher-forced on
    the run's own tokens against the run's logits (``sqnr_db``), and the share of steps where the
    reference's argmax is the token the run chose (``greedy_agreement``)."""
    if run.logits is None or not run.tokens:
        raise ValueError(f"{run.device}: the run has no tokens or no logits to judge")
    prompt, tokens = list(run.prompt_tokens), list(run.tokens)
    want = reference_logits(prompt + tokens[:-1])[len(prompt) - 1:]
    got = np.asarray(run.logits)[:len(want)]
    return {"sqnr_db": round(sqnr_db(want, got), 3),
            "greedy_agreement": round(float(np.mean(np.argmax(want, 1) == np.asarray(tokens))), 4),
            "steps": len(tokens)}
