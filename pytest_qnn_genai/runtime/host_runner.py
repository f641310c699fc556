"""A Python driver for static LLM .pte files, mirroring ExecuTorch's C++ ``qnn_llama_runner``.

It reproduces the runner's smart-mask mode (``runner/{prompt_processor,token_generator,
kv_manager}.cpp``): the prompt goes through ``prefill_forward`` (AR-N) in chunks of N tokens, then
``kv_forward`` (AR-1) generates one token per call. A kv-mode program (no ``prefill_forward``)
takes its prompt through ``kv_forward`` one token per call, as the runner's ``--eval_mode 0``.
Every shape and constant is read from the program (constant methods and IO tensor metadata), so
any compatible .pte runs, including the one the legacy ``llama.py`` flow writes.

Inputs, in order: tokens, attention mask, positions, every K cache, every V cache. The mask row has
``ctx`` columns: ``[0, ctx - ar)`` are cache slots indexed by absolute position, the last ``ar``
columns are the new tokens (causal); 65535 attends, 0 masks. After a call the first ``n_update``
new K/V entries are copied into slot ``n_past`` and those mask columns open. Keeping each cache as
``ctx`` slots and feeding the first ``ctx - ar`` of them is the runner's prefill→decode re-slicing
(96 → 127 slots for ctx 128, prefill AR 32).

The QNN libraries must already be loadable in this process (``pytest_qnn_genai.sdk.activate``).
Measured hazard: after ``activate`` (an RTLD_GLOBAL preload), importing ``sentencepiece`` and only
then ``executorch.runtime``/``torchao`` for the first time segfaults; import ``executorch.runtime``
before activating, or before sentencepiece.
"""
from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pytest_qnn_genai.hybrid import DECODE, PREFILL
from pytest_qnn_genai.runtime import programs
from pytest_qnn_genai.runtime.programs import MethodMeta, Program
from pytest_qnn_genai.runtime.pte_info import constant_values, torch_dtype
from pytest_qnn_genai.runtime.result import PerfStats, RunResult
from pytest_qnn_genai.targets import EMULATOR

REQUIRED_CONSTANTS = ("get_max_seq_len", "get_max_context_len", "get_vocab_size",
                      "get_logits_scale", "get_logits_zero_point", "get_eos_id")


class HybridRunnerError(RuntimeError):
    """The program is not a runnable hybrid LLM, or a request exceeds its shapes."""


@dataclass(frozen=True)
class MethodIO:
    """The IO layout of one AR-N method, read from its metadata."""

    name: str
    ar_len: int
    token_dtype: torch.dtype
    mask_shape: tuple[int, ...]
    mask_dtype: torch.dtype
    pos_dtype: torch.dtype
    k_shapes: tuple[tuple[int, ...], ...]  # cache inputs: [..., head_dim, ctx - ar]
    v_shapes: tuple[tuple[int, ...], ...]  # cache inputs: [..., ctx - ar, head_dim]
    kv_dtype: torch.dtype


def _sizes(meta: MethodMeta, i: int, output: bool = False) -> tuple[int, ...]:
    ti = meta.output_tensor_meta(i) if output else meta.input_tensor_meta(i)
    return tuple(int(s) for s in ti.sizes())


def _dtype(meta: MethodMeta, i: int) -> torch.dtype:
    return torch_dtype(meta.input_tensor_meta(i).dtype())


