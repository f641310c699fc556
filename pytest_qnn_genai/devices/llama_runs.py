"""A generation on a phone, held to ``qnn_llama_runner``'s contract as upstream implements it.

Contract (ExecuTorch examples/qualcomm/oss_scripts/llama at 1.5.1; release/1.4
behaves the same), checked here so that a runner that breaks it fails the run, never passes it:

* **The request.** Both runs get the prompt as ids (``--tokenized_prompt``, uint64, BOS included;
  the runner adds none and applies no chat template), so the phone sees the very ids the
  emulator, the references and the golden continuation use. ``--seq_len`` S counts prompt +
  output: a P-token prompt yields S - P new tokens, one from prefill and S - 1 - P decode steps
  (token_generator.cpp ``TokenGenerator::generate``), so N new tokens take S = P + N. The runner
  aborts when P >= S (runner.cpp), its hybrid prompt processor when P > context - prefill AR
  (prompt_processor.cpp ``PromptProcessor::prefill``), and it *clamps* S above the compiled
  context with only a log line, which would return fewer tokens: all three are refused here
  first (:class:`RunnerRequestError`, one line). ``--shared_buffer`` is passed exactly when the
  program was compiled with it (read back out of the .pte, ``compile_options``); upstream passes
  it to every phone build (device_evaluator.py ``EvalBase._init_runner_base_cmd``).
* **The result**, read only from what every build of the runner writes whatever its logging:
  the observer line (``printf`` to stdout) and outputs.txt. An Android build logs to logcat and
  a release build compiles ``ET_LOG`` out, so no log text is evidence. The observer's
  ``prompt_tokens`` is P; its ``generated_tokens`` G counts decode steps, EOS included, so the
  run produced G + 1 tokens: exactly N, unless a decode step yielded EOS, whose piece is then the
  last thing in outputs.txt (at most N). An EOS from prefill is not a stop. A run that exits 0
  without an observer line generated nothing (with ``--tokenized_prompt`` upstream ignores a
  failed load). Anything else is a :class:`RunnerContractError`.
* **Lookahead** (``--eval_mode 2 --window W --ngram N --gcap G``, a ``--model_mode lookahead``
  build: its ``kv_forward`` takes AR = next_power_of_two((W + G) * (N - 1)) tokens). The prompt
  pass is the hybrid one; each decode step (lhd_token_generator.cpp ``LhdTokenGenerator::
  generate``) feeds the current token, W x (N - 2) lookahead-branch tokens and up to G
  candidate n-grams of N - 1 tokens from its pool, then accepts the argmax of the current
  token's row and, while a candidate's tokens equal the argmax before them, the argmax of that
  candidate's next row: every accepted token is the greedy choice after the tokens before it,
  so the text is the hybrid run's greedy text. Three differences from hybrid, checked here:
  (W + G) x (N - 1) must be the program's decode AR exactly: more rows abort the runner
  (kv_manager.cpp ``init_attention_mask``: "The size of attention_map (21) doesn't match with
  ar_len (16)"), and fewer make it read its attention map past the end (the same loop runs to
  ar_len; measured on the x86 simulator with a 16-row program: 12 and 8 rows segfault, 14 ran),
  so llama.py's rounding up to a power of two is only safe when nothing is rounded; a step may
  accept up to N tokens, so the loop ``pos < seq_len - 1`` overshoots by up to N - 1 (N to
  N + N - 1 tokens, never fewer than N without an EOS); and the loop stops early once ``pos >
  context - AR``, so a request must keep P + N - 2 <= context - AR. Both request rules are
  refused first, one line each. Upstream evaluates lookahead builds with no logits
  (``export_llama`` refuses tasks/SQNR eval for them): no kv-mode dump here either.
* **Logits.** Only kv mode dumps them (``--eval_mode 0``). As upstream's device evaluator
  (device_evaluator.py ``SqnrEval.run``), a second run of the same program with ``--eval_mode 0
  --temperature 0 --tokenized_prompt --dump_logits_path`` gives P prompt rows then one row per
  decode step, raw dtype, dequantized with the program's ``get_logits_scale`` and
  ``get_logits_zero_point``. The generated tokens are the argmax of rows P - 1 on (the runner's
  own greedy choice, first maximum), so they are exact ids, not re-tokenized text; rows 0 .. P - 2
  are the prompt's own (``RunResult.prompt_logits``: perplexity, as llama.py's ``TaskEval``
  reads the same dump). A kv-mode program (``--model_mode kv``: ``kv_forward`` alone) runs once,
  with ``--eval_mode 0``: its prompt goes through ``kv_forward`` a token per call and that run
  gives the text and the logits.

A runner that ran and failed is reported with its exit code (134 = abort, with its
``F ... assert failed`` line) and never re-run.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai.devices.runner_output import (
    LogitsQuant,
    RunnerOutputError,
    dequantize,
    parse_runner_files,
    read_raw_logits,
)
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.hybrid import DECODE, PREFILL
from pytest_qnn_genai.runtime.chat import format_prompt
from pytest_qnn_genai.runtime.result import RunResult
from pytest_qnn_genai.runtime.tokenizer import stop_ids

if TYPE_CHECKING:
    from pytest_qnn_genai.devices.runner_output import RunnerFiles
    from pytest_qnn_genai.devices.workspace import DeviceWorkspace
    from pytest_qnn_genai.runtime.tokenizer import CaseTokenizer

KV_MODE, HYBRID_MODE, LOOKAHEAD_MODE = 0, 1, 2  # qnn_llama_runner --eval_mode
TOKENS_FROM_TEXT = ("re-tokenized from the runner's text with the case's tokenizer (the runner "
                    "reports no ids; no logits were asked for)")
TOKENS_FROM_LOGITS = ("argmax of the kv-mode run's dumped logits (the runner's greedy choice); "
                      "the text is that run's too, the hybrid run's is hybrid_text")


class RunnerRequestError(ValueError):
    """The runner would refuse or silently shorten this request (one line)."""


class RunnerContractError(RunnerOutputError):
    """The runner's output breaks its contract (one line)."""


