"""Measured generation rounds: pytest-benchmark wiring and minimum work.

A *generation* is a zero-argument callable returning :class:`PerfStats` (one greedy generation of
a fixed workload). :func:`measure` runs it after a warm-up for ``rounds`` rounds and then tops up
with more rounds (bounded) until the pooled work meets the minimum (:mod:`.minimum`), so a figure
is never skipped for resting on too little work. :class:`QnnBenchmark` does the same through
pytest-benchmark's ``benchmark.pedantic`` when the plugin is active and with its own loop when
pytest-benchmark is disabled (``--benchmark-disable``, or ``-n N`` where it disables itself).
The A/B gate is :mod:`pytest_qnn_genai.perf.gate`.

On the emulator every .pte runs through :class:`~pytest_qnn_genai.runtime.host_runner.HybridRunner`
(the only safe way to load a QNN .pte twice in one process). A phone's rounds on a golden
workload come from :mod:`.phone`.

:func:`inference_speed` is upstream's figure (runner.cpp ``print_performance_report``): decode
steps over prompt + decode time, the prompt rate when nothing was decoded. A round that carries
the runner's own ``inference_speed.txt`` (``runner_inference_speed``) reports that number.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.perf.minimum import GATED, Work, check_minimum, measured_work, round_work
from pytest_qnn_genai.runtime.result import PerfStats

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture

    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.runtime.host_runner import HybridRunner
    from pytest_qnn_genai.runtime.result import RunResult
    from pytest_qnn_genai.settings import Settings
    from pytest_qnn_genai.targets import Target

Generate = Callable[[], PerfStats]
RunCase = Callable[[str, int], "RunResult"]  # (prompt, max_new_tokens) -> one generation
PERF_MAX_NEW_TOKENS = 24
# prompt passes pooled into an emulator round's prefill figure. One pass of a case's perf prompt
# lasts a fraction of a second on the emulator: with single-pass rounds llama3_2_toy's prefill
# stayed short of the minimum work after the round cap, even on an idle machine, while decode had
# rested on enough work for many rounds.
EMULATOR_PREFILL_PASSES = 8
# extra_info key -> PerfStats attribute (medians over the measured rounds)
EXTRA_INFO = {"prompt_tok_s": "prefill_tok_s", "decode_tok_s": "decode_tok_s",
              "ttft_s": "ttft_s", "load_s": "model_load_s", "prompt_tokens": "prompt_tokens",
              "generated_tokens": "generated_tokens"}
# record figure -> PerfStats attribute (golden vocabulary: prefill_tok_s, decode_tok_s)
FIGURES = {"prefill_tok_s": "prefill_tok_s", "decode_tok_s": "decode_tok_s", "ttft_s": "ttft_s",
           "load_s": "model_load_s"}


@dataclass(frozen=True)
class Workload:
    """What one measured round generates: a prompt and a fixed number of new tokens."""

    prompt: str
    max_new_tokens: int = PERF_MAX_NEW_TOKENS
    # emulator rounds: prompt passes pooled into the round's prefill figure (the first is the
    # generation's own, the rest prompt-only); one prompt pass is too short a window on a shared
    # machine (the paired prefill ratios of identical programs spread far beyond the noise band)
    prefill_passes: int = 1

    @classmethod
    def for_case(cls, case: ModelCase, prefill_passes: int = 1) -> Workload:
        """``case.extra["perf_prompt"]``, else its longest calibration prompt (several full AR
        chunks, so the prefill figure rests on more than one short call), else its eval prompt;
        ``perf_max_new_tokens`` likewise."""
        prompts = tuple(case.calibration_prompts)
        prompt = str(case.extra.get("perf_prompt") or "") or (max(prompts, key=len) if prompts
                                                   else case.eval_prompt)
        return cls(prompt, int(case.extra.get("perf_max_new_tokens", PERF_MAX_NEW_TOKENS)),
                   prefill_passes)


@dataclass(frozen=True)
class Minimum:
    """The work a figure must rest on, and how many rounds may be run to reach it."""

    tokens: int  # --qnn-perf-min-tokens
    seconds: float  # --qnn-perf-min-seconds
    max_rounds: int = 12
    gated: tuple[str, ...] = GATED  # the figures that must rest on this much work

    @classmethod
    def from_settings(cls, settings: Settings, gated: tuple[str, ...] = GATED,
                      max_rounds: int = 0) -> Minimum:
        """The knobs' minimum; at most ``max(4 x rounds, rounds + 3, max_rounds)`` rounds."""
        return cls(settings.perf_min_tokens, settings.perf_min_seconds,
                   max(4 * settings.perf_rounds, settings.perf_rounds + 3, max_rounds),
                   tuple(gated))

    def shortfall(self, stats: Sequence[PerfStats]) -> list[str]:
        """Why ``stats`` do not yet make gated figures (empty: enough work)."""
        out = []
        for fig in self.gated:
            why = check_minimum(measured_work(stats, fig), min_tokens=self.tokens,
                                min_seconds=self.seconds, figure=fig)
            if why:
                out.append(why)
        return out


