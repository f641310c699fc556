"""Backends behind the runner stand-ins: what a "phone" computes, never how a runner behaves.

The runner rules live in :mod:`tests.support.llama_runner_standin` and
:mod:`tests.support.executor_runner_standin`; a backend only tokenizes, decodes pieces and executes
methods. A llama backend has ``context_len``, ``eos_id``, ``ar_len(method)``, ``encode(text,
n_bos) -> ids``, ``decode(prev, token) -> bytes`` and ``execute(method, tokens, start_pos) -> raw
logits [ar_len, vocab]`` (method ``prefill_forward`` or ``kv_forward``; it appends
``len(tokens)`` KV entries at ``start_pos``); optional ``simulated_load_s`` (reported instead of
the construction's wall time) and ``simulated_cost_s(method, n_tokens)`` (added per call). An
executor backend has ``method_name(index)``, ``input_specs(method)`` (loads the method) and
``execute(method, inputs)``. Name one with ``module:function``:

* ``tests.support.standin_backends:toy_backend`` — :class:`ToyBackend`, model-free and
  deterministic (its fields as JSON in ``$QNN_GENAI_STANDIN_TOY``): seconds, no QNN.
* ``tests.support.standin_backends:emulator_backend`` — :class:`EmulatorBackend`, the pushed
  hybrid .pte on the x86 HTP emulator (the project's ``HybridRunner``, ``$QNN_SDK_ROOT`` set by
  the launcher) with the tokenizer file read as the real runner reads it
  (:func:`load_runner_tokenizer`: a Hugging Face ``tokenizer.json``, a tiktoken file or a
  llama2.c ``tokenizer.bin``).
* ``tests.support.standin_backends:executorch_backend`` — :class:`ExecutorchBackend`, any .pte
  through ``executorch.runtime`` for ``qnn_executor_runner`` (the emulator when ``$QNN_SDK_ROOT``
  is set).

Measured hazard: the x86 HTP simulator refuses the weight-shared context of a phone LLM build
(prefill and kv graphs sharing weights: "Shared weights buffer isn't supported on this platform",
context creation error 1000, after which executorch's ``load_method`` segfaults: so
:class:`EmulatorBackend` refuses such a program up front, a load failure as upstream's runner
sees one), so a loopback phone runs the emulator's LLM builds (it reports an x86_64 ABI:
``Pipeline.build_target``) and a phone LLM build fails to load on it, as it would on a
device that cannot run it; a one-graph phone build (the smoke block) loads and runs.
"""
from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai.untyped import Upstream
from tests.support.standin_plumbing import SCALAR_TYPES, activate_qnn_sdk

if TYPE_CHECKING:
    from tests.support.llama_runner_standin import LoadRequest

TOY_ENV = "QNN_GENAI_STANDIN_TOY"
PREFILL = "prefill_forward"
TOY = "tests.support.standin_backends:toy_backend"
EMULATOR = "tests.support.standin_backends:emulator_backend"
EXECUTORCH = "tests.support.standin_backends:executorch_backend"
_BYTE_PIECE = re.compile(rb"^<0x([0-9A-Fa-f]{2})>$")