@dataclass(frozen=True)
class ProgramFacts:
    """What the runner reads out of the .pte that decides how the plugin must call it."""

    context_len: int
    prefill_ar: int
    vocab_size: int
    quant: LogitsQuant
    shared_buffer: bool
    decode_ar: int = 1  # kv_forward's tokens per call (a lookahead build's is > 1)
    kv_mode: bool = False  # no prefill_forward: the prompt goes through kv_forward (--eval_mode 0)

    @classmethod
    def of(cls, pte: Path) -> ProgramFacts:
        """Read the constant methods, the IO shapes and the QNN compile options of ``pte``."""
        from pytest_qnn_genai.runtime.pte_info import compile_options, inspect_pte

        info = inspect_pte(pte)
        c = info.constants
        if (DECODE not in info.methods or "get_max_context_len" not in c
                or "get_vocab_size" not in c):
            raise RunnerRequestError(f"{Path(pte).name}: not a static LLM program (methods "
                                     f"{info.method_names})")
        prompt_method = info.methods.get(PREFILL, info.methods[DECODE])
        logits = info.methods[DECODE].outputs[0].dtype
        if logits not in ("uint16", "float32"):
            raise RunnerRequestError(f"{Path(pte).name}: logits dtype {logits} is neither uint16 "
                                     "nor float32, the two the runner dumps")
        return cls(int(c["get_max_context_len"]), prompt_method.inputs[0].shape[-1],
                   int(c["get_vocab_size"]),
                   LogitsQuant(float(c.get("get_logits_scale", 1.0)),
                               int(c.get("get_logits_zero_point", 0)), logits),
                   bool(compile_options(pte)["shared_buffer"]),
                   info.methods[DECODE].inputs[0].shape[-1], PREFILL not in info.methods)


