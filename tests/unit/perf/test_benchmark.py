"""Which workload a perf round generates on each kind of target."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_qnn_genai.perf import benchmark
from pytest_qnn_genai.perf.benchmark import EMULATOR_PREFILL_PASSES, Workload, generation_for

CASE = SimpleNamespace(extra={}, calibration_prompts=("Once upon a time", "One day"),
                       eval_prompt="Hi", path=lambda key: Path(f"/case/{key}"))


class Pipeline:
    def __init__(self) -> None:
        self.runs: list[tuple[str, int]] = []

    def pte(self, case, target):  # noqa: ANN001, ANN201
        return SimpleNamespace(pte=Path("/cache/new.pte"))

    def run(self, case, target, prompt, max_new_tokens):  # noqa: ANN001, ANN201
        self.runs.append((prompt, max_new_tokens))
        return SimpleNamespace(perf="stats")


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    seen: list[tuple] = []
    monkeypatch.setattr(benchmark, "host_generation",
                        lambda *args: seen.append(args) or (lambda: "stats"))
    return seen


def test_an_emulator_round_pools_several_prompt_passes(built: list[tuple]) -> None:
    # one pass of a perf prompt lasts ~0.1 s on the emulator: single-pass rounds left
    # llama3_2_toy's prefill short of the 2 s minimum after the round cap on an idle machine
    generation_for(Pipeline(), CASE, SimpleNamespace(is_emulator=True))
    (pte, tokenizer, workload), = built
    assert (pte, tokenizer) == (Path("/cache/new.pte"), Path("/case/tokenizer_model"))
    assert workload == Workload("Once upon a time", benchmark.PERF_MAX_NEW_TOKENS,
                                EMULATOR_PREFILL_PASSES)
    assert EMULATOR_PREFILL_PASSES >= 8
    generation_for(Pipeline(), CASE, SimpleNamespace(is_emulator=True),
                   workload=Workload("Hi", 3))  # a caller's workload is taken as given
    assert built[-1][2] == Workload("Hi", 3)


def test_a_phone_round_is_the_runners_own_single_prompt_pass(built: list[tuple]) -> None:
    pipeline = Pipeline()
    generate = generation_for(pipeline, CASE, SimpleNamespace(is_emulator=False))
    assert generate() == "stats" and not built
    assert pipeline.runs == [("Once upon a time", benchmark.PERF_MAX_NEW_TOKENS)]
