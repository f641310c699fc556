"""The generation a gate judges must be the one it reports.

On upstream's runners (the x86-runner target, a phone) ``qnn_llama_runner`` dumps logits only in
kv mode, so the judged generation (its logits, its exact ids, their argmax, and its text) is a
kv-mode run of the program; the hybrid run (eval_mode 1) a user would run gives the speed. What
the runner itself says is the evidence: the kv-mode run's own text (its outputs.txt) must be the
judged ids decoded with the case's tokenizer, and the hybrid run must have written that same
text, or parted from it only at a near tie of the kv-mode run's own row
(:mod:`~pytest_qnn_genai.checks.ties`): the hybrid run's prompt goes through the prefill graph,
the kv-mode run's through the decode graph one token at a time, and at real size the two part
where the top two tokens are closer than the program's noise (SmolLM2-135M). Else the gate would
judge one generation and report another. Hazard: "tokens = argmax of their logits" cannot fail
where the tokens are defined as that argmax (the host runner in this process, every kv-mode
dump), so it is no check. Likewise what genai_pipeline's inference stage reports for a program is
held to the harness's own run of it (:func:`inference_matches_run`).
"""
from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai import figures
from pytest_qnn_genai.checks import ties
from pytest_qnn_genai.checks.parity import Check
from pytest_qnn_genai.sequences import first_difference

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_qnn_genai.runtime.result import RunResult


def judged_generation(run: RunResult, decoded: str,
                      decode: Callable[[list[int]], str] | None = None,
                      noise: np.ndarray | None = None) -> list[Check]:
    """Rows (reference in ``legacy``, the judged run's in ``new``) for a run of upstream's runner
    with its kv-mode logits: the kv-mode run's own text (``run.text``) vs ``decoded`` (the judged
    ids decoded with the case's tokenizer, the EOS piece the runner strips removed), and the
    hybrid run's text (``extra["hybrid_text"]``) vs it: identical, or parting from it at a near
    tie (:func:`parting_in_text`, with ``decode`` the judged ids' text and ``noise`` each row's
    target-vs-QDQ rms; without them any parting fails). (The ids' count is the dump's rows,
    which ``devices.llama_runs`` already holds to the runner's observer count.)"""
    if run.logits is None:
        return [Check("logits of the generation", "present", "missing", ok=False,
                      judge="the run dumped logits", name="logits_present")]
    kv, hybrid = run.text, run.extra.get("hybrid_text")
    eos = run.extra.get("eos_piece")
    ids_text = decoded.removesuffix(eos) if isinstance(eos, str) and eos else decoded
    first = first_difference(ids_text, kv)
    rows = [
        Check("runner's kv-mode text = the judged ids decoded", kv, ids_text,
              "" if kv == ids_text else f"char {first}", ok=kv == ids_text,
              judge="the text the runner itself wrote (kv-mode outputs.txt)",
              name="runner_text_is_judged_ids",
              detail="" if kv == ids_text else f"runner: {kv[max(0, first - 20):first + 40]!r}"
                                               f"\nids:    {ids_text[max(0, first - 20):first + 40]!r}")]
    judge = f"the kv-mode run's text, but at a near tie (≤ {ties.NEAR_TIE_SIGMAS:g} σ√2)"
    if not isinstance(hybrid, str):
        return [*rows, Check("hybrid run's text = kv-mode run's", kv, None, ok=False, judge=judge,
                             name="hybrid_text_is_kv_text", detail="the run kept no hybrid text")]
    apart = None if hybrid == kv else parting_in_text(
        list(run.tokens), run.logits, hybrid, decode or (lambda ids: ""),
        noise if noise is not None else np.zeros(len(run.tokens)))
    return [*rows, Check(
        "hybrid run's text = kv-mode run's", kv, hybrid,
        "" if apart is None else f"parts at step {apart.step}",
        ok=apart is None or apart.near_tie, judge=judge, name="hybrid_text_is_kv_text",
        detail="" if apart is None else f"{apart.describe()}\nhybrid: {hybrid!r}\nkv:     {kv!r}")]


def parting_in_text(ids: list[int], logits: np.ndarray, text: str,
                    decode: Callable[[list[int]], str], noise: np.ndarray,
                    top: int = 64) -> ties.Parting:
    """Where another run of the program, which wrote ``text`` and no ids (a hybrid run), left
    the judged ``ids``: the first step ``k`` whose token's text ``text`` does not go on with,
    and the highest of ``logits[k]``'s ``top`` tokens whose text it does (the least lead a swap
    takes: :func:`~pytest_qnn_genai.checks.ties.parting`). A ``text`` that stops where the ids
    go on, or goes on with none of those tokens, is a parting no near tie excuses."""
    k = next((i for i in range(len(ids)) if not text.startswith(decode(ids[:i + 1]))), len(ids))
    if k == len(ids):  # the ids' text is all there, and ``text`` is longer
        return ties.Parting(k, -1, -1, math.inf, 0.0)
    row = np.asarray(logits[k], dtype=np.float64)
    here = len(decode(ids[:k]))
    for c in (int(c) for c in np.argsort(row)[::-1][:top]):
        mine = decode([*ids[:k], c])
        if c != ids[k] and len(mine) > here and text.startswith(mine):
            return ties.parting(row, c, float(noise[k]), k)
    return ties.Parting(k, ids[k], -1, math.inf, float(noise[k]))