@dataclass(frozen=True)
class Lookahead:
    """``--window --ngram --gcap`` of a lookahead run (what the program was built with)."""

    window: int
    ngram: int
    gcap: int

    @property
    def rows(self) -> int:
        """Decode-graph rows one step fills: (window + gcap) x (ngram - 1)."""
        return (self.window + self.gcap) * (self.ngram - 1)

    @property
    def overshoot(self) -> int:
        """Tokens a run may produce past ``--seq_len``: one step accepts up to ngram tokens."""
        return self.ngram - 1

    def flags(self) -> list[str]:
        return ["--window", str(self.window), "--ngram", str(self.ngram), "--gcap",
                str(self.gcap)]


def plan_seq_len(facts: ProgramFacts, prompt_tokens: int, max_new_tokens: int,
                 eval_mode: int, lookahead: Lookahead | None = None) -> int:
    """``--seq_len`` for ``max_new_tokens`` after a ``prompt_tokens``-token prompt (P + N),
    or :class:`RunnerRequestError` where the runner would abort or clamp, or (``lookahead``)
    overrun the decode graph or stop at the context early (module docstring)."""
    p, n, ctx = prompt_tokens, max_new_tokens, facts.context_len
    if p < 1 or n < 1:
        raise RunnerRequestError(f"a run needs a prompt and new tokens, got P={p}, N={n}")
    if p + n > ctx:
        raise RunnerRequestError(
            f"a {p}-token prompt and {n} new tokens need --seq_len {p + n}, beyond the program's "
            f"context of {ctx} (qnn_llama_runner would clamp it and return fewer tokens)")
    if (eval_mode == LOOKAHEAD_MODE) != (lookahead is not None):
        raise RunnerRequestError(f"--eval_mode {eval_mode} with lookahead {lookahead}: the "
                                 f"lookahead flags go with --eval_mode {LOOKAHEAD_MODE} only")
    if lookahead is not None:
        if lookahead.rows != facts.decode_ar:
            raise RunnerRequestError(
                f"lookahead --window {lookahead.window} --ngram {lookahead.ngram} --gcap "
                f"{lookahead.gcap} fills (window + gcap) x (ngram - 1) = {lookahead.rows} rows of "
                f"a decode graph of {facts.decode_ar}: the runner "
                + ("aborts" if lookahead.rows > facts.decode_ar else
                   "reads its attention map past the end") + " (the program was built for other "
                "lookahead settings, or not for lookahead)")
        if p + n - 2 > ctx - facts.decode_ar:
            raise RunnerRequestError(
                f"a {p}-token prompt and {n} new tokens reach position {p + n - 2}; the "
                f"lookahead loop stops past context {ctx} - decode AR {facts.decode_ar} = "
                f"{ctx - facts.decode_ar} and would return fewer tokens")
    if eval_mode in (HYBRID_MODE, LOOKAHEAD_MODE) and p > ctx - facts.prefill_ar:
        raise RunnerRequestError(
            f"a {p}-token prompt exceeds the {ctx - facts.prefill_ar} tokens the hybrid prompt "
            f"processor takes (context {ctx} - prefill AR {facts.prefill_ar}); the runner aborts")
    return p + n


@dataclass(frozen=True)
class Generation:
    """One checked run: the new text (EOS piece removed) and what the runner said about it."""

    result: RunResult
    produced: int  # tokens the run produced, EOS included (observer generated_tokens + 1)
    eos_piece: str | None  # the EOS piece that ended it (removed from the text), None: no EOS


