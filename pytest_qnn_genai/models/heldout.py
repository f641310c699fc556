"""The held-out split of the project's corpus: the text perplexity is measured on.

The toy cases are trained on ``corpus.generate(N_TRAIN, TRAIN_SEED)`` (the trainer's defaults,
:mod:`pytest_qnn_genai.models.train`) and calibrated on story beginnings from ``TRAIN_SEED + 2``
(``case.json``'s ``calibration_prompts``). The held-out split is the stories of
``TRAIN_SEED + 1``, the seed the trainer already keeps out for its held-out loss. The unit is the
story, as wikitext's is the document: no held-out story is a training story, and no held-out
story contains a calibration prompt or is contained in one (``tests/unit/models/test_heldout.py``,
for every packaged case). Sentences do repeat: the corpus is a small grammar, so measured 97 % of
the held-out stories' sentences also occur somewhere in the 20,000 training stories ("Sharing made
them both happy." ends every sharing story); what is new to the model is each story as a whole.

The evaluation is kept small (:data:`N_STORIES` stories, a few rolling windows each), so the
three phases cost seconds per case; its logits are cached (``Pipeline``).

A case that was not trained on the corpus (a real model) names its own held-out text instead
(``case.json``'s ``heldout``: a JSON file in its folder with ``documents``, ``sources`` and
``licence``; :func:`documents_of`): English text a package ships or that is in the public domain,
committed with where it comes from.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pytest_qnn_genai.models import corpus

if TYPE_CHECKING:
    from pytest_qnn_genai.models.case import ModelCase

TRAIN_SEED, N_TRAIN = 1337, 20000  # models/train.py Config: seed, n_stories
HELD_OUT_SEED = TRAIN_SEED + 1  # the trainer's own held-out stories (models/train.py run)
N_STORIES = 4  # stories scored per case


def stories(n: int = N_STORIES) -> list[str]:
    """The first ``n`` held-out stories (the same list on every machine)."""
    return corpus.generate(n, HELD_OUT_SEED)


def documents_of(case: ModelCase) -> list[str]:
    """The documents ``case``'s perplexity is measured on: its own held-out file's, else the
    project's held-out :func:`stories`."""
    if not case.heldout:
        return stories()
    data = json.loads((case.folder / case.heldout).read_text())
    return [str(d) for d in data["documents"]]


def training_stories() -> list[str]:
    """The training split the toy cases were trained on (generated: no download)."""
    return corpus.generate(N_TRAIN, TRAIN_SEED)


def leaks(held_out: Sequence[str], training: Iterable[str],
          calibration_prompts: Iterable[str]) -> list[str]:
    """What of ``held_out`` a model has seen: a story of the training split, or one that holds
    (or is held in) a calibration prompt, each as one line."""
    seen = set(training)
    prompts = list(calibration_prompts)
    out = [f"training story: {s[:60]!r}" for s in held_out if s in seen]
    out += [f"calibration prompt {p[:40]!r} in story {s[:40]!r}" for s in held_out
            for p in prompts if p in s or s in p]
    return out
