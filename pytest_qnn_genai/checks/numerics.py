"""Agreement measures between a reference tensor and a tensor under test."""
from __future__ import annotations

import math

import numpy as np


def _flat(x: object) -> np.ndarray:
    arr = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    return arr.astype(np.float64).ravel()


def sqnr_db(reference: object, test: object) -> float:
    """Signal-to-quantisation-noise ratio in dB (``inf`` when identical)."""
    ref, out = _flat(reference), _flat(test)
    noise = float(np.sum((ref - out) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def cosine(reference: object, test: object) -> float:
    """Cosine similarity of the flattened tensors (1.0 when both are zero)."""
    ref, out = _flat(reference), _flat(test)
    denom = float(np.linalg.norm(ref) * np.linalg.norm(out))
    if denom == 0.0:
        return 1.0 if not ref.any() and not out.any() else 0.0
    return float(np.dot(ref, out) / denom)


def rowwise_cosine(reference: object, test: object) -> np.ndarray:
    """Cosine similarity of each row (last axis) of two ``[steps, vocab]`` arrays."""
    ref = np.asarray(_flat(reference)).reshape(np.shape(reference)[0], -1)
    out = np.asarray(_flat(test)).reshape(np.shape(test)[0], -1)
    denom = np.linalg.norm(ref, axis=1) * np.linalg.norm(out, axis=1)
    return np.where(denom == 0, 1.0, np.sum(ref * out, axis=1) / np.where(denom == 0, 1, denom))


def max_abs(reference: object, test: object) -> float:
    """Largest absolute elementwise difference."""
    return float(np.max(np.abs(_flat(reference) - _flat(test)))) if _flat(reference).size else 0.0