def read_method_io(program: Program, name: str, ctx: int, vocab: int) -> MethodIO:
    """Check that ``name`` has the smart-mask hybrid layout and return its IO description."""
    if name not in program.method_names:
        raise HybridRunnerError(f"program has no method {name!r} (methods: "
                                f"{', '.join(sorted(program.method_names))})")
    meta = program.metadata(name)
    n_in, n_out = meta.num_inputs(), meta.num_outputs()
    if n_in < 5 or (n_in - 3) % 2 or n_out != n_in - 2:
        raise HybridRunnerError(f"{name}: {n_in} inputs / {n_out} outputs is not the hybrid layout "
                                "(tokens, mask, positions, K caches, V caches -> logits, K, V)")
    tokens = _sizes(meta, 0)
    ar = tokens[-1]
    n_cache = (n_in - 3) // 2
    mask, pos = _sizes(meta, 1), _sizes(meta, 2)
    k_in = tuple(_sizes(meta, 3 + i) for i in range(n_cache))
    v_in = tuple(_sizes(meta, 3 + n_cache + i) for i in range(n_cache))
    k_out = [_sizes(meta, 1 + i, output=True) for i in range(n_cache)]
    v_out = [_sizes(meta, 1 + n_cache + i, output=True) for i in range(n_cache)]
    logits = _sizes(meta, 0, output=True)
    problems = []
    if mask[-2:] != (ar, ctx):
        problems.append(f"mask {list(mask)} is not [..., {ar}, {ctx}]")
    if pos[-1] != ar:
        problems.append(f"positions {list(pos)} do not end in {ar}")
    if logits[-2:] != (ar, vocab):
        problems.append(f"logits {list(logits)} are not [..., {ar}, {vocab}]")
    if any(k[-1] != ctx - ar for k in k_in) or any(v[-2] != ctx - ar for v in v_in):
        problems.append(f"caches {list(k_in[0])}/{list(v_in[0])} do not hold ctx - ar = "
                        f"{ctx - ar} slots (not a smart-mask program?)")
    if any(k[-1] != ar for k in k_out) or any(v[-2] != ar for v in v_out):
        problems.append("new K/V outputs do not hold ar entries")
    kv_dtypes = {_dtype(meta, 3 + i) for i in range(2 * n_cache)}
    if len(kv_dtypes) != 1:
        problems.append(f"mixed cache dtypes {sorted(map(str, kv_dtypes))}")
    mask_dtype = _dtype(meta, 1)
    if mask_dtype.is_floating_point:
        problems.append(f"mask dtype {mask_dtype} is not an integer (quantized) mask")
    if problems:
        raise HybridRunnerError(f"{name}: " + "; ".join(problems))
    return MethodIO(name, ar, _dtype(meta, 0), mask, mask_dtype, _dtype(meta, 2), k_in, v_in,
                    kv_dtypes.pop())


