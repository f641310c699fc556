"""The CPU references a target is judged against: the fp32 model's greedy continuation and the QDQ
graph's logits teacher-forced on a token sequence.

Both run the calibration-shaped graph (AR = ``max_context_len``, empty KV cache, one causal pass),
eager fp32 or QDQ, and are saved as a :class:`Reference` (tokens + one logits row per token).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

    from pytest_qnn_genai.stages.prepare import PreparedModel

REFERENCE_JSON = "reference.json"
LOGITS_NPY = "logits.npy"


@dataclass(frozen=True)
class Reference:
    """A teacher-forced or greedy token sequence with the logits that produced each token."""

    prompt_tokens: list[int]
    tokens: list[int]
    logits: np.ndarray  # float32 [len(tokens), vocab]: row i predicted tokens[i]

    def save(self, out: Path) -> None:
        (out / REFERENCE_JSON).write_text(json.dumps(
            {"prompt_tokens": self.prompt_tokens, "tokens": self.tokens}))
        np.save(out / LOGITS_NPY, self.logits.astype(np.float32))

    @classmethod
    def load(cls, folder: Path) -> Reference:
        data = json.loads((folder / REFERENCE_JSON).read_text())
        return cls(data["prompt_tokens"], data["tokens"], np.load(folder / LOGITS_NPY))


def greedy(logits_of: Callable[[list[int]], np.ndarray], prompt: list[int], n: int,
           eos: int | None) -> Reference:
    """Up to ``n`` argmax tokens after ``prompt``, with their logits, stopping after an ``eos``
    from a decode step: as the runners do (upstream's and the host runner), an EOS as the first
    token (prefill's) is no stop, else a model that answers a raw prompt with its end-of-turn
    token (SmolLM2-135M-Instruct) would leave one row to judge the QDQ graph on."""
    tokens: list[int] = []
    rows: list[np.ndarray] = []
    for _ in range(n):
        row = logits_of(prompt + tokens)[-1]
        rows.append(row)
        tokens.append(int(np.argmax(row)))
        if eos is not None and len(tokens) > 1 and tokens[-1] == eos:
            break
    return Reference(prompt, tokens, np.stack(rows).astype(np.float32))


def fp32_reference(prepared: PreparedModel, prompt_tokens: list[int], n: int) -> Reference:
    """The fp32 model's greedy continuation of ``prompt_tokens`` (``n`` tokens or to EOS)."""
    return greedy(prepared.reference_logits, list(prompt_tokens), n,
                  prepared.metadata.get("get_eos_id"))


def teacher_forced(graph: torch.nn.Module, prepared: PreparedModel, prompt_tokens: list[int],
                   tokens: list[int]) -> Reference:
    """``graph``'s logits for each of ``tokens`` after ``prompt_tokens``, fed the true tokens."""
    from pytest_qnn_genai.stages.prepare import run_calibration_graph

    seq = list(prompt_tokens) + list(tokens[:-1])
    rows = run_calibration_graph(graph, prepared, seq)[len(prompt_tokens) - 1:]
    return Reference(list(prompt_tokens), list(tokens), rows)