@dataclass(frozen=True)
class Llama2cVocab:
    """A llama2.c ``tokenizer.bin``: pieces (bytes, SentencePiece '▁' already a space), scores."""

    pieces: list[bytes]
    scores: list[float]
    bos: int
    eos: int

    @classmethod
    def load(cls, path: Path | str) -> Llama2cVocab:
        data = Path(path).read_bytes()
        n_words, bos, eos, _max_len = struct.unpack_from("<IIII", data, 0)
        offset, pieces, scores = 16, [], []
        for _ in range(n_words):
            score, length = struct.unpack_from("<fI", data, offset)
            offset += 8
            pieces.append(data[offset:offset + length])
            scores.append(score)
            offset += length
        return cls(pieces, scores, bos, eos)

    def encode(self, text: str) -> list[int]:
        """BOS + the BPE ids of ``text`` (dummy-prefix space, byte fallback, best-score merges),
        as pytorch-tokenizers' ``Llama2cTokenizer::encode``."""
        lookup = {p: i for i, p in enumerate(self.pieces)}
        ids = [self.bos]
        if text and b" " in lookup:
            ids.append(lookup[b" "])
        for ch in text:
            raw = ch.encode("utf-8")
            if raw in lookup:
                ids.append(lookup[raw])
            else:
                ids.extend(b + 3 for b in raw)  # <0x00>.. follow <unk>, <s>, </s>
        body = ids[1:]
        while True:
            best, best_i, best_id = -1e10, -1, -1
            for i in range(len(body) - 1):
                merged = lookup.get(self.pieces[body[i]] + self.pieces[body[i + 1]])
                if merged is not None and self.scores[merged] > best:
                    best, best_i, best_id = self.scores[merged], i, merged
            if best_i < 0:
                break
            body[best_i:best_i + 2] = [best_id]
        return ids[:1] + body

    def piece_bytes(self, prev: int, token: int) -> bytes:
        """What the runner prints for ``token`` after ``prev`` (raw bytes for <0xNN> pieces)."""
        piece = self.pieces[token]
        if prev == self.bos and piece.startswith(b" "):
            piece = piece[1:]
        match = _BYTE_PIECE.match(piece)
        return bytes([int(match.group(1), 16)]) if match else piece


@dataclass(frozen=True)
class TiktokenVocab:
    """A tiktoken ``tokenizer.model`` as the C++ ``tokenizers::Tiktoken()`` reads it: the default
    (Llama 3) special tokens after the ranks, BOS = special 0 (``<|begin_of_text|>``), EOS =
    special 1 (``<|end_of_text|>``), special tokens matched in encoded text."""

    tokenizer: Upstream  # pytorch_tokenizers.TiktokenTokenizer (the same default special tokens)

    @classmethod
    def load(cls, path: Path | str) -> TiktokenVocab:
        from pytorch_tokenizers import TiktokenTokenizer

        return cls(TiktokenTokenizer(str(path)))

    @property
    def bos(self) -> int:
        return int(self.tokenizer.bos_id)

    @property
    def eos(self) -> int:
        return int(self.tokenizer.eos_id)

    def encode(self, text: str) -> list[int]:
        return [self.bos] + list(self.tokenizer.encode(text, bos=False, eos=False,
                                                       allowed_special="all"))

    def piece_bytes(self, prev: int, token: int) -> bytes:
        """``Tiktoken::decode(prev, token)``: the token's bytes (a special token's text)."""
        return bytes(self.tokenizer.model.decode_single_token_bytes(token))


@dataclass(frozen=True)
class HuggingFaceJsonVocab:
    """A Hugging Face ``tokenizer.json`` through the runner's own C++ ``HFTokenizer``
    (pytorch_tokenizers' ``CppHFTokenizer`` binding, loaded from the file as the runner loads
    ``--tokenizer_path``) for the vocabulary; BOS/EOS as the runners' own ``HFTokenizer``
    (ExecuTorch 1.5.1's extension/llm/tokenizers, ``HFTokenizer::load`` without a config)
    guesses them, which the wheel's 1.5 binding does not (it leaves 0), and
    ``BPETokenizerBase::encode(text, n_bos, 0)`` puts n_bos BOS ids first."""

    cpp: Upstream  # pytorch_tokenizers.CppHFTokenizer
    pieces: dict[int, bytes]
    added: dict[str, int]  # the file's added_tokens (HFTokenizer's special_token_map_)

    @classmethod
    def load(cls, path: Path | str) -> HuggingFaceJsonVocab:
        from pytorch_tokenizers import CppHFTokenizer
        from tokenizers import Tokenizer

        cpp = CppHFTokenizer()
        cpp.load(str(path))
        tok = Tokenizer.from_file(str(path))
        unicode_to_byte = {c: b for b, c in _byte_to_unicode().items()}
        added = {t.content: i for i, t in tok.get_added_tokens_decoder().items()}
        pieces = {i: (p.encode() if p in added else bytes(unicode_to_byte[c] for c in p))
                  for p, i in tok.get_vocab(with_added_tokens=True).items()}
        return cls(cpp, pieces, added)

    @property
    def bos(self) -> int:
        return _load_guess(self.added)[0]

    @property
    def eos(self) -> int:
        return _load_guess(self.added)[1]

    def encode_prompt(self, text: str, n_bos: int) -> list[int]:
        return [self.bos] * n_bos + list(self.cpp.encode(text, 0, 0))

    def piece_bytes(self, prev: int, token: int) -> bytes:
        """The token's bytes (ByteLevel undone; an added token's text)."""
        return self.pieces[token]


