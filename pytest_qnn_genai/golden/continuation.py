"""Golden continuations: the committed text a model case must generate for its eval prompt.

``golden/continuations/<case>.json`` holds ``{"prompt", "prompt_tokens", "tokens", "text"}``. It is
checked strictly (one-line errors naming the file) and rewritten only on explicit request.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from pytest_qnn_genai import figures
from pytest_qnn_genai.golden import updates
from pytest_qnn_genai.sequences import first_difference

SUBDIR = "continuations"


class GoldenContinuationError(ValueError):
    """A golden continuation file is missing or malformed (one line, naming the file)."""


@dataclass(frozen=True)
class Continuation:
    """A prompt and the greedy continuation expected from it."""

    prompt: str
    prompt_tokens: list[int]
    tokens: list[int]
    text: str


def path_for(golden_dir: Path, case_name: str) -> Path:
    """Where the continuation of ``case_name`` lives."""
    return golden_dir / SUBDIR / f"{case_name}.json"


def load(path: Path) -> Continuation:
    """Read and validate a golden continuation."""
    if not path.is_file():
        raise GoldenContinuationError(
            f"{path}: no golden continuation (create it with --qnn-update-golden)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise GoldenContinuationError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict):
        raise GoldenContinuationError(f"{path}: expected a JSON object")
    for key, kind in (("prompt", str), ("prompt_tokens", list), ("tokens", list), ("text", str)):
        if not isinstance(data.get(key), kind):
            raise GoldenContinuationError(f"{path}: '{key}' must be a {kind.__name__}")
    for key in ("prompt_tokens", "tokens"):
        if not all(isinstance(t, int) and t >= 0 for t in data[key]):
            raise GoldenContinuationError(f"{path}: '{key}' must hold non-negative integers")
    return Continuation(data["prompt"], data["prompt_tokens"], data["tokens"], data["text"])


def update(path: Path, new: Continuation, *, allow_write: bool) -> updates.Update:
    """Write ``new`` through :func:`~pytest_qnn_genai.golden.updates.write` (only with
    ``allow_write``): the test that calls it reports *updated* and judges nothing."""
    fields = asdict(new)
    text = "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items()) + "\n}\n"
    return updates.write(path, text, allow_write=allow_write)


def judge(expected: Continuation, tokens: list[int], source: str,
          excuse: str = "") -> figures.Figure:
    """The run report's figure: how many leading tokens follow the golden continuation, judged
    by ``tokens == golden``, the same test :func:`mismatch` describes; ``excuse``, when the
    caller judged where they part a near tie (:func:`pytest_qnn_genai.checks.ties.first_parting`),
    says so and passes."""
    same = tokens == expected.tokens or bool(excuse)
    where = f"all {len(expected.tokens)} tokens of {source}" + (
        f", or a near tie where they part ({excuse})" if excuse else "")
    return figures.Figure("continuation_tokens_as_golden", first_difference(tokens, expected.tokens),
                          figures.PASS if same else figures.FAIL, where, figures.EQUAL,
                          float(len(expected.tokens)), figures.HIGHER, len(expected.tokens),
                          "leading tokens equal to the golden continuation")


def mismatch(expected: Continuation, tokens: list[int], text: str,
             why: str = "") -> str | None:
    """A readable description of where ``tokens`` leave the golden continuation (``why``: what
    the caller found there), or None."""
    if tokens == expected.tokens:
        return None
    at = first_difference(tokens, expected.tokens)
    return (f"continuation differs from token {at} on{f' ({why})' if why else ''} (got "
            f"{len(tokens)} tokens, golden {len(expected.tokens)}):\n  golden: "
            f"{expected.text!r}\n  got:    {text!r}")