def host_generation(pte: Path | str, tokenizer_model: Path | str, workload: Workload,
                    runner_class: type[HybridRunner] | None = None) -> Generate:
    """An emulator generation of ``workload`` with ``pte`` (fixed work: EOS does not stop it).

    With ``workload.prefill_passes`` = k > 1 a round's ``prompt_tokens`` and ``prefill_tok_s``
    are pooled over k passes of the prompt (k x P tokens over their summed prefill time); the
    other figures are the generation's own."""
    from pytest_qnn_genai.runtime.host_runner import HybridRunner

    runner = (runner_class or HybridRunner)(pte)
    ids, n = fit_workload(workload, tokenizer_model, [runner])

    def generate() -> PerfStats:
        perf: PerfStats = runner.generate(ids, n, stop_at_eos=False).perf
        if workload.prefill_passes <= 1:
            return perf
        seconds = round_work(perf, "prefill_tok_s").seconds
        for _ in range(workload.prefill_passes - 1):
            seconds += round_work(runner.generate(ids, 1, stop_at_eos=False).perf,
                                  "prefill_tok_s").seconds
        tokens = perf.prompt_tokens * workload.prefill_passes
        return replace(perf, prompt_tokens=tokens, prefill_tok_s=tokens / seconds)
    return generate


def fit_workload(workload: Workload, tokenizer_model: Path | str,
                 runners: Sequence[HybridRunner]) -> tuple[list[int], int]:
    """``workload``'s prompt ids (the tokenizer's BOS, cut to what every runner's prompt
    processor accepts) and its new-token count (at least 1; prompt + new tokens within every
    runner's context, as qnn_llama_runner's ``--seq_len``)."""
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

    ids = encode(load_tokenizer(Path(tokenizer_model)), workload.prompt)
    ids = ids[:min(r.max_prompt_len for r in runners)]
    n = min([workload.max_new_tokens] + [r.context_len - len(ids) for r in runners])
    return ids, max(1, n)


def runner_workload(workload: Workload, tokenizer_model: Path | str,
                    builds: Sequence[ModelCase]) -> list[int]:
    """``workload``'s prompt ids cut to what upstream's runner takes for every one of ``builds``
    with ``workload.max_new_tokens`` new tokens: its hybrid prompt processor's context -
    prefill AR, and for a lookahead build the P + N - 2 <= context - decode AR its loop needs
    (:func:`pytest_qnn_genai.devices.llama_runs.plan_seq_len` refuses the rest)."""
    from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

    n = workload.max_new_tokens
    limit = min(min(b.max_context_len - b.prompt_ar_len,
                    b.max_context_len - b.decode_ar_len - n + 2 if b.is_lookahead
                    else b.max_context_len - n) for b in builds)
    if limit < 1:
        raise ValueError(f"{workload.max_new_tokens} new tokens leave no room for a prompt in "
                         f"{', '.join(b.name for b in builds)}")
    return encode(load_tokenizer(Path(tokenizer_model)), workload.prompt)[:limit]


def generation_for(case: ModelCase, target: Target, pte: Callable[[], Path], run: RunCase,
                   workload: Workload | None = None) -> Generate:
    """The generation of ``case``'s perf workload on ``target``: on the emulator the program
    ``pte()`` through :func:`host_generation` (:data:`EMULATOR_PREFILL_PASSES` prompt passes a
    round); on a phone ``run(prompt, max_new_tokens)``, the runner's one prompt pass."""
    if target.is_emulator:
        workload = workload or Workload.for_case(case, EMULATOR_PREFILL_PASSES)
        return host_generation(pte(), case.path("tokenizer_model"), workload)
    phone_workload = workload or Workload.for_case(case)
    return lambda: run(phone_workload.prompt, phone_workload.max_new_tokens).perf


def inference_speed(s: PerfStats) -> float:
    """Upstream's ``inference_speed``: decode steps over prompt + decode time (the prompt rate
    when nothing was decoded); the runner's own figure when the round carries it."""
    reported = getattr(s, "runner_inference_speed", None)
    if reported is not None:
        return float(reported)
    return observed_inference_speed(s)