def _load_guess(added: dict[str, int]) -> tuple[int, int]:
    """hf_tokenizer.cpp ``HFTokenizer::load``, no config: candidates among the special tokens
    ("bos"/"begin", "eos"/"end"), narrowed to those with "text" when several; one found stands
    for both; none leaves the initial 0."""
    found = []
    for words in (("bos", "begin"), ("eos", "end")):
        cands = [(t, i) for t, i in added.items() if words[0] in t or words[1] in t]
        if len(cands) > 1:
            cands = [(t, i) for t, i in cands if "text" in t]
        found.append(cands[0][1] if len(cands) == 1 else None)
    bos, eos = found
    if bos is not None and eos is None:
        eos = bos
    elif bos is None and eos is not None:
        bos = eos
    return (bos or 0), (eos or 0)


def _byte_to_unicode() -> dict[int, str]:
    from pytest_qnn_genai.models.bpe import byte_to_unicode

    return byte_to_unicode()


def load_runner_tokenizer(path: Path | str) -> Llama2cVocab | TiktokenVocab | HuggingFaceJsonVocab:
    """``--tokenizer_path`` as qnn_llama_runner loads it (runner.cpp ``Runner::load`` ->
    extension/llm/runner/llm_runner_helper.cpp ``load_tokenizer``: HF json, then tiktoken, then
    SentencePiece, then llama2.c BPE, the first that loads). The stand-in reads the three formats
    the project's cases ship to a phone; a SentencePiece file is an error it names."""
    data = Path(path).read_bytes()
    try:
        json.loads(data)
    except ValueError:
        pass
    else:
        return HuggingFaceJsonVocab.load(path)
    try:
        return TiktokenVocab.load(path)
    except ValueError:  # a line that is not "base64 rank": not a tiktoken file
        pass
    if data[:1] == b"\n":  # a SentencePiece ModelProto starts with field 1 (pieces)
        raise RuntimeError(f"{path}: a SentencePiece model (not read by this stand-in)")
    return Llama2cVocab.load(path)


class EmulatorBackend:
    """The project's x86-emulator HybridRunner (hybrid .pte, AR-1 kv_forward) + the runner's
    tokenizer (:func:`load_runner_tokenizer`)."""

    def __init__(self, request: LoadRequest) -> None:
        from pytest_qnn_genai.runtime.pte_info import compile_options

        options = compile_options(request.model_path)
        if options["backend_options"]["htp_options"]["use_weight_sharing"]:
            # measured: QNN refuses the context and executorch's load_method then segfaults
            raise RuntimeError("the x86 HTP simulator cannot create a weight-shared context "
                               "(QNN: Shared weights buffer isn't supported on this platform)")
        activate_qnn_sdk()
        from pytest_qnn_genai.runtime.host_runner import HybridRunner

        self.vocab = load_runner_tokenizer(request.tokenizer_path)
        self.runner = HybridRunner(request.model_path)
        self.runner._reset()  # empty KV caches; each _step appends at its n_past
        self._io = {io.name: io for io in (self.runner.prefill, self.runner.decode)}
        self.context_len, self.eos_id = self.runner.context_len, self.vocab.eos
        self.simulated_load_s = self.runner.load_s  # program + methods, not imports/activation

    def ar_len(self, method: str) -> int:
        return self._io[method].ar_len

    def encode(self, text: str, n_bos: int) -> list[int]:
        if isinstance(self.vocab, HuggingFaceJsonVocab):  # bos as the file's post-processor says
            return self.vocab.encode_prompt(text, n_bos)
        return [self.vocab.bos] * n_bos + self.vocab.encode(text)[1:]

    def decode(self, prev: int, token: int) -> bytes:
        return self.vocab.piece_bytes(prev, token)

    def execute(self, method: str, tokens: list[int], start_pos: int) -> np.ndarray:
        return self.runner._step(self._io[method], tokens, start_pos, []).numpy()