class HybridRunner:
    """Greedy generation with a hybrid (prefill AR-N + decode AR-1) or kv-mode (decode AR-1
    alone) .pte on the host runtime.

    Loaded programs are shared per content and kept for the life of the process (``programs``);
    ``load_s`` is the time the first load of the file took.
    """

    def __init__(self, pte_path: Path | str) -> None:
        self.pte_path = Path(pte_path)
        entry, self.reused_program = programs.load(self.pte_path, ())
        self._program = entry.program
        self.constants = constant_values(self._program)
        missing = [c for c in REQUIRED_CONSTANTS if c not in self.constants]
        if missing:
            raise HybridRunnerError(f"{self.pte_path.name}: missing constant method(s) "
                                    f"{', '.join(missing)}: not an ExecuTorch LLM program")
        c = self.constants
        self.max_seq_len = int(c["get_max_seq_len"])
        self.context_len = int(c["get_max_context_len"])
        self.vocab_size = int(c["get_vocab_size"])
        eos = c["get_eos_id"]
        self.eos_ids = frozenset(int(e) for e in (eos if isinstance(eos, list) else [eos]))
        self.logits_scale = float(c["get_logits_scale"])
        self.logits_zero_point = int(c["get_logits_zero_point"])
        self.decode = read_method_io(self._program, DECODE, self.context_len,
                                     self.vocab_size)
        self.prefill = (read_method_io(self._program, PREFILL, self.context_len, self.vocab_size)
                        if PREFILL in self._program.method_names else self.decode)
        if self.decode.ar_len != 1:
            raise HybridRunnerError(f"{DECODE} has AR {self.decode.ar_len}; only AR-1 "
                                    "decoding (the runner's hybrid mode) is supported")
        if (self.prefill.k_shapes[0][:-1], self.prefill.kv_dtype) != (
                self.decode.k_shapes[0][:-1], self.decode.kv_dtype):
            raise HybridRunnerError("prefill and decode caches differ in layout or dtype")
        entry, _ = programs.load(self.pte_path, tuple(dict.fromkeys((self.prefill.name,
                                                                     self.decode.name))))
        self._methods = entry.methods
        self.load_s = entry.program_s + entry.methods_s
        self._base_masks = {io.name: self._causal_mask(io) for io in (self.prefill, self.decode)}
        self._k: list[torch.Tensor] = []
        self._v: list[torch.Tensor] = []

    @property
    def prefill_ar_len(self) -> int:
        return self.prefill.ar_len

    @property
    def max_prompt_len(self) -> int:
        """Longest prompt the prompt processor accepts (``ctx - prefill AR``, as the C++ runner's
        prompt processor; kv mode: ``ctx - 1``; the runner never reads ``get_max_seq_len``)."""
        return self.context_len - self.prefill.ar_len

    def _causal_mask(self, io: MethodIO) -> torch.Tensor:
        """The mask with only the causal new-token block open (int32: torch lacks uint16 fills)."""
        mask = torch.zeros(io.mask_shape, dtype=torch.int32)
        rows = mask.view(-1, io.ar_len, self.context_len)
        tril = torch.tril(torch.ones(io.ar_len, io.ar_len, dtype=torch.bool))
        rows[:, :, self.context_len - io.ar_len:][:, tril] = torch.iinfo(io.mask_dtype).max
        return mask

    def _reset(self) -> None:
        io = self.prefill
        self._k = [torch.zeros(s[:-1] + (self.context_len,), dtype=io.kv_dtype) for s in io.k_shapes]
        self._v = [torch.zeros(s[:-2] + (self.context_len, s[-1]), dtype=io.kv_dtype)
                   for s in io.v_shapes]

    def _inputs(self, io: MethodIO, tokens: Sequence[int], n_past: int) -> list[torch.Tensor]:
        tok = torch.zeros(io.ar_len, dtype=io.token_dtype)
        tok[:len(tokens)] = torch.tensor(list(tokens), dtype=io.token_dtype)
        mask = self._base_masks[io.name].clone()
        mask.view(-1, io.ar_len, self.context_len)[:, :, :n_past] = torch.iinfo(io.mask_dtype).max
        mask = mask.to(io.mask_dtype)
        pos = torch.arange(n_past, n_past + io.ar_len, dtype=io.pos_dtype)
        slots = self.context_len - io.ar_len
        return ([tok.view(1, io.ar_len), mask, pos.view(1, io.ar_len)]
                + [k[..., :slots].contiguous() for k in self._k]
                + [v[..., :slots, :].contiguous() for v in self._v])

    def _write_cache(self, outputs: Sequence[torch.Tensor], n_past: int, n_update: int) -> None:
        """Smart-mask update: copy the first ``n_update`` new K/V entries into slot ``n_past``."""
        n = len(self._k)
        for k, new in zip(self._k, outputs[1:1 + n]):
            k[..., n_past:n_past + n_update] = new[..., :n_update]
        for v, new in zip(self._v, outputs[1 + n:1 + 2 * n]):
            v[..., n_past:n_past + n_update, :] = new[..., :n_update, :]

    def _step(self, io: MethodIO, tokens: Sequence[int], n_past: int,
              times: list[float]) -> torch.Tensor:
        """One call of ``io``'s method; returns its raw logits ``[ar, vocab]``."""
        inputs = self._inputs(io, tokens, n_past)
        start = time.perf_counter()
        outputs = self._methods[io.name].execute(inputs)
        times.append(time.perf_counter() - start)
        self._write_cache(outputs, n_past, len(tokens))
        logits: torch.Tensor = outputs[0]
        return logits.reshape(io.ar_len, self.vocab_size)

    def decode_calls(self, tokens: Sequence[int],
                     ) -> Iterator[tuple[list[torch.Tensor], list[torch.Tensor]]]:
        """``tokens`` fed one per call of the decode graph from an empty cache (a kv-mode prompt
        pass): each call's inputs (quantized, as the program takes them) and outputs, its K/V
        written into the cache before the next call."""
        self._reset()
        for n_past, token in enumerate(tokens):
            inputs = self._inputs(self.decode, [int(token)], n_past)
            outputs = list(self._methods[self.decode.name].execute(inputs))
            self._write_cache(outputs, n_past, 1)
            yield inputs, outputs

    def _check_request(self, prompt_tokens: Sequence[int], max_new_tokens: int) -> None:
        if not prompt_tokens:
            raise HybridRunnerError("the prompt is empty (it needs at least the BOS token)")
        if max_new_tokens < 1:
            raise HybridRunnerError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        bad = [t for t in prompt_tokens if not 0 <= int(t) < self.vocab_size]
        if bad:
            raise HybridRunnerError(f"prompt token(s) {bad[:5]} outside the vocabulary "
                                    f"[0, {self.vocab_size})")
        if len(prompt_tokens) > self.max_prompt_len:
            raise HybridRunnerError(
                f"prompt of {len(prompt_tokens)} tokens exceeds the {self.max_prompt_len} this "
                f"program's prompt processor accepts (context {self.context_len} - prefill AR "
                f"{self.prefill.ar_len})")

    def prompt_logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Dequantized logits (float32 ``[len(tokens), vocab]``) of every position of ``tokens``
        fed as one prompt, in prefill chunks as the runner's prompt processor feeds it: row i is
        the distribution of the token after ``tokens[i]`` (teacher forcing; perplexity)."""
        self._check_request(tokens, 1)
        self._reset()
        rows: list[torch.Tensor] = []
        times: list[float] = []
        ar = self.prefill.ar_len
        for start in range(0, len(tokens), ar):
            chunk = [int(t) for t in tokens[start:start + ar]]
            rows.append(self._step(self.prefill, chunk, start, times)[:len(chunk)])
        raw = torch.cat(rows).to(torch.float32)
        return ((raw - self.logits_zero_point) * self.logits_scale).numpy().astype(np.float32)

    def generate(self, prompt_tokens: list[int], max_new_tokens: int,
                 stop_at_eos: bool = True, eos_ids: Collection[int] | None = None) -> RunResult:
        """Greedy generation: argmax of the raw quantized logits, as the C++ runner does.

        Prompts longer than the prefill AR run as several prefill chunks. Generation stops after
        ``max_new_tokens`` tokens, at an EOS token from a decode step (when ``stop_at_eos``; an
        EOS from the prompt pass does not stop the C++ runner either) or when the position
        reaches ``context - 1``, as qnn_llama_runner stops (token_generator.cpp: ``pos < seq_len
        - 1`` with ``--seq_len`` clamped to the compiled context; runner.cpp never reads
        ``get_max_seq_len``, so neither does this). The EOS tokens are ``eos_ids`` (the
        tokenizer's, as the C++ runner takes them:
        :func:`~pytest_qnn_genai.runtime.tokenizer.stop_ids`), else the program's ``get_eos_id``.
        ``logits`` are the dequantized rows ``(q - zero_point) * scale`` (float32
        ``[len(tokens), vocab]``) that produced each token.

        Perf figures follow ExecuTorch's ``PyTorchObserver`` stats (extension/llm/runner/stats.h),
        with ``inference_start`` = the call of this method (prompt already tokenized):

        - ``model_load_s``: program load + loading both methods (constant methods excluded);
        - ``prefill_tok_s``: prompt tokens / (prompt_eval_end - inference_start), where
          prompt_eval_end is right after the first token's argmax (as in qnn_llama_runner);
        - ``decode_tok_s``: (generated - 1) / (inference_end - prompt_eval_end) — the decode
          calls; equals the observer's rate for qnn_llama_runner, which counts only decoded tokens;
        - ``ttft_s``: first_token - inference_start (load excluded; = the prefill time here).

        ``extra["execute_s"]`` holds the raw ``Method.execute`` time of every call per method,
        ``extra["runner_overhead_s"]`` the rest of prefill + decode time (inputs, KV copies).
        """
        gen = self.start(prompt_tokens, max_new_tokens, stop_at_eos, eos_ids)
        while gen.step():
            pass
        return gen.result()

    def start(self, prompt_tokens: Sequence[int], max_new_tokens: int, stop_at_eos: bool = True,
              eos_ids: Collection[int] | None = None) -> Generation:
        """A :class:`Generation` of :meth:`generate`'s request, advanced one call at a time."""
        self._check_request(prompt_tokens, max_new_tokens)
        stops = self.eos_ids if eos_ids is None else frozenset(int(e) for e in eos_ids)
        return Generation(self, [int(t) for t in prompt_tokens], max_new_tokens, stop_at_eos,
                          stops)


