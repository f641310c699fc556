"""Fixtures the suites share: the held-out split and its fp32 and QDQ logits, per model case.

Perplexity (``checks/perplexity.py``) is measured on the held-out stories
(``models/heldout.py``), encoded as the runner encodes a text, in rolling windows no longer than
the program's prompt processor takes (``max_context_len - prefill_ar_len``), so one window is one
prompt pass on the target. fp32 and QDQ logits are cache entries (a warm run computes nothing);
the target's are the test.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_qnn_genai.checks import perplexity
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.pipeline.products import Wants, needs


@pytest.fixture(scope="session")
def heldout_documents(qnn_case) -> list[perplexity.Document]:
    """The held-out stories as ``qnn_case``'s runner encodes them, in windows."""
    return perplexity.heldout_documents(qnn_case)


@pytest.fixture(scope="session")
@needs(Wants(products.FP32_LOGITS, products.HELDOUT))
def heldout_fp32(qnn_pipeline, qnn_case, heldout_documents) -> list[np.ndarray]:
    """fp32 logits of every window (cached; built ahead)."""
    return [qnn_pipeline.fp32_logits(qnn_case, list(w.context), list(w.continuation))
            for w in perplexity.all_windows(heldout_documents)]


@pytest.fixture(scope="session")
@needs(Wants(products.QDQ_LOGITS, products.HELDOUT))
def heldout_qdq(qnn_pipeline, qnn_case, qnn_target, heldout_documents) -> list[np.ndarray]:
    """QDQ logits of every window, on the CPU (cached; built ahead)."""
    return [qnn_pipeline.qdq_logits(qnn_case, qnn_target, list(w.context), list(w.continuation))
            for w in perplexity.all_windows(heldout_documents)]


@pytest.fixture(scope="session")
def heldout_target(qnn_settings) -> Callable[..., list[np.ndarray]]:  # noqa: ANN001
    """``heldout_target(pipeline, case, target, pte, docs, digest=None)``: a program's logits of
    every window on the target (one prompt pass each). On upstream's x86 runner only with
    ``--nightly``: there a window is a runner call, ten times the emulator's prompt pass (the
    measurements page), and it scores as the emulator's prompt processor does; a phone always
    scores them."""
    def rows(pipeline, case, target, pte: Path, docs: list[perplexity.Document],  # noqa: ANN001
             digest: str | None = None) -> list[np.ndarray]:
        if target.is_x86_runner and not qnn_settings.nightly:
            pytest.skip(f"{target.id}: held-out perplexity through upstream's x86 runner runs "
                        "with --nightly (make nightly); the emulator target scores it here")
        return [pipeline.target_logits(case, target, pte, w.ids, digest)[len(w.context) - 1:]
                for w in perplexity.all_windows(docs)]
    return rows