def emulator_backend(request: LoadRequest) -> EmulatorBackend:
    """``$QNN_GENAI_STANDIN_BACKEND=tests.support.standin_backends:emulator_backend``."""
    return EmulatorBackend(request)


@dataclass
class ToyBackend:
    """Model-free and deterministic: ids 0 <unk>, 1 <s>, 2 </s>; a word w encodes to
    3 + len(w) % (vocab - 3); the row of position p peaks at EOS when p is in ``eos_at``, else at
    3 + p % (vocab - 3); pieces are " t<id>" (no leading space after BOS) and "</s>".
    ``prefill_shift`` moves the peaks of ``prefill_forward`` rows: a program whose two graphs
    disagree (hybrid mode then generates other tokens than kv mode)."""

    context_len: int = 128
    prefill_ar: int = 32
    kv_ar: int = 1
    vocab: int = 64
    eos_at: tuple[int, ...] = ()
    dtype: str = "uint16"
    simulated_load_s: float = 0.0
    prefill_call_s: float = 0.0
    kv_call_s: float = 0.0
    bos_id: int = 1
    eos_id: int = 2
    prefill_shift: int = 0
    calls: list[tuple[str, int, int]] = field(default_factory=list)

    def ar_len(self, method: str) -> int:
        return self.prefill_ar if method == PREFILL else self.kv_ar

    def encode(self, text: str, n_bos: int) -> list[int]:
        return [self.bos_id] * n_bos + [3 + len(w) % (self.vocab - 3) for w in text.split()]

    def decode(self, prev: int, token: int) -> bytes:
        piece = b"</s>" if token == self.eos_id else f" t{token}".encode()
        return piece[1:] if prev == self.bos_id and piece.startswith(b" ") else piece

    def predicted(self, pos: int) -> int:
        return self.eos_id if pos in self.eos_at else 3 + pos % (self.vocab - 3)

    def execute(self, method: str, tokens: list[int], start_pos: int) -> np.ndarray:
        self.calls.append((method, len(tokens), start_pos))
        rows = np.full((self.ar_len(method), self.vocab), 100, dtype=self.dtype)
        shift = self.prefill_shift if method == PREFILL else 0
        for i in range(rows.shape[0]):
            rows[i, self.predicted(start_pos + i + shift)] = 60000
        return rows

    def simulated_cost_s(self, method: str, n_tokens: int) -> float:
        return self.prefill_call_s if method == PREFILL else self.kv_call_s


def toy_backend(request: LoadRequest) -> ToyBackend:
    """A :class:`ToyBackend` with the fields given as JSON in ``$QNN_GENAI_STANDIN_TOY``."""
    config = json.loads(os.environ.get(TOY_ENV) or "{}")
    config["eos_at"] = tuple(config.get("eos_at", ()))
    return ToyBackend(**config)


class ExecutorchBackend:
    """A .pte through ``executorch.runtime`` (QNN delegates on the x86 emulator)."""

    def __init__(self, model_path: str) -> None:
        if os.environ.get("QNN_SDK_ROOT"):
            activate_qnn_sdk()
        from executorch.runtime import Runtime

        self.program = Runtime.get().load_program(Path(model_path))

    def method_name(self, index: int) -> str | None:
        program = self.program._program  # the pybinding keeps the methods' order
        return program.get_method_name(index) if index < program.num_methods() else None

    def input_specs(self, method: str) -> list[tuple[type, tuple[int, ...]]]:
        self.program.load_method(method)  # loaded before timing, as Program::load_method
        meta = self.program.metadata(method)
        infos = [meta.input_tensor_meta(i) for i in range(meta.num_inputs())]
        return [(SCALAR_TYPES[t.dtype()], tuple(t.sizes())) for t in infos]

    def execute(self, method: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
        import torch

        outputs = self.program.load_method(method).execute([torch.from_numpy(a) for a in inputs])
        return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in outputs]


def executorch_backend(model_path: str) -> ExecutorchBackend:
    """``$QNN_GENAI_STANDIN_EXECUTOR_BACKEND=tests.support.standin_backends:executorch_backend``."""
    return ExecutorchBackend(model_path)
