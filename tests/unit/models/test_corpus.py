"""The story corpus generator: deterministic, seed-dependent, TinyStories-shaped."""
from __future__ import annotations

from pytest_qnn_genai.models import corpus


def test_same_seed_same_stories() -> None:
    assert corpus.generate(50, seed=7) == corpus.generate(50, seed=7)


def test_other_seed_other_stories() -> None:
    a, b = corpus.generate(50, seed=7), corpus.generate(50, seed=8)
    assert len(set(a) & set(b)) < 5


def test_every_story_starts_once_upon_a_time() -> None:
    stories = corpus.generate(300, seed=1)
    assert len(stories) == 300
    assert all(s.startswith("Once upon a time") for s in stories)


def test_stories_are_varied_but_small() -> None:
    stories = corpus.generate(300, seed=1)
    assert len(set(stories)) == 300
    words = {w.strip('.,!?"') for s in stories for w in s.split()}
    assert 150 < len(words) < 1000  # a child's vocabulary, not a handful of fixed sentences