def _runner_rows(run: RunResult) -> np.ndarray | None:
    """Every logits row a kv-mode run dumped: the prompt positions', then the generation's."""
    if run.prompt_logits is None or run.logits is None:
        return None
    return np.concatenate([run.prompt_logits, run.logits])


def _same_ids_by_logits(by_text: RunResult, by_ids: RunResult) -> Check:
    """Row i of a kv-mode dump is the program's output after ids 0..i, so two runs of one
    program give identical rows up to the first position whose id differs (measured on the x86
    simulator, every case; a device that answered one input two ways would fail this row, not
    pass it): the ids the runner read are the harness's when every row is equal. Neither the
    count nor the echo nor a toy's greedy text sees one changed id (qwen3_toy's BOS: 0 in the
    harness, 768 in the runner, passed them)."""
    mine, theirs = _runner_rows(by_ids), _runner_rows(by_text)
    name, judge = "runner_prompt_ids", "the kv-mode logits of the run from the harness's ids"
    if mine is None or theirs is None:
        return Check("ids the runner read (kv-mode logits)", "dumped", "missing", ok=False,
                     judge=judge, name=name, detail="both runs need logits=True (kv mode)")
    rows = min(len(mine), len(theirs))
    differ = [i for i in range(rows) if not np.array_equal(mine[i], theirs[i])]
    same = not differ and len(mine) == len(theirs)
    first = differ[0] if differ else rows
    return Check("ids the runner read (kv-mode logits)", f"{len(mine)} rows", f"{len(theirs)} rows",
                 "" if same else f"position {first}", ok=same, judge=judge, name=name,
                 detail="" if same else
                 f"the first row that differs is position {first}: the runner read another id "
                 f"there (the harness's: {by_ids.prompt_tokens[first:first + 4]}...)")


def runner_reads_harness_prompt(by_text: RunResult, by_ids: RunResult, ids: list[int],
                                formatted: str) -> list[Check]:
    """The runner's own ``--prompt`` run (``by_text``) against the harness's copy of its chat
    template and tokenizer (``formatted``, ``ids``) and the run it makes from those ids
    (``by_ids``): as many prompt tokens, its echo the formatted text, the same generation, and
    the same ids, seen in the two runs' kv-mode logits (:func:`_same_ids_by_logits`)."""
    echo = str(by_text.extra.get("outputs_txt", ""))
    return [Check("prompt tokens the runner read", len(ids), by_text.perf.prompt_tokens,
                  ok=by_text.perf.prompt_tokens == len(ids),
                  judge="the harness's template and tokenizer", name="runner_prompt_tokens",
                  detail=f"formatted: {formatted!r}"),
            Check("runner's echo = the harness's formatted prompt", formatted, echo[:len(formatted)],
                  ok=echo.startswith(formatted), judge="the harness's template",
                  name="runner_prompt_echo"),
            Check("generation from --prompt = from the harness's ids", by_ids.text, by_text.text,
                  ok=by_ids.prompt_tokens == ids and by_text.text == by_ids.text,
                  judge="the run from the harness's ids", name="runner_prompt_generation",
                  detail=f"--prompt: {by_text.text!r}\nids:      {by_ids.text!r}"),
            _same_ids_by_logits(by_text, by_ids)]


def lookahead_matches_hybrid(lookahead: RunResult, hybrid: RunResult) -> list[Check]:
    """Lookahead decoding accepts only tokens that are the greedy choice after the tokens before
    them (``runner/lhd_token_generator.cpp``), so its text must be the hybrid run's greedy text
    for the same prompt and as many tokens. Rows: the text (``legacy`` the hybrid run's,
    ``new`` the lookahead run's, ``delta`` the first differing character) and the tokens each
    run produced."""
    la, hy = lookahead.text, hybrid.text
    first = first_difference(la, hy)
    same = la == hy
    produced = [r.extra.get("produced", r.perf.generated_tokens) for r in (lookahead, hybrid)]
    return [
        Check("lookahead text = hybrid greedy text", hy, la, "" if same else f"char {first}",
              ok=same, judge="the hybrid run's greedy text", name="lookahead_text_is_greedy",
              detail="" if same else f"hybrid:    {hy[max(0, first - 20):first + 40]!r}\n"
                                     f"lookahead: {la[max(0, first - 20):first + 40]!r}"),
        Check("lookahead tokens produced = hybrid's", produced[1], produced[0],
              ok=produced[0] == produced[1], judge="the hybrid run's count",
              name="lookahead_tokens_produced"),
    ]


# lhd_token_generator.cpp's closing ET_LOG line (a runner built with logging writes it to its log)
_LOOKAHEAD_LINE = re.compile(r"Lookahead Decoding: n_generated = (\d+) / n_accept = (\d+)")