def check_generation(files: RunnerFiles, echo: str, prompt_tokens: int, max_new_tokens: int,
                     eos_pieces: tuple[str, ...], serial: str,
                     overshoot: int = 0) -> Generation:
    """Parse one run's files and hold them to the contract (module docstring); ``overshoot``:
    the tokens a lookahead run may produce past ``max_new_tokens``."""
    log = files.run_log.read_text(errors="replace") if files.run_log else ""
    if "PyTorchObserver" not in log:
        lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
        said = [ln for ln in lines if ln.startswith(("E ", "F "))] or lines
        raise RunnerContractError(
            f"qnn_llama_runner exited {files.exit_code} but generated nothing (no "
            f"PyTorchObserver line){': ' + said[-1] if said else ': its log is empty'}")
    result = parse_runner_files(files, echo, device=serial)
    if not result.extra["outputs_txt"].startswith(echo):
        raise RunnerContractError(f"outputs.txt does not start with the echoed prompt {echo!r}: "
                                  f"{result.extra['outputs_txt'][:80]!r}")
    got_p, produced = result.perf.prompt_tokens, result.perf.generated_tokens
    if got_p != prompt_tokens:
        raise RunnerContractError(f"the runner read {got_p} prompt tokens, {prompt_tokens} were "
                                  "sent")
    piece = next((e for e in eos_pieces if result.text.endswith(e)), None) if produced > 1 else None
    if produced > max_new_tokens + overshoot or (produced < max_new_tokens and piece is None):
        expected = (f"{max_new_tokens}" if not overshoot
                    else f"{max_new_tokens}..{max_new_tokens + overshoot} (lookahead)")
        raise RunnerContractError(
            f"qnn_llama_runner produced {produced} tokens (observer generated_tokens "
            f"{produced - 1} + the prefill token) for --seq_len {prompt_tokens + max_new_tokens} "
            f"after a {prompt_tokens}-token prompt: expected {expected}"
            + ("" if produced > max_new_tokens else
               f", or fewer ending at an EOS piece {eos_pieces}; outputs.txt ends "
               f"{result.text[-24:]!r}"))
    if piece is not None:
        result.text = result.text[:len(result.text) - len(piece)]
    return Generation(result, produced, piece)


