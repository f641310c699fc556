"""Golden continuations: strict loading, explicit-flag atomic updates, readable mismatches."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_qnn_genai.golden import continuation, updates
from pytest_qnn_genai.golden.continuation import Continuation, GoldenContinuationError

GOLDEN = Continuation("Once upon a time", [1, 5, 6], [7, 8, 9], " there was a cat")


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    path = continuation.path_for(tmp_path, "tiny")
    continuation.update(path, GOLDEN, allow_write=True)
    updates.take()  # the fixture's write is no test's update
    return path


def test_round_trip(golden: Path) -> None:
    assert continuation.load(golden) == GOLDEN


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({"prompt": "x", "prompt_tokens": [1], "tokens": [2]}), "'text' must be a str"),
    (json.dumps({"prompt": "x", "prompt_tokens": [1], "tokens": ["a"], "text": ""}),
     "'tokens' must hold non-negative integers"),
])
def test_malformed_file_is_one_line_naming_it(golden: Path, content: str, needle: str) -> None:
    golden.write_text(content)
    with pytest.raises(GoldenContinuationError) as err:
        continuation.load(golden)
    message = str(err.value)
    assert message.startswith(str(golden)) and needle in message and "\n" not in message


def test_missing_file_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(GoldenContinuationError, match="--qnn-update-golden"):
        continuation.load(tmp_path / "none.json")


def test_update_needs_the_flag_and_returns_a_diff(golden: Path) -> None:
    changed = Continuation(GOLDEN.prompt, GOLDEN.prompt_tokens, [7, 8, 10], " there was a dog")
    with pytest.raises(PermissionError, match="--qnn-update-golden"):
        continuation.update(golden, changed, allow_write=False)
    assert continuation.load(golden) == GOLDEN
    made = continuation.update(golden, changed, allow_write=True)
    assert "-" in made.diff and "10]" in made.diff and "dog" in made.diff
    assert made.lines() == [f"{golden} tokens[2:] (of 3 -> 3): [9] -> [10]",
                            f'{golden} text: " there was a cat" -> " there was a dog"']
    again = continuation.update(golden, changed, allow_write=True)
    assert (again.diff, again.changed, again.lines()) == ("", False, [f"{golden}: unchanged"])
    assert updates.take() == [made, again]  # journalled: a test that writes reports "updated"


def test_mismatch_names_the_first_differing_token() -> None:
    assert continuation.mismatch(GOLDEN, [7, 8, 9], GOLDEN.text) is None
    problem = continuation.mismatch(GOLDEN, [7, 4, 9], " there is")
    assert problem is not None and problem.startswith("continuation differs from token 1 on")
    assert "' there was a cat'" in problem and "' there is'" in problem


def test_a_parting_the_caller_judged_a_near_tie_passes_and_says_so() -> None:
    """Another target's run leaving the emulator's golden where the caller found a near tie of
    its own row passes, the judge naming the excuse; without one the same tokens fail."""
    src = "golden/continuations/x.json"
    assert continuation.judge(GOLDEN, [7, 4, 9], src).verdict == "fail"
    excused = continuation.judge(GOLDEN, [7, 4, 9], src, "step 1: 8 -> 4, near tie")
    assert excused.verdict == "pass" and excused.value == 1
    assert excused.judge.endswith("or a near tie where they part (step 1: 8 -> 4, near tie)")
    why = continuation.mismatch(GOLDEN, [7, 4, 9], " there is", "step 1: NOT a near tie")
    assert why is not None and "on (step 1: NOT a near tie)" in why
