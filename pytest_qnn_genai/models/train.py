"""Train a family's toy model case from the project's own story corpus: one trainer for every
family.

``python -m pytest_qnn_genai.models.train --family NAME --out DIR`` generates the corpus
(:mod:`pytest_qnn_genai.models.corpus`), has the family train its tokenizer on it, trains the
family's model (``family.TOY``: :class:`~pytest_qnn_genai.models.families.Toy`) and writes the
model case: the family's files, ``case.json`` (with calibration prompts from another seed) and
``MODEL_CARD.md`` (training figures, the fp32 greedy continuation of the files as written).

Every batch holds windows from a random story's BOS (as the gate's prompts start), a quarter
from anywhere in the stream and, for a family with a chat template, a quarter of the stories in
the template ``qnn_llama_runner`` wraps a prompt in (user: the story's first 3-12 words, assistant:
the rest), so the model continues a story both from ``bos + prompt`` and from the runner's
template. Seeded and single-threaded (``--threads 1``): a rerun writes the same weights.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from pytest_qnn_genai.models import corpus, families, heldout

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pytest_qnn_genai.models.families import Toy, ToyTokenizer
    from pytest_qnn_genai.models.params import CaseFile, ModelParams

EVAL_PROMPT, EVAL_TOKENS = "Once upon a time", 48
PUNCTUATION = ',.!?"\''
Stream = tuple[torch.Tensor, torch.Tensor]  # token ids, offsets of windows that start a story


@dataclass(frozen=True)
class Config:
    """Training settings (all on the command line)."""

    out: Path
    family: str
    seed: int = heldout.TRAIN_SEED
    n_stories: int = heldout.N_TRAIN
    steps: int = 0  # 0: the family's toy default
    batch: int = 16
    seq_len: int = 128
    lr: float = 1e-2
    min_lr: float = 5e-4
    warmup: int = 50
    weight_decay: float = 0.1
    threads: int = 1
    n_calibration: int = 8
    n_held_out: int = 256
    name: str = ""  # the case's name ("": the toy's)
    params: str = ""  # JSON of shape fields to change from the toy's (another shape, same family)


def chat_story(tok: ToyTokenizer, story: str, n_words: int) -> list[int]:
    """``story`` as one chat turn: the first ``n_words`` words (without the punctuation after
    them) asked, the rest answered, as ``qnn_llama_runner`` would print it after the prompt."""
    words = story.split(" ")
    prompt = " ".join(words[:n_words])
    stem = prompt.rstrip(PUNCTUATION)
    prompt, rest = stem, prompt[len(stem):] + "".join(" " + w for w in words[n_words:])
    head = tok.chat(prompt)
    assert head is not None and tok.chat_end_id is not None
    return head + tok.encode(rest) + [tok.chat_end_id]


def streams(tok: ToyTokenizer, stories: list[str], seq_len: int, seed: int) -> dict[str, Stream]:
    """``plain`` (``bos story eos``; no ``bos`` for a family whose runner prepends none) and,
    for a family with a chat template, ``chat`` token streams, each with the offsets of the
    stories that have a full ``seq_len + 1`` window."""
    rng = random.Random(seed)
    bos = [] if tok.bos_id is None else [tok.bos_id]
    out = {}
    for kind in ("plain", "chat") if tok.chat_end_id is not None else ("plain",):
        ids: list[int] = []
        starts: list[int] = []
        for s in stories:
            starts.append(len(ids))
            ids += ([*bos, *tok.encode(s), tok.eos_id] if kind == "plain"
                    else chat_story(tok, s, rng.randint(3, 12)))
        starts = [i for i in starts if i + seq_len + 1 <= len(ids)]
        out[kind] = (torch.tensor(ids, dtype=torch.long), torch.tensor(starts, dtype=torch.long))
    return out


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


def train_model(cfg: Config, toy: Toy, data: dict[str, Stream],
                params: ModelParams) -> tuple[torch.nn.Module, list[tuple[int, float]]]:
    """Train the toy's model; per batch a quarter of the windows start anywhere in the plain
    stream, a quarter (if there is a chat stream) at a chat story's start, the rest at a plain
    story's ``bos``. Returns the model and the mean train loss every 50 steps."""
    model = toy.new_model(params)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(cfg.seed)
    plain, plain_starts = data["plain"]
    n_any = cfg.batch // 4
    n_chat = cfg.batch // 4 if "chat" in data else 0
    log: list[tuple[int, float]] = []
    recent: list[float] = []
    model.train()
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        s = plain_starts[torch.randint(0, len(plain_starts), (cfg.batch - n_chat - n_any,),
                                       generator=gen)]
        a = torch.randint(0, len(plain) - cfg.seq_len - 1, (n_any,), generator=gen)
        x, y = batch(plain, torch.cat([s, a]), cfg.seq_len)
        if n_chat:
            chat, chat_starts = data["chat"]
            c = chat_starts[torch.randint(0, len(chat_starts), (n_chat,), generator=gen)]
            xc, yc = batch(chat, c, cfg.seq_len)
            x, y = torch.cat([x, xc]), torch.cat([y, yc])
        loss = F.cross_entropy(toy.logits(model, x).flatten(0, 1), y.flatten())
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