class Generation:
    """One greedy generation of a :class:`HybridRunner`, advanced one method call at a time.

    :meth:`HybridRunner.generate` runs it to the end; the work probe advances one call at a time
    (:mod:`pytest_qnn_genai.runtime.work_probe`), each call counted on its own.
    The first :meth:`step` resets the runner's KV caches: one generation per runner at a time.
    """

    def __init__(self, runner: HybridRunner, prompt: list[int], max_new_tokens: int,
                 stop_at_eos: bool, stops: frozenset[int]) -> None:
        self.runner = runner
        self.prompt = prompt
        self.max_new_tokens = max_new_tokens
        self.stop_at_eos = stop_at_eos
        self.stops = stops
        self.times: dict[str, list[float]] = {runner.prefill.name: [], runner.decode.name: []}
        self.raw: list[torch.Tensor] = []
        self.tokens: list[int] = []
        self.n_past = 0
        self.chunks = 0
        self.stop = "max_new_tokens"
        self.done = False
        self._start = self._first = self._end = 0.0

    def step(self) -> bool:
        """Make the next call (a prefill chunk or one decode step); False once finished."""
        if self.done:
            return False
        r = self.runner
        if not self.tokens:
            if self.chunks == 0:
                r._reset()
                self._start = time.perf_counter()
            ar = r.prefill.ar_len
            chunk = self.prompt[self.chunks * ar:(self.chunks + 1) * ar]
            logits = r._step(r.prefill, chunk, self.n_past, self.times[r.prefill.name])
            self.n_past += len(chunk)
            self.chunks += 1
            if self.chunks * ar < len(self.prompt):
                return True
            self.raw.append(logits[len(chunk) - 1])
            self.tokens.append(int(torch.argmax(self.raw[-1].to(torch.int32))))
            self._first = time.perf_counter()
        else:
            logits = r._step(r.decode, self.tokens[-1:], self.n_past, self.times[r.decode.name])
            self.n_past += 1
            self.raw.append(logits[0])
            self.tokens.append(int(torch.argmax(self.raw[-1].to(torch.int32))))
        if self.stop_at_eos and len(self.tokens) > 1 and self.tokens[-1] in self.stops:
            self.stop = "eos"
        elif len(self.tokens) >= self.max_new_tokens:
            self.stop = "max_new_tokens"
        elif self.n_past >= r.context_len - 1:
            self.stop = "context"
        else:
            return True
        self._end = time.perf_counter()
        self.done = True
        return False

    def result(self) -> RunResult:
        """The finished generation (see :meth:`HybridRunner.generate`)."""
        if not self.done:
            raise HybridRunnerError("the generation has not finished")
        r, tokens = self.runner, self.tokens
        deq = ((torch.stack(self.raw).to(torch.float32) - r.logits_zero_point)
               * r.logits_scale).numpy().astype(np.float32)
        prefill_s, decode_s = self._first - self._start, self._end - self._first
        perf = PerfStats(
            prompt_tokens=len(self.prompt), generated_tokens=len(tokens),
            model_load_s=r.load_s, prefill_tok_s=len(self.prompt) / prefill_s,
            decode_tok_s=(len(tokens) - 1) / decode_s if len(tokens) > 1 else 0.0,
            ttft_s=prefill_s)
        executed = sum(sum(t) for t in self.times.values())
        extra = {"execute_s": self.times, "prefill_s": prefill_s, "decode_s": decode_s,
                 "runner_overhead_s": prefill_s + decode_s - executed,
                 "prefill_chunks": self.chunks, "prefill_ar_len": r.prefill.ar_len,
                 "stop_reason": self.stop, "pte": str(r.pte_path),
                 "program_reused": r.reused_program}
        return RunResult(prompt_tokens=self.prompt, tokens=list(tokens), text="", perf=perf,
                         logits=deq, device=EMULATOR, extra=extra)
