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


def test_a_cases_own_held_out_text_is_unseen_by_its_calibration_and_says_where_it_is_from() -> None:
    own = [c for c in registry.available().values() if c.heldout]
    assert [c.name for c in own] == ["smollm2_135m"]
    for case in own:
        import json

        data = json.loads((case.folder / case.heldout).read_text())
        assert data["licence"] and len(data["sources"]) == len(data["documents"])
        docs = heldout.documents_of(case)
        assert len(docs) == len(set(docs)) == len(data["documents"]) > 0
        assert heldout.leaks(docs, [], case.calibration_prompts) == []
        assert heldout.leaks(docs, [], [docs[1][:40]]) != []  # a leak would be named
    assert heldout.documents_of(registry.available()["stories260k"]) == heldout.stories()
