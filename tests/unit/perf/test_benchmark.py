"""Which workload a perf round generates on each kind of target."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_qnn_genai.perf import benchmark
from pytest_qnn_genai.perf.benchmark import EMULATOR_PREFILL_PASSES, Workload, generation_for

CASE = SimpleNamespace(extra={}, calibration_prompts=("Once upon a time", "One day"),
                       eval_prompt="Hi", path=lambda key: Path(f"/case/{key}"))


PTE = Path("/cache/new.pte")
EMULATOR = SimpleNamespace(is_emulator=True)
PHONE = SimpleNamespace(is_emulator=False)


class Runs:
    """What a phone round calls: ``run(prompt, max_new_tokens)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, prompt: str, max_new_tokens: int) -> SimpleNamespace:
        self.calls.append((prompt, max_new_tokens))
        return SimpleNamespace(perf="stats")


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    seen: list[tuple] = []

    def host_generation(*args):
        seen.append(args)
        return lambda: "stats"

    monkeypatch.setattr(benchmark, "host_generation", host_generation)
    return seen


def test_an_emulator_round_pools_several_prompt_passes(built: list[tuple]) -> None:
    # one pass of a perf prompt lasts a fraction of a second on the emulator: single-pass rounds
    # left llama3_2_toy's prefill short of the minimum work after the round cap on an idle machine
    generation_for(CASE, EMULATOR, lambda: PTE, Runs())
    (pte, tokenizer, workload), = built
    assert (pte, tokenizer) == (Path("/cache/new.pte"), Path("/case/tokenizer_model"))
    assert workload == Workload("Once upon a time", benchmark.PERF_MAX_NEW_TOKENS,
                                EMULATOR_PREFILL_PASSES)
    assert EMULATOR_PREFILL_PASSES >= 8
    generation_for(CASE, EMULATOR, lambda: PTE, Runs(),
                   workload=Workload("Hi", 3))  # a caller's workload is taken as given
    assert built[-1][2] == Workload("Hi", 3)


def test_a_phone_round_is_the_runners_own_single_prompt_pass(built: list[tuple]) -> None:
    runs = Runs()
    generate = generation_for(CASE, PHONE, lambda: PTE, runs)
    assert generate() == "stats" and not built
    assert runs.calls == [("Once upon a time", benchmark.PERF_MAX_NEW_TOKENS)]