@torch.no_grad()
def held_out_metrics(toy: Toy, model: torch.nn.Module, tok: ToyTokenizer,
                     data: dict[str, Stream], seq_len: int) -> dict[str, float]:
    """Loss over the first ``seq_len`` tokens of held-out stories (per stream), and how often the
    model predicts the hero's name (the token after " named") where it recurs."""
    out = {}
    named = tok.word_id("named")
    for kind, (stream, starts) in data.items():
        x, y = batch(stream, starts, seq_len)
        logits = toy.logits(model, x)
        out[f"{kind}_loss"] = float(F.cross_entropy(logits.flatten(0, 1), y.flatten()))
        if kind != "plain":
            continue
        hits = total = 0
        for row, pred in zip(x.tolist(), logits.argmax(-1).tolist()):
            if named in row and row.index(named) + 1 < seq_len:
                name = row[row.index(named) + 1]
                later = [k for k in range(row.index(named) + 2, seq_len) if row[k] == name]
                hits += sum(pred[k - 1] == name for k in later)
                total += len(later)
        out["name_copy_accuracy"] = hits / max(1, total)
    return out


@torch.no_grad()
def greedy(logits: Callable[[torch.Tensor], torch.Tensor], ids: list[int], n: int,
           stop: Iterable[int] = ()) -> list[int]:
    """Up to ``n`` greedy tokens after ``ids`` (stops after a ``stop`` id)."""
    seq, new, stops = list(ids), [], set(stop)
    for _ in range(n):
        nxt = int(logits(torch.tensor([seq]))[0, -1].argmax())
        seq.append(nxt)
        new.append(nxt)
        if nxt in stops:
            break
    return new


def calibration_prompts(tok: ToyTokenizer, seed: int, n: int) -> list[str]:
    """``n`` story beginnings of alternating length (up to 48 or 110 tokens), from ``seed``."""
    prompts = []
    for i, s in enumerate(corpus.generate(n, seed)):
        limit = 48 if i % 2 == 0 else 110
        sentences = re.split(r'(?<=[.!?]) (?=[A-Z"])|(?<=[.!?]") (?=[A-Z"])', s)
        text = sentences[0]
        for nxt in sentences[1:]:
            if len(tok.encode(f"{text} {nxt}")) > limit:
                break
            text = f"{text} {nxt}"
        prompts.append(text)
    return prompts


def continuation(tok: ToyTokenizer, prompt_ids: list[int], ids: list[int], stops: set[int]) -> str:
    """The text of ``ids`` as it follows the prompt (a final stop token left out)."""
    body = prompt_ids[1:] if prompt_ids[:1] == [tok.bos_id] else prompt_ids
    ids = ids[:-1] if ids and ids[-1] in stops else ids
    head = tok.decode(body)
    full = tok.decode(body + ids)
    return full[len(head):] if full.startswith(head) else tok.decode(ids)