def lookahead_accepted(log_text: str) -> tuple[int, int] | None:
    """``(n_generated, n_accept)`` of the last lookahead generation a runner's log reports: the
    tokens it generated and how many of them its verification branch accepted from a candidate
    n-gram (each one a decode step saved); None when the log has no such line (``ET_LOG``
    compiled out, or a phone whose log goes to logcat)."""
    found = _LOOKAHEAD_LINE.findall(log_text)
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def lookahead_gains(pairs: Sequence[tuple[RunResult, RunResult]],
                    accepted: tuple[int, int] | None, min_accepted: int,
                    min_speed_ratio: float | None, source: str) -> list[Check]:
    """What lookahead decoding is for: tokens accepted from its n-gram candidates (the runner's
    own count, ``accepted``: :func:`lookahead_accepted`) at least ``min_accepted`` and never 0,
    and its decode rate against the hybrid build's of the same flow at least ``min_speed_ratio``
    (None: reported, judged by nothing); ``source`` says where both bounds come from.

    ``pairs`` are (lookahead run, hybrid run) of the same work, run one after the other in
    alternating order; the share judged is the median of the pairs' ratios. The hazard: the two
    runs of a pair are whole processes seconds apart, so a burst of load on a shared core lands
    on one side of a pair and can move its ratio past the floor (the docs' measurements page,
    Lookahead); the median of three alternated pairs needs two such bursts to move."""
    if not pairs:
        raise ValueError("lookahead_gains: no (lookahead, hybrid) run pair")
    floor = max(1, min_accepted)
    n = None if accepted is None else accepted[1]
    rates = [(la.perf.decode_tok_s, hy.perf.decode_tok_s) for la, hy in pairs]
    ratios = [rate_l / rate_h if rate_h > 0 else float("nan") for rate_l, rate_h in rates]
    ratio = statistics.median(ratios)
    rate_l, rate_h = (statistics.median(side) for side in zip(*rates))
    spread = "" if len(pairs) == 1 else (
        f"median of {len(pairs)} alternated pairs: " + ", ".join(f"{r:.3f}" for r in ratios))
    return [
        Check("lookahead tokens accepted (runner's count)", floor, n, ok=n is not None and n >= floor,
              judge=f"≥ {floor} ({source})", name="lookahead_accepted_tokens", bound=floor,
              rule=figures.AT_LEAST, better=figures.HIGHER,
              detail="" if accepted is not None else "the runner's log has no \"Lookahead "
              "Decoding: n_generated = .. / n_accept = ..\" line (a runner built without ET_LOG?)"),
        Check("lookahead / hybrid decode tok/s", round(rate_h, 3), round(rate_l, 3),
              round(ratio, 4), ok=min_speed_ratio is None or ratio >= min_speed_ratio,
              info=min_speed_ratio is None,
              judge="" if min_speed_ratio is None else f"ratio ≥ {min_speed_ratio:g} ({source})",
              name="lookahead_decode_speed_ratio", bound=min_speed_ratio,
              rule="" if min_speed_ratio is None else figures.AT_LEAST, better=figures.HIGHER,
              detail=spread),
    ]


def inference_matches_run(run: RunResult, prompt_ids: Sequence[int], tokens: Sequence[int],
                          texts: Sequence[str], decode_tok_s: float) -> list[Check]:
    """What genai_pipeline's inference stage reported for a program (its prompt ids, greedy
    tokens, decoded texts and decode rate) against the harness's own ``run`` of that program on
    the same target: one program, one target, one mode, greedy, so the ids, the tokens and the
    one text are identical; the rate is shown beside the harness's, judged by nothing. Upstream's
    stage runs the hybrid mode, so on upstream's runners it is held to the harness run's hybrid
    text and that text's tokens (``extra["hybrid_text"]``, ``extra["hybrid_tokens"]``), not to
    its judged kv-mode generation."""
    same = "identical to the harness's run"
    text = str(run.extra.get("hybrid_text", run.text))
    mine = run.extra.get("hybrid_tokens", run.tokens)
    ours = [int(t) for t in mine] if isinstance(mine, list) else list(run.tokens)

    def where(theirs: Sequence[int], ours: Sequence[int]) -> str:
        same = list(theirs) == list(ours)
        return "" if same else f"first differs at {first_difference(ours, theirs)}"

    return [
        Check("genai inference: prompt ids", len(run.prompt_tokens), len(prompt_ids),
              where(prompt_ids, run.prompt_tokens), ok=list(prompt_ids) == list(run.prompt_tokens),
              judge=same, name="genai_inference_prompt_ids", rule=figures.EQUAL),
        Check("genai inference: greedy tokens", len(ours), len(tokens),
              where(tokens, ours), ok=list(tokens) == ours, judge=same,
              name="genai_inference_tokens", rule=figures.EQUAL),
        Check("genai inference: text", text[:40],
              texts[0][:40] if len(texts) == 1 else f"{len(texts)} texts",
              ok=list(texts) == [text], judge=same, name="genai_inference_text",
              rule=figures.EQUAL),
        Check("genai inference: decode tok/s", round(run.perf.decode_tok_s, 1),
              round(decode_tok_s, 1), info=True, name="genai_inference_decode_tok_s",
              better=figures.HIGHER),
    ]
