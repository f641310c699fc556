"""The held-out split never trains or calibrates a case: no held-out story is a training story,
and none contains, or is contained in, any packaged case's calibration prompt."""
from __future__ import annotations

from pytest_qnn_genai.models import heldout, registry


def test_the_held_out_split_is_unseen_by_training_and_calibration() -> None:
    held_out = heldout.stories()
    assert len(held_out) == heldout.N_STORIES == len(set(held_out))
    training = heldout.training_stories()
    assert len(set(training)) > 19_000  # the split the toys were trained on (seeded)
    prompts = [p for case in registry.available().values() for p in case.calibration_prompts]
    assert len(prompts) == 8 * len(registry.available())
    assert heldout.leaks(held_out, training, prompts) == []


def test_a_leak_is_named() -> None:
    training = heldout.training_stories()
    prompt = registry.available()["stories260k"].calibration_prompts[0]
    found = heldout.leaks([*heldout.stories(), training[123], f"{prompt} The end."], training,
                          [prompt])
    assert len(found) == 2
    assert found[0].startswith("training story: ") and found[1].startswith("calibration prompt")