def observed_inference_speed(s: PerfStats) -> float:
    """:func:`inference_speed` computed from the round's prefill and decode figures (0 when
    nothing was timed)."""
    if s.generated_tokens <= 1:
        return s.prefill_tok_s
    return round_work(s, "inference_speed_tok_s").rate


@dataclass
class BenchResult:
    """The measured rounds of one generation (warm-up excluded)."""

    rounds: list[PerfStats]
    planned: int  # rounds asked for; the rest were run to reach the minimum work
    shortfall: list[str] = field(default_factory=list)  # left after max_rounds (normally empty)

    def median(self, attr: str) -> float:
        return float(statistics.median(getattr(s, attr) for s in self.rounds))

    def work(self, figure: str) -> Work:
        return measured_work(self.rounds, figure)

    def figures(self) -> dict[str, float]:
        """Median figures for a perf :class:`Record` (``prefill_tok_s``, ``decode_tok_s``, ...,
        and upstream's ``inference_speed_tok_s``: generated tokens over prefill + decode time)."""
        out = {name: self.median(attr) for name, attr in FIGURES.items()}
        out["inference_speed_tok_s"] = float(statistics.median(inference_speed(s)
                                                               for s in self.rounds))
        return out

    def values(self) -> dict[str, object]:
        """Figures plus the work behind them (what a perf record stores)."""
        p, d = self.work("prefill_tok_s"), self.work("decode_tok_s")
        return {**self.figures(), "rounds": len(self.rounds), "prefill_work_tokens": p.tokens,
                "prefill_work_s": round(p.seconds, 4), "decode_work_tokens": d.tokens,
                "decode_work_s": round(d.seconds, 4)}

    def extra_info(self) -> dict[str, float]:
        """The pytest-benchmark ``extra_info`` keys (medians over rounds)."""
        info: dict[str, float] = {k: self.median(a) for k, a in EXTRA_INFO.items()}
        info["prompt_tokens"], info["generated_tokens"] = (int(info["prompt_tokens"]),
                                                           int(info["generated_tokens"]))
        return info | {"rounds": len(self.rounds), "planned_rounds": self.planned}


def top_up(rounds: list[PerfStats], generate: Generate, minimum: Minimum,
           planned: int) -> BenchResult:
    """Run more rounds until ``minimum`` is met or ``minimum.max_rounds`` are reached."""
    while minimum.shortfall(rounds) and len(rounds) < minimum.max_rounds:
        rounds.append(generate())
    return BenchResult(rounds, planned, minimum.shortfall(rounds))


def measure(generate: Generate, rounds: int, minimum: Minimum, warmup: int = 1) -> BenchResult:
    """Own timing loop: ``warmup`` discarded rounds, ``rounds`` measured, then :func:`top_up`."""
    for _ in range(warmup):
        generate()
    return top_up([generate() for _ in range(rounds)], generate, minimum, rounds)


class QnnBenchmark:
    """A generation measured through pytest-benchmark (or its own loop when that is disabled)."""

    def __init__(self, benchmark: BenchmarkFixture | None, settings: Settings, target: Target,
                 default: Callable[[Path | str | None, Workload | None], Generate],
                 labels: Mapping[str, str] | None = None) -> None:
        self.benchmark = benchmark
        self.settings = settings
        self.target = target
        self._default = default  # (pte, workload) -> Generate for the case × target
        self.labels = dict(labels or {})
        self.result: BenchResult | None = None

    @property
    def minimum(self) -> Minimum:
        return Minimum.from_settings(self.settings)

    def __call__(self, generate: Generate | None = None, *, pte: Path | str | None = None,
                 workload: Workload | None = None, rounds: int | None = None,
                 minimum: Minimum | None = None) -> BenchResult:
        """Measure ``generate`` (default: the case's perf workload on the target, with ``pte``)
        for ``rounds`` (default ``--qnn-perf-rounds``) after one warm-up round, then top up to
        ``minimum`` (default: the knobs', on prefill and decode)."""
        generate = generate or self._default(pte, workload)
        rounds = rounds or self.settings.perf_rounds
        minimum = minimum or self.minimum
        if self.benchmark is None or self.benchmark.disabled:
            result = measure(generate, rounds, minimum)
        else:
            seen: list[PerfStats] = []
            self.benchmark.pedantic(lambda: seen.append(generate()), rounds=rounds,
                                    warmup_rounds=1, iterations=1)
            result = top_up(seen[1:], generate, minimum, rounds)
        if self.benchmark is not None:
            self.benchmark.extra_info.update(result.extra_info())
            self.benchmark.extra_info.update(self.labels)
            self.benchmark.extra_info["pytest_benchmark_disabled"] = bool(self.benchmark.disabled)
        self.result = result
        return result
