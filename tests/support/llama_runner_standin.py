"""A stand-in for ExecuTorch's ``qnn_llama_runner`` whose rules come from upstream, not the plugin.

Source: examples/qualcomm/oss_scripts/llama/ at ExecuTorch 1.5.1 (its Python side equals
the 1.5.1 wheel; release/1.4 differs only in three observer keys). The stand-in, not the backend,
owns these rules. Every upstream flag is accepted with its default (``FLAGS``, gflags syntax).
Prompts come only from literal ``--prompt VALUE`` pairs, wrapped in the
``--decoder_model_version`` chat template, run ``--num_iters`` times as one conversation (the
position carries over, BOS only at position 0). ``--seq_len`` S counts prompt + output: a P-token
prompt yields exactly S - P new tokens (1 from prefill, S - 1 - P decode steps) unless a *decode*
step yields EOS (the prefill token is never EOS-checked). P >= S aborts with "sequence length
exceeded - please increase the seq_len value" (SIGABRT: a shell reports 134). S above the compiled
context is clamped with a warning; S <= 0 means the context. ``--output_path`` holds, per turn,
the formatted prompt, the prefill token's piece and every decode piece, the EOS piece included;
it is created empty after load and filled only at a normal exit. ``--performance_output_path``
holds decode steps / (inference_end - inference_start) * 1000, or the prompt rate when nothing
was decoded. ``--dump_logits_path`` needs ``--eval_mode 0`` (else abort): raw prefill rows, then
raw decode rows, in the model's logits dtype. stdout: ``PyTorchObserver {json}`` per turn (its
``generated_tokens`` counts decode steps, EOS included, prefill token excluded); stderr: ET_LOG.

Backends (:mod:`tests.support.standin_backends`, which states their interface) are named by
``$QNN_GENAI_STANDIN_BACKEND`` as ``module:function`` and called with a :class:`LoadRequest`; they
only tokenize, decode pieces and execute methods. ``$QNN_GENAI_STANDIN_TIME_SCALE`` (test-only)
multiplies every reported duration: a slow phone. Not modelled: lookahead speculation hits
(eval_mode 2 takes one token per step) and attention sink (refused, exit 2).
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from tests.support import standin_plumbing as common
from tests.support.chat_templates import VERSIONS, format_prompt
from tests.support.standin_plumbing import Abort, Clock, Console

BACKEND_ENV = "QNN_GENAI_STANDIN_BACKEND"
PREFILL, KV = "prefill_forward", "kv_forward"
RC, TG, LHD = "runner.cpp", "token_generator.cpp", "lhd_token_generator.cpp"

# qnn_llama_runner.cpp DEFINE_* (name -> (type, default))
FLAGS: dict[str, tuple[Callable[[str], Any], Any]] = {
    "decoder_model_version": (str, "llama2"), "model_path": (str, "kv_llama_qnn.pte"),
    "attention_sink_rope_path": (str, ""), "output_path": (str, "outputs.txt"),
    "performance_output_path": (str, "inference_speed.txt"), "dump_logits_path": (str, ""),
    "tokenizer_path": (str, "tokenizer.bin"),
    "prompt": (str, "The answer to the ultimate question is"), "tokenized_prompt": (str, ""),
    "system_prompt": (str, ""), "temperature": (float, 0.0), "seq_len": (int, 128),
    "eval_mode": (int, 1), "shared_buffer": (bool, False), "num_iters": (int, 1),
    "ngram": (int, 0), "window": (int, 0), "gcap": (int, 0)}

SEQ_COND = ("!c10::add_overflows( cur_pos_, static_cast<int64_t>(num_prompt_tokens), &end_pos) "
            "&& end_pos < static_cast<int64_t>(seq_len)")
PP_COND = ("!c10::add_overflows( start_pos, static_cast<int64_t>(num_prompt_tokens), &end_pos) "
           "&& end_pos <= static_cast<int64_t>(metadata_.context_len) - "
           "static_cast<int64_t>(metadata_.ar_len)")
# extension/llm/runner/stats.h:stats_to_json_string order after the two optional rates
# (model_execution_* and aggregate_model_execution_time_ms are new since release/1.4; this
# runner never sets them)
OBSERVER_KEYS = ("prompt_tokens", "generated_tokens", "model_load_start_ms", "model_load_end_ms",
                 "inference_start_ms", "inference_end_ms", "model_execution_start_ms",
                 "model_execution_end_ms", "prompt_eval_end_ms", "first_token_ms",
                 "aggregate_sampling_time_ms", "aggregate_model_execution_time_ms")


@dataclass(frozen=True)
class LoadRequest:
    """What a backend factory is given (runner.cpp:Runner::Runner arguments)."""

    model_path: str
    tokenizer_path: str
    eval_mode: int
    decoder_model_version: str
    shared_buffer: bool


def _rate(count: float, ms: float) -> float:
    return count / ms * 1000 if ms else (float("inf") if count else float("nan"))


def observer_json(st: dict[str, int]) -> str:
    """stats.h:stats_to_json_string: rates only for positive intervals, doubles as ``%g``."""
    prefill_ms = st["prompt_eval_end_ms"] - st["inference_start_ms"]
    decode_ms = st["inference_end_ms"] - st["prompt_eval_end_ms"]
    parts = []
    if prefill_ms > 0:
        parts.append(f'"prefill_token_per_sec":{_rate(st["prompt_tokens"], prefill_ms):g}')
    if decode_ms > 0:
        parts.append(f'"decode_token_per_sec":{_rate(st["generated_tokens"], decode_ms):g}')
    parts += [f'"{k}":{st[k]}' for k in OBSERVER_KEYS] + ['"SCALING_FACTOR_UNITS_PER_SECOND":1000']
    return "{" + ",".join(parts) + "}"


class Runner:
    """examples/qualcomm/oss_scripts/llama/runner/runner.cpp:Runner over a pluggable backend."""

    def __init__(self, flags: dict[str, Any], factory: Callable[[LoadRequest], Any],
                 con: Console, clock: Clock) -> None:
        self.f, self.factory, self.con, self.clock = flags, factory, con, clock
        self.st = dict.fromkeys(OBSERVER_KEYS, 0)  # Stats, never reset between turns here
        self.backend: Any = None
        self.cur_pos, self.lhd_ready = 0, False
        self.prefill_rows: list[bytes] = []
        self.decode_rows: list[bytes] = []
        self.rng = np.random.default_rng(int(time.time()))  # Sampler seeded with time(nullptr)
        con.check(flags["decoder_model_version"] in VERSIONS, f"{RC}:148", "Runner", "false",
                  "Unsupported Decoder Model")
        con.log("I", f"{RC}:151", f"creating module: model_path={flags['model_path']}")
        con.log("I", f"{RC}:152", f"creating runner: tokenizer_path={flags['tokenizer_path']}")
        con.log("I", f"{RC}:153", f"eval mode={flags['eval_mode']}")

    def ensure_loaded(self) -> bool:
        """Runner::load inside model_load_*; False where upstream returns an error."""
        if self.backend is not None:
            return True
        f, mode = self.f, self.f["eval_mode"]
        self.st["model_load_start_ms"] = self.clock.ms()
        self.con.check(mode in (0, 1, 2), f"{RC}:182", "load", "false",
                       "Unsupported llama evaluation mode")
        if not os.path.isfile(f["tokenizer_path"]):
            self.con.log("E", f"{RC}:193", f"Failed to load tokenizer with {f['tokenizer_path']}")
            return False
        try:
            if not os.path.isfile(f["model_path"]):
                raise FileNotFoundError(f["model_path"])
            began = time.perf_counter()
            backend = self.factory(LoadRequest(f["model_path"], f["tokenizer_path"], mode,
                                               f["decoder_model_version"], f["shared_buffer"]))
        except Exception as e:  # noqa: BLE001 - any failure is Module::load_method's error
            self.con.log("E", "module.cpp", f"stand-in: loading the model failed: {e!r}")
            return False
        if hasattr(backend, "simulated_load_s"):  # it replaces the construction's wall time
            self.clock.extra += backend.simulated_load_s - (time.perf_counter() - began)
        extra = VERSIONS[f["decoder_model_version"]][2]
        self.eos = {backend.eos_id} | {backend.encode(piece, 0)[0] for piece in extra}
        self.con.log("I", f"{RC}:232", "Reading metadata from model")
        self.tg_ar = backend.ar_len(KV)
        self.pp_ar = self.tg_ar if mode == 0 else backend.ar_len(PREFILL)
        self.con.log("I", f"{RC}:366", "creating io_memory")
        self.backend = backend
        self.st["model_load_end_ms"] = self.clock.ms()
        return True

    def _exec(self, method: str, tokens: list[int], pos: int) -> np.ndarray:
        rows = np.asarray(self.backend.execute(method, tokens, pos))
        cost = getattr(self.backend, "simulated_cost_s", None)
        self.clock.extra += cost(method, len(tokens)) if cost else 0.0
        return rows

    def _sample(self, row: np.ndarray) -> int:
        """decoder_runner.h:logits_to_token -> sampler.cpp:Sampler::sample on raw values."""
        if self.f["temperature"] == 0:
            return int(np.argmax(row))  # the first maximum, as sample_argmax
        z = row.astype(np.float64) / self.f["temperature"]
        p = np.exp(z - z.max())
        p /= p.sum()
        order = np.argsort(-p, kind="stable")
        keep = order[:int(np.searchsorted(np.cumsum(p[order]), 0.9)) + 1]  # kTopp = 0.9
        return int(self.rng.choice(keep, p=p[keep] / p[keep].sum()))

    def generate(self, prompt: str, tokenized: bool, out: list[bytes]) -> None:
        """Runner::generate_from_prompt_or_file (its returned errors are ignored upstream)."""
        con, st, where = self.con, self.st, "generate_from_prompt_or_file"
        con.check(prompt != "", f"{RC}:392", where, "!prompt.empty()", "prompt cannot be null")
        if not self.ensure_loaded():
            return
        st["inference_start_ms"] = self.clock.ms()
        ctx, seq_len = self.backend.context_len, self.f["seq_len"]
        if seq_len > ctx:
            con.log("I", f"{RC}:402", f"Warning: Requested seq_len ({seq_len}) exceeds compiled "
                    f"max_context_len ({ctx}) without attention sink. Clamping to {ctx}.")
            seq_len = ctx
        elif seq_len <= 0:
            con.log("I", f"{RC}:410", f"Warning: Invalid seq_len ({seq_len}). Using compiled "
                    f"max_context_len ({ctx}).")
            seq_len = ctx
        if tokenized:
            con.check(os.path.isfile(prompt), f"{RC}:435", where, "false",
                      f"Unable to read tokenized prompt from file: {prompt}")
            tokens = [int(t) for t in np.fromfile(prompt, dtype=np.uint64)]
        else:
            tokens = list(self.backend.encode(prompt, 1 if self.cur_pos == 0 else 0))
        n = len(tokens)
        con.check(n >= 1, f"{RC}:448", where, "num_prompt_tokens >= 1",
                  "Expected at least 1 prompt token")
        con.check(self.cur_pos + n < seq_len, f"{RC}:450", where, SEQ_COND,
                  "sequence length exceeded - please increase the seq_len value")
        out.append(prompt.encode())  # GenerationConfig.echo = true
        cur = self._prefill(tokens, ctx)
        self.cur_pos += n
        st["first_token_ms"] = st["prompt_eval_end_ms"] = self.clock.ms()
        out.append(bytes(self.backend.decode(cur, cur)))  # tokenizer_->decode(cur, cur)
        con.log("I", f"{RC}:476", "RSS after prompt prefill: 0.000000 MiB (0 if unsupported)")
        decoder = self._lookahead if self.f["eval_mode"] == 2 else self._decode
        generated = decoder(cur, seq_len, ctx, out)
        st["inference_end_ms"] = self.clock.ms()
        con.log("I", f"{RC}:493",
                "RSS after finishing text generation: 0.000000 MiB (0 if unsupported)")
        self.cur_pos += generated
        if self.cur_pos == seq_len:
            con.log("I", f"{RC}:499", f"Sequence length ({seq_len} tokens) reached!")
        st["prompt_tokens"], st["generated_tokens"] = n, generated
        self._report()
        if self.f["dump_logits_path"]:  # runner.cpp:save_logits, everything dumped so far
            try:
                Path(self.f["dump_logits_path"]).write_bytes(
                    b"".join(self.prefill_rows + self.decode_rows))
            except OSError:
                con.check(False, f"{RC}:81", "save_logits", "false",
                          "Error saving the dump logits file")

    def _prefill(self, tokens: list[int], ctx: int) -> int:
        """prompt_processor.cpp:PromptProcessor::prefill (AR-1 kv_forward calls in kv mode)."""
        ar, start, n = self.pp_ar, self.cur_pos, len(tokens)
        self.con.check(start + n <= ctx - ar, "prompt_processor.cpp:254", "prefill", PP_COND,
                       "The sequence length exceeds the maximum limit that the prompt processor "
                       "can handle.")
        iters = 1 + (n - 1) // ar
        self.con.log("I", "prompt_processor.cpp:267",
                     f"Prompt Processor: total {n} prompt tokens (AR-{ar} * {iters} iters)")
        for i in range(iters):
            rows = self._exec(KV if self.f["eval_mode"] == 0 else PREFILL,
                              tokens[i * ar:(i + 1) * ar], start + i * ar)
            if self.f["dump_logits_path"]:
                self.prefill_rows.append(np.ascontiguousarray(rows).tobytes())
        return self._sample(rows[(n - 1) % ar])

    def _step(self, cur: int, pos: int, out: list[bytes]) -> int:
        """One kv_forward call at ``pos``: dump, timed sampling, the piece to the output."""
        rows = self._exec(KV, [cur], pos)
        if self.f["dump_logits_path"]:
            self.decode_rows.append(np.ascontiguousarray(rows).tobytes())
        t0 = self.clock.ms()
        token = self._sample(rows[0])
        self.st["aggregate_sampling_time_ms"] += self.clock.ms() - t0
        out.append(bytes(self.backend.decode(cur, token)))
        return token

    def _end(self, where: str, message: str) -> None:
        self.con.out("\n")
        self.con.log("I", where, message)

    def _decode(self, cur: int, seq_len: int, ctx: int, out: list[bytes]) -> int:
        """token_generator.cpp:TokenGenerator::generate."""
        pos = start = self.cur_pos
        while pos < seq_len - 1:
            cur = self._step(cur, pos, out)
            pos += 1
            if cur in self.eos:
                self._end(f"{TG}:346", "\nReached to the end of generation")
                break
        if cur not in self.eos and pos >= seq_len - 1:
            self._end(f"{TG}:354", f"Warning: Generation stopped at seq_len limit ({seq_len}) "
                      "without reaching EOS token. Response may be incomplete.")
            self.con.log("I", f"{TG}:360", (
                f"- seq_len ({seq_len}) already equals compiled max_context_len ({ctx}). "
                "Consider recompiling with larger --max_context_len." if seq_len >= ctx else
                f"- seq_len ({seq_len}) is less than compiled max_context_len ({ctx}). "
                f"Consider increasing --seq_len (up to {ctx})."))
        return pos - start

    def _lookahead(self, cur: int, seq_len: int, ctx: int, out: list[bytes]) -> int:
        """lhd_token_generator.cpp:LhdTokenGenerator::generate, with no speculative hits."""
        pos = start = self.cur_pos
        if not self.lhd_ready:
            self.con.log("I", f"{LHD}:233", "Initialize Lookahead branch")
            self.lhd_ready = True
        while pos < seq_len - 1:
            cur = self._step(cur, pos, out)
            pos += 1
            if cur in self.eos:  # the verify loop's check, then the step's own
                self._end(f"{LHD}:357", "\nReached to the end of generation")
            if pos > ctx - self.tg_ar:
                self._end(f"{LHD}:387", "\nReached to the maximum sequence length")
                break
            if cur in self.eos:
                self._end(f"{LHD}:411", "\nReached to the end of generation")
                break
        self.con.log("I", f"{LHD}:415",
                     f"Lookahead Decoding: n_generated = {pos - start} / n_accept = 0")
        return pos - start

    def _report(self) -> None:
        """stats.h:print_report, then runner.cpp:print_performance_report."""
        st, log = self.st, self.con.log
        self.con.out(f"PyTorchObserver {observer_json(st)}\n")
        p, g = st["prompt_tokens"], st["generated_tokens"]
        total = st["inference_end_ms"] - st["inference_start_ms"]
        prompt_ms = st["prompt_eval_end_ms"] - st["inference_start_ms"]
        eval_ms = st["inference_end_ms"] - st["prompt_eval_end_ms"]
        load_s = (st["model_load_end_ms"] - st["model_load_start_ms"]) / 1000
        ttft_s = (st["first_token_ms"] - st["inference_start_ms"]) / 1000
        rate = "\t\t Rate: \t{:f} (tokens/second)"
        log("I", "stats.h:175", f"\tPrompt Tokens: {p}    Generated Tokens: {g}")
        log("I", "stats.h:181", f"\tModel Load Time:\t\t{load_s:f} (seconds)")
        log("I", "stats.h:188", f"\tTotal inference time:\t\t{total / 1000:f} (seconds)"
            + rate.format(_rate(g, total) if total > 0 else 0.0))
        log("I", "stats.h:197", f"\t\tPrompt evaluation:\t{prompt_ms / 1000:f} (seconds)"
            + rate.format(_rate(p, prompt_ms) if prompt_ms > 0 else 0.0))
        log("I", "stats.h:207", f"\t\tGenerated {g} tokens:\t{eval_ms / 1000:f} (seconds)"
            + rate.format(_rate(g, eval_ms) if eval_ms > 0 else 0.0))
        log("I", "stats.h:219", f"\tTime to first generated token:\t{ttft_s:f} (seconds)")
        log("I", "stats.h:225", f"\tSampling time over {p + g} tokens:\t"
            f"{st['aggregate_sampling_time_ms'] / 1000:f} (seconds)")
        speed = _rate(p, prompt_ms) if g == 0 else _rate(g, total)
        try:
            Path(self.f["performance_output_path"]).write_text(f"{speed:g}")
        except OSError:
            log("E", f"{RC}:62", "Error saving the inference speed file")


def run(argv: list[str], factory: Callable[[LoadRequest], Any] | None = None,
        stdout: IO[str] | None = None, stderr: IO[str] | None = None,
        scale: float | None = None) -> int:
    """qnn_llama_runner.cpp:main and start_runner; the exit code (134 where upstream aborts)."""
    con = Console(stdout or sys.stdout, stderr or sys.stderr)
    prompts = [argv[i + 1] for i in range(len(argv) - 1) if argv[i] == "--prompt"]  # CollectPrompts
    try:
        flags, explicit, _ = common.parse_gflags(argv, FLAGS)
    except common.FlagError as e:
        con.stderr.write(f"{e}\n")
        return 1
    if flags["attention_sink_rope_path"]:
        con.stderr.write("llama_runner_standin: attention sink is not modelled\n")
        return common.LIMIT_EXIT
    if factory is None:
        if not os.environ.get(BACKEND_ENV):
            con.stderr.write(f"llama_runner_standin: {BACKEND_ENV} is not set\n")
            return common.LIMIT_EXIT
        factory = common.load_backend(os.environ[BACKEND_ENV])
    try:
        con.check(not {"prompt", "tokenized_prompt"} <= explicit, "qnn_llama_runner.cpp:293",
                  "main", "false", "Only provide prompt or tokenized_input but not both.")
        con.check("dump_logits_path" not in explicit or flags["eval_mode"] == 0,
                  "qnn_llama_runner.cpp:297", "main", "false",
                  "Only TokenGenerator(kv) mode is supported to dump all logits.")
        runner = Runner(flags, factory, con, Clock(common.time_scale(scale)))
        loaded = runner.ensure_loaded()  # start_runner: runner.get_decoder_model_version()
        output: Path | None = Path(flags["output_path"])
        try:
            Path(flags["output_path"]).write_bytes(b"")  # std::ofstream fout(FLAGS_output_path)
        except OSError:
            output = None
        out: list[bytes] = []
        if "tokenized_prompt" in explicit:  # load errors are only returned on this path
            runner.generate(flags["tokenized_prompt"], True, out)
        else:
            for _ in range(flags["num_iters"]):
                for prompt in prompts:
                    con.check(loaded, "result.h:170", "CheckOk", "hasValue_", None)
                    runner.generate(format_prompt(flags, prompt), False, out)
        if output is not None:
            output.write_bytes(b"".join(out))
    except Abort:
        con.stderr.flush()
        return common.ABORT_EXIT
    con.flush()
    return 0


def write_launcher(path: Path, backend: str = "tests.support.standin_backends:toy_backend",
                   env: dict[str, str] | None = None, python: str = sys.executable) -> Path:
    """An executable ``qnn_llama_runner`` (push it to the fake device) running this stand-in."""
    return common.write_launcher(path, "tests.support.llama_runner_standin",
                                 {BACKEND_ENV: backend, **(env or {})}, python)


if __name__ == "__main__":
    common.exit_like_upstream(run(sys.argv[1:]))