def generate(ws: DeviceWorkspace, runner: Path, pte: Path, pte_digest: str, tokenizer_bin: Path,
             tokenizer: CaseTokenizer, prompt: str, prompt_ids: list[int],
             max_new_tokens: int, local_dir: Path, timeout_s: float, *, serial: str,
             logits: bool = False, facts: ProgramFacts | None = None,
             decoder_model_version: str | None = None, runner_prompt: bool = False,
             lookahead: Lookahead | None = None) -> RunResult:
    """The hybrid run (text, perf) and, with ``logits``, the kv-mode run (logits, exact ids and
    the text then, the hybrid run's kept as ``extra["hybrid_text"]``);
    with ``lookahead``, a lookahead run (``--eval_mode 2``) instead of the hybrid one, and no
    logits (module docstring).
    ``facts``: what the program says (default: read out of ``pte``); ``decoder_model_version``:
    the runner's ``--decoder_model_version`` (its extra EOS pieces, e.g. ``<|eot_id|>``, and its
    chat template). ``runner_prompt``: give the runner ``--prompt prompt`` to format and encode
    itself, as upstream's CI and device evaluator do; ``prompt_ids`` are then the ids it must
    read (:func:`~pytest_qnn_genai.runtime.chat.runner_prompt_ids`), held to its own count and
    echo."""
    facts = facts or ProgramFacts.of(pte)
    p = len(prompt_ids)
    text_mode = (LOOKAHEAD_MODE if lookahead is not None else KV_MODE if facts.kv_mode
                 else HYBRID_MODE)
    if lookahead is not None and logits:
        raise RunnerRequestError("a lookahead run dumps no logits (only --eval_mode 0 does, and "
                                 "upstream evaluates lookahead builds without them)")
    seq_len = plan_seq_len(facts, p, max_new_tokens, text_mode, lookahead)
    local_dir.mkdir(parents=True, exist_ok=True)
    if runner_prompt:
        text, remote_ids, echo = prompt, None, format_prompt(decoder_model_version, prompt)
    else:
        ids = np.asarray(prompt_ids, dtype=np.uint64).tobytes()
        ids_file = local_dir / "prompt_ids.raw"
        ids_file.write_bytes(ids)
        # relative to the workspace the runner starts in: the runner echoes it into outputs.txt
        text = None
        remote_ids = echo = ws.relative(ws.push_artifact(ids_file,
                                                         hashlib.sha256(ids).hexdigest()))
    remote_pte = ws.push_artifact(pte, pte_digest)
    remote_tok = ws.push_artifact(tokenizer_bin, file_sha256(Path(tokenizer_bin)))
    # the runner stops at its tokenizer's EOS (+ <|eot_id|> as llama3), not at the program's
    # get_eos_id (runner.cpp Runner::load; static_llama writes 2 into every program)
    eos_pieces = tuple(tokenizer.piece(e)
                       for e in sorted(stop_ids(tokenizer, decoder_model_version)))

    def run(mode: int, name: str) -> tuple[Generation, RunnerFiles]:
        flags = lookahead.flags() if mode == LOOKAHEAD_MODE and lookahead else []
        files = ws.run_llama_runner(runner, remote_pte, remote_tok, text, seq_len, timeout_s,
                                    local_dir / name, eval_mode=mode,
                                    dump_logits=mode == KV_MODE, tokenized_prompt=remote_ids,
                                    shared_buffer=facts.shared_buffer,
                                    decoder_model_version=decoder_model_version,
                                    extra_args=flags)
        overshoot = lookahead.overshoot if mode == LOOKAHEAD_MODE and lookahead else 0
        return (check_generation(files, echo, p, max_new_tokens, eos_pieces, serial, overshoot),
                files)

    hybrid, text_files = run(text_mode, {KV_MODE: "kv", HYBRID_MODE: "hybrid",
                                          LOOKAHEAD_MODE: "lookahead"}[text_mode])
    result = hybrid.result
    result.prompt_tokens = list(prompt_ids)
    extra: dict[str, object] = {"seq_len": seq_len, "shared_buffer": facts.shared_buffer,
                             "eos_piece": hybrid.eos_piece, "tokens_source": TOKENS_FROM_TEXT,
                             "eval_mode": text_mode, "produced": hybrid.produced}
    if lookahead is not None:
        extra["lookahead"] = {"window": lookahead.window, "ngram": lookahead.ngram,
                              "gcap": lookahead.gcap, "decode_ar": facts.decode_ar}
    eos = [tokenizer.id_of(hybrid.eos_piece)] if hybrid.eos_piece else []
    hybrid_tokens = retokenize(tokenizer, prompt, result.text) + eos
    if logits:  # a kv-mode program's text run is the kv-mode run: it dumped its logits
        kv, files = (hybrid, text_files) if text_mode == KV_MODE else run(KV_MODE, "kv")
        if files.logits_bin is None:
            raise RunnerContractError("the kv-mode run wrote no logits dump")
        raw = read_raw_logits(files.logits_bin, facts.vocab_size, facts.quant.dtype)
        if raw.shape[0] != p + kv.produced - 1:
            raise RunnerContractError(f"the logits dump has {raw.shape[0]} rows; {p} prompt rows "
                                      f"+ {kv.produced - 1} decode steps were expected")
        result.tokens = [int(t) for t in np.argmax(raw[p - 1:], axis=1)]
        result.logits = dequantize(raw[p - 1:], facts.quant)
        result.prompt_logits = dequantize(raw[:p - 1], facts.quant)
        # the judged generation is the kv-mode run's: its ids, its logits and its text; the
        # hybrid run's text is held to it (checks/generation.py), its perf is the run's
        extra.update(hybrid_text=result.text, hybrid_tokens=hybrid_tokens,
                     eos_piece=kv.eos_piece,
                     kv_perf=kv.result.perf.to_dict(), tokens_source=TOKENS_FROM_LOGITS,
                     logits_source="kv-mode run: --eval_mode 0 --tokenized_prompt "
                                   "--dump_logits_path, dequantized with the program's scale")
        result.text = kv.result.text
    else:
        result.tokens = hybrid_tokens
    result.extra.update(extra)
    return result


def retokenize(tokenizer: CaseTokenizer, prompt: str, text: str) -> list[int]:
    """Token ids of ``text`` as it continues ``prompt`` (ids after the prompt's own)."""
    head = list(tokenizer.encode(prompt))
    full = list(tokenizer.encode(prompt + text))
    if full[:len(head)] == head:
        return full[len(head):]
    return list(tokenizer.encode(text))
