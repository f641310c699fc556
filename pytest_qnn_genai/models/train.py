"""Train the gate's default model, ``stories260k``, from the project's own story corpus.

``python -m pytest_qnn_genai.models.train --out DIR`` generates the corpus
(:mod:`pytest_qnn_genai.models.corpus`), trains a 512-piece SentencePiece tokenizer with llama2.c's
``train_vocab`` settings, trains llama2.c's 260K-parameter architecture
(:class:`pytest_qnn_genai.models.llama2c.Transformer`) and writes the model case: checkpoint,
``params.json``, ``tokenizer.model``/``tokenizer.bin``, ``case.json`` and ``MODEL_CARD.md``.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch
import torch.nn.functional as F
from pytorch_tokenizers.llama2c import Llama2cTokenizer

from pytest_qnn_genai.models import corpus, llama2c

PARAMS = {"dim": 64, "n_layers": 5, "n_heads": 8, "n_kv_heads": 4, "vocab_size": 512,
          "multiple_of": 4, "max_seq_len": 512}
EVAL_PROMPT, EVAL_TOKENS = "Once upon a time", 48
CASE = {"name": "stories260k", "decoder_model": "stories260k", "checkpoint": "stories260K.pt",
        "params": "params.json", "tokenizer_model": "tokenizer.model",
        "tokenizer_bin": "tokenizer.bin", "model_mode": "hybrid", "prefill_ar_len": 32,
        "max_seq_len": 128, "max_context_len": 128, "quant_recipe": "16a4w",
        "kv_io_bit_width": 8, "eval_prompt": EVAL_PROMPT, "max_new_tokens": EVAL_TOKENS,
        "variants": {"ar8": {"prefill_ar_len": 8}}}  # the A/B gate's committed pair: ar8:new


@dataclass(frozen=True)
class Config:
    """Training settings (all on the command line)."""

    out: Path
    seed: int = 1337
    n_stories: int = 20000
    steps: int = 800
    batch: int = 16
    seq_len: int = 128
    lr: float = 1e-2
    min_lr: float = 5e-4
    warmup: int = 50
    weight_decay: float = 0.1
    threads: int = 1
    n_calibration: int = 8
    n_held_out: int = 256


def train_tokenizer(stories: list[str], model_file: Path,
                    vocab_size: int) -> spm.SentencePieceProcessor:
    """SentencePiece BPE with llama2.c's ``train_vocab`` options (bos 1, eos 2, unk 0)."""
    model = io.BytesIO()  # in memory, so no temporary path is recorded in the model
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(stories), model_writer=model, model_type="bpe",
        vocab_size=vocab_size, self_test_sample_size=0, character_coverage=1.0, num_threads=1,
        split_digits=True, allow_whitespace_only_pieces=True, byte_fallback=True,
        unk_surface=r" \342\201\207 ", normalization_rule_name="identity",
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    model_file.write_bytes(model.getvalue())
    return spm.SentencePieceProcessor(model_file=str(model_file))