def model_card(cfg: Config, toy: Toy, f: dict[str, object], log: list[tuple[int, float]]) -> str:
    """MODEL_CARD.md text."""
    points = log[:: max(1, len(log) // 8)]
    curve = ", ".join(f"{s}: {loss:.3f}" for s, loss in points + log[-1:] * (points[-1] != log[-1]))
    chat_rows = ""
    if "chat_loss" in f:
        chat_rows = (f"; the same stories in the runner's chat template (user: the first 3-12 "
                     f"words without the punctuation after them, assistant: the rest), "
                     f"{f['chat_tokens']:,} tokens")
    losses = ", ".join(f"{k.removesuffix('_loss')} {v:.4f}" for k, v in f.items()
                       if k.endswith("_loss") and k != "final_train_loss")
    chat = ""
    if f.get("chat_ids") is not None:
        same = "the same as the raw prompt's" if f["chat_ids"] == f["continuation_ids"] else (
            f"`{f['chat_ids']}`")
        chat = f"""
The same prompt in qnn_llama_runner's chat template (`bos` + the template, stops at the end of
the assistant turn):

> {f['chat_text']}

Token ids: {same}
"""
    shape = f" --name {cfg.name} --params '{cfg.params}'" if cfg.params else ""
    changed = f"\n\nThis case changes the toy's shape: `{cfg.params}`." if cfg.params else ""
    return f"""# {cfg.name or toy.NAME} (trained by pytest-qnn-genai)

{toy.describe()}{changed}

{f['n_params']:,} parameters. Made by `python -m pytest_qnn_genai.models.train --family \
{cfg.family} --out DIR --seed {cfg.seed} --steps {cfg.steps}{shape}`.

## Corpus
- Generator: `pytest_qnn_genai.models.corpus.generate({cfg.n_stories}, seed={cfg.seed})` (no download)
- {cfg.n_stories} stories, {f['train_tokens']:,} tokens as `bos story eos`{chat_rows}
- Held out: {cfg.n_held_out} stories from seed {cfg.seed + 1}; calibration prompts in `case.json`:
  seed {cfg.seed + 2}

## Training
- torch {torch.__version__}, {cfg.threads} thread(s), torch.manual_seed({cfg.seed})
- AdamW (betas 0.9/0.95, weight decay {cfg.weight_decay}), lr {cfg.lr} → {cfg.min_lr} cosine,
  {cfg.warmup} warmup steps, grad clip 1.0
- {cfg.steps} steps × batch {cfg.batch} × {cfg.seq_len} tokens = {f['tokens_seen']:,} tokens seen
- Training wall time: {f['train_seconds']:.0f} s (whole run {f['total_seconds']:.0f} s)
- Loss curve (step: mean train loss): {curve}
- Final train loss (mean of last 50 steps): {log[-1][1]:.4f}
- Held-out loss (first {cfg.seq_len} tokens of each held-out story): {losses}
- Held-out hero-name copy accuracy (argmax = the name given after " named", where it recurs):
  {f['name_copy_accuracy']:.3f}

## fp32 greedy continuation (the files as written)
Prompt `{EVAL_PROMPT}` as the runner encodes it (`bos + encode(prompt)`; no `bos` where the
runner's tokenizer adds none), {EVAL_TOKENS} tokens:

> {EVAL_PROMPT}{f['continuation_text']}

Token ids: `{f['continuation_ids']}`
{chat}"""


def run(cfg: Config) -> dict[str, object]:
    """Build the whole model case in ``cfg.out``; returns the measured facts."""
    toy = families.all_families()[cfg.family].TOY
    if toy is None:
        raise ValueError(f"family {cfg.family} has no toy to train (its cases are real checkpoints)")
    if not cfg.steps:
        cfg = Config(**{**vars(cfg), "steps": toy.STEPS})
    changes = json.loads(cfg.params) if cfg.params else {}
    if "vocab_size" in changes:
        raise ValueError("--params cannot change vocab_size: the tokenizer is the toy's")
    params: ModelParams = {**toy.PARAMS, **changes}
    t0 = time.time()
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    cfg.out.mkdir(parents=True, exist_ok=True)
    stories = corpus.generate(cfg.n_stories, cfg.seed)
    held_out = corpus.generate(cfg.n_held_out, cfg.seed + 1)
    tok = toy.train_tokenizer(stories, cfg.out)
    data = streams(tok, stories, cfg.seq_len, cfg.seed)
    t1 = time.time()
    model, log = train_model(cfg, toy, data, params)
    train_seconds = time.time() - t1
    toy.save(model, cfg.out, params)
    (cfg.out / toy.CASE["params"]).write_text(json.dumps(params) + "\n")
    reference = toy.reference(cfg.out, params)  # the continuations come from the files written

    def logits(x: torch.Tensor) -> torch.Tensor:
        return toy.logits(reference, x)

    stops = {tok.eos_id} | ({tok.chat_end_id} if tok.chat_end_id is not None else set())
    prompt_ids = [*([] if tok.bos_id is None else [tok.bos_id]), *tok.encode(EVAL_PROMPT)]
    ids = greedy(logits, prompt_ids, EVAL_TOKENS, [tok.eos_id])
    chat_prompt = tok.chat(EVAL_PROMPT)
    chat = None if chat_prompt is None else greedy(logits, chat_prompt, EVAL_TOKENS, stops)
    case: CaseFile = {**toy.CASE, "name": cfg.name or toy.NAME, "model_mode": "hybrid",
            "prefill_ar_len": 32, "max_seq_len": 128, "max_context_len": 128,
            "eval_prompt": EVAL_PROMPT, "max_new_tokens": EVAL_TOKENS,
            "calibration_prompts": calibration_prompts(tok, cfg.seed + 2, cfg.n_calibration),
            "variants": {"ar8": {"prefill_ar_len": 8}, "kv16": {"kv_io_bit_width": 16}}}
    if toy.CASE.get("kv_io_bit_width") == 16:  # the recipe's own KV IO is 16-bit already
        del case["variants"]["kv16"]
    (cfg.out / "case.json").write_text(json.dumps(case, indent=2) + "\n")
    facts: dict[str, object] = {
        "n_params": sum(p.numel() for p in model.parameters()),
        "train_tokens": len(data["plain"][0]),
        "chat_tokens": len(data["chat"][0]) if "chat" in data else 0,
        "tokens_seen": cfg.steps * cfg.batch * cfg.seq_len, "train_seconds": train_seconds,
        "final_train_loss": log[-1][1],
        **held_out_metrics(toy, reference, tok, streams(tok, held_out, cfg.seq_len, cfg.seed + 1),
                           cfg.seq_len),
        "prompt_ids": prompt_ids, "continuation_ids": ids,
        "continuation_text": continuation(tok, prompt_ids, ids, {tok.eos_id}),
        "chat_ids": chat,
        "chat_text": None if chat is None else continuation(tok, chat_prompt or [], chat, stops),
    }
    facts["total_seconds"] = time.time() - t0
    (cfg.out / "MODEL_CARD.md").write_text(model_card(cfg, toy, facts, log))
    return facts


def main(argv: list[str] | None = None) -> None:
    """Command line: every :class:`Config` field as a flag, ``--golden`` to write the fp32
    continuation golden file as well."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--family", required=True, choices=sorted(families.all_families()))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--golden", type=Path, help="also write the fp32 continuation golden JSON here")
    defaults = Config(out=Path("."), family="")
    for name in ("seed", "n_stories", "steps", "batch", "seq_len", "lr", "min_lr", "warmup",
                 "weight_decay", "threads", "n_calibration", "n_held_out", "name", "params"):
        value = getattr(defaults, name)
        ap.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = vars(ap.parse_args(argv))
    golden = args.pop("golden")
    facts = run(Config(**args))
    print(json.dumps({k: v for k, v in facts.items() if not k.endswith("_ids")}, indent=1))
    if golden:
        record = {"prompt": EVAL_PROMPT, "prompt_ids": facts["prompt_ids"], "n": EVAL_TOKENS,
                  "text": facts["continuation_text"], "token_ids": facts["continuation_ids"]}
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}"
                                               for k, v in record.items()) + "\n}\n")


if __name__ == "__main__":
    main()