def token_stream(sp: spm.SentencePieceProcessor, stories: list[str],
                 seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All stories as one stream of ``bos story eos``, and the offsets of the stories' ``bos``
    that have a full ``seq_len + 1`` window after them."""
    ids: list[int] = []
    starts: list[int] = []
    for s in sp.encode(stories):
        starts.append(len(ids))
        ids += [sp.bos_id(), *s, sp.eos_id()]
    starts = [i for i in starts if i + seq_len + 1 <= len(ids)]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(starts, dtype=torch.long)


def batch(stream: torch.Tensor, starts: torch.Tensor,
          seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets for windows of ``stream`` beginning at ``starts``."""
    idx = starts[:, None] + torch.arange(seq_len + 1)
    w = stream[idx]
    return w[:, :-1], w[:, 1:]


def lr_at(step: int, cfg: Config) -> float:
    """Linear warmup, then cosine decay from ``lr`` to ``min_lr``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


@torch.no_grad()
def held_out_metrics(model: llama2c.Transformer, sp: spm.SentencePieceProcessor,
                     stream: torch.Tensor, starts: torch.Tensor, seq_len: int) -> tuple[float, float]:
    """Loss over the first ``seq_len`` tokens of held-out stories, and how often the model
    predicts the hero's name (the token after "named") where it recurs: in-context copying."""
    x, y = batch(stream, starts, seq_len)
    logits = model(x)
    loss = float(F.cross_entropy(logits.flatten(0, 1), y.flatten()))
    named, hits, total = sp.piece_to_id("▁named"), 0, 0
    for row, pred in zip(x.tolist(), logits.argmax(-1).tolist()):
        if named in row and row.index(named) + 1 < seq_len:
            name = row[row.index(named) + 1]
            later = [k for k in range(row.index(named) + 2, seq_len) if row[k] == name]
            hits += sum(pred[k - 1] == name for k in later)
            total += len(later)
    return loss, hits / max(1, total)


def train_model(cfg: Config, stream: torch.Tensor,
                starts: torch.Tensor) -> tuple[llama2c.Transformer, list[tuple[int, float]]]:
    """Train on windows of ``stream``: 3/4 begin at a random story's ``bos`` (as the gate's
    prompts do), 1/4 anywhere; returns the model and the mean train loss every 50 steps."""
    model = llama2c.Transformer(PARAMS)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(cfg.seed)
    log, recent = [], []
    model.train()
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        n_any = cfg.batch // 4
        story = starts[torch.randint(0, len(starts), (cfg.batch - n_any,), generator=gen)]
        anywhere = torch.randint(0, len(stream) - cfg.seq_len - 1, (n_any,), generator=gen)
        x, y = batch(stream, torch.cat([story, anywhere]), cfg.seq_len)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        recent.append(loss.item())
        if (step + 1) % 50 == 0 or step + 1 == cfg.steps:
            log.append((step + 1, sum(recent) / len(recent)))
            recent = []
            print(f"step {step + 1}/{cfg.steps} loss {log[-1][1]:.4f} lr {lr_at(step, cfg):.2e}",
                  flush=True)
    return model.eval(), log


def calibration_prompts(sp: spm.SentencePieceProcessor, seed: int, n: int) -> list[str]:
    """``n`` story beginnings of alternating length (up to 48 or 110 tokens), from ``seed``."""
    prompts = []
    for i, s in enumerate(corpus.generate(n, seed)):
        limit = 48 if i % 2 == 0 else 110
        sentences = re.split(r'(?<=[.!?]) (?=[A-Z"])|(?<=[.!?]") (?=[A-Z"])', s)
        text = sentences[0]
        for nxt in sentences[1:]:
            if len(sp.encode(f"{text} {nxt}")) > limit:
                break
            text = f"{text} {nxt}"
        prompts.append(text)
    return prompts


def model_card(cfg: Config, facts: dict[str, object], log: list[tuple[int, float]]) -> str:
    """MODEL_CARD.md text."""
    points = log[:: max(1, len(log) // 8)]
    curve = ", ".join(f"{s}: {loss:.3f}" for s, loss in points + log[-1:] * (points[-1] != log[-1]))
    return f"""# stories260k (trained by pytest-qnn-genai)

llama2.c architecture, {facts['n_params']:,} parameters, `params.json`: `{json.dumps(PARAMS)}`.
Made by `python -m pytest_qnn_genai.models.train --out DIR --seed {cfg.seed} --steps {cfg.steps}`.

## Corpus
- Generator: `pytest_qnn_genai.models.corpus.generate({cfg.n_stories}, seed={cfg.seed})` (no download)
- {cfg.n_stories} stories, {facts['train_tokens']:,} tokens (`bos story eos`)
- Held out: {cfg.n_held_out} stories from seed {cfg.seed + 1}
- Calibration prompts in `case.json`: seed {cfg.seed + 2}

## Tokenizer
SentencePiece BPE, vocab 512, byte_fallback, split_digits, identity normalization; unk 0, bos 1,
eos 2 (llama2.c `train_vocab` settings), trained on the training corpus. `tokenizer.bin` is the
llama2.c export (`pytorch_tokenizers.tools.llama2c.convert`).

## Training
- AdamW (betas 0.9/0.95, weight decay {cfg.weight_decay}), lr {cfg.lr} → {cfg.min_lr} cosine,
  {cfg.warmup} warmup steps, grad clip 1.0
- {cfg.steps} steps × batch {cfg.batch} × {cfg.seq_len} tokens = {facts['tokens_seen']:,} tokens seen;
  3/4 of the windows are the first {cfg.seq_len} tokens of a random story (from its `bos`, like
  the gate's prompts), 1/4 start anywhere in the stream
- torch {torch.__version__}, {cfg.threads} thread(s), torch.manual_seed({cfg.seed})
- Training wall time: {facts['train_seconds']:.0f} s (whole run {facts['total_seconds']:.0f} s)
- Loss curve (step: mean train loss): {curve}
- Final train loss (mean of last 50 steps): {log[-1][1]:.4f}
- Held-out loss (first {cfg.seq_len} tokens of each held-out story): {facts['held_out_loss']:.4f}
- Held-out hero-name copy accuracy (argmax = the name given after "named", where it recurs):
  {facts['name_copy_accuracy']:.3f}

## fp32 greedy continuation
Prompt `{EVAL_PROMPT}` (bos + `sp.encode`), {EVAL_TOKENS} tokens:

> {EVAL_PROMPT}{facts['continuation_text']}

Token ids: `{facts['continuation_ids']}`
"""


def run(cfg: Config) -> dict[str, object]:
    """Build the whole model case in ``cfg.out``; returns the measured facts."""
    t0 = time.time()
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    cfg.out.mkdir(parents=True, exist_ok=True)
    stories = corpus.generate(cfg.n_stories, cfg.seed)
    held_out = corpus.generate(cfg.n_held_out, cfg.seed + 1)
    sp = train_tokenizer(stories, cfg.out / CASE["tokenizer_model"], PARAMS["vocab_size"])
    tokenizer_bin = str(cfg.out / CASE["tokenizer_bin"])
    Llama2cTokenizer(str(cfg.out / CASE["tokenizer_model"])).export(tokenizer_bin)
    stream, starts = token_stream(sp, stories, cfg.seq_len)
    t1 = time.time()
    model, log = train_model(cfg, stream, starts)
    train_seconds = time.time() - t1
    llama2c.save_checkpoint(model, str(cfg.out / CASE["checkpoint"]))
    (cfg.out / CASE["params"]).write_text(json.dumps(PARAMS) + "\n")
    prompt_ids = [sp.bos_id()] + sp.encode(EVAL_PROMPT)
    ids = llama2c.greedy(model, prompt_ids, EVAL_TOKENS, sp.eos_id())
    case = dict(CASE, calibration_prompts=calibration_prompts(sp, cfg.seed + 2, cfg.n_calibration))
    (cfg.out / "case.json").write_text(json.dumps(case, indent=2) + "\n")
    held_loss, copy_accuracy = held_out_metrics(
        model, sp, *token_stream(sp, held_out, cfg.seq_len), cfg.seq_len)
    facts: dict[str, object] = {
        "n_params": sum(p.numel() for p in model.parameters()), "train_tokens": len(stream),
        "tokens_seen": cfg.steps * cfg.batch * cfg.seq_len, "train_seconds": train_seconds,
        "held_out_loss": held_loss, "name_copy_accuracy": copy_accuracy,
        "final_train_loss": log[-1][1], "prompt_ids": prompt_ids, "continuation_ids": ids,
        "continuation_text": sp.decode(prompt_ids + ids)[len(EVAL_PROMPT):],
    }
    facts["total_seconds"] = time.time() - t0
    (cfg.out / "MODEL_CARD.md").write_text(model_card(cfg, facts, log))
    return facts


def cli(run_fn: Callable[..., dict[str, object]], config_cls: type, doc: str,
        argv: list[str] | None = None) -> None:
    """The trainers' shared command line: every Config field as a flag, ``--golden`` to write the
    fp32 continuation golden file as well."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--golden", type=Path, help="also write the fp32 continuation golden JSON here")
    defaults = config_cls(out=Path("."))
    for name in ("seed", "n_stories", "steps", "batch", "seq_len", "lr", "min_lr", "warmup",
                 "weight_decay", "threads", "n_calibration", "n_held_out"):
        value = getattr(defaults, name)
        ap.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = vars(ap.parse_args(argv))
    golden = args.pop("golden")
    facts = run_fn(config_cls(**args))
    print(json.dumps({k: v for k, v in facts.items() if not k.endswith("_ids")}, indent=1))
    if golden:
        record = {"prompt": EVAL_PROMPT, "prompt_ids": facts["prompt_ids"], "n": EVAL_TOKENS,
                  "text": facts["continuation_text"], "token_ids": facts["continuation_ids"]}
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}"
                                               for k, v in record.items()) + "\n}\n")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    cli(run, Config, __doc__, argv)


if __name__ == "__main__":
    main()
