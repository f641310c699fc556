"""Train the toy Llama 3.2 model case from the project's own story corpus.

``python -m pytest_qnn_genai.models.train_llama3 --out DIR`` generates the corpus
(:mod:`pytest_qnn_genai.models.corpus`), trains a byte-level BPE tokenizer (saved in tiktoken's
format, read by ``pytorch_tokenizers``' Llama 3 loader), trains ``transformers.LlamaForCausalLM``
at the size of :data:`pytest_qnn_genai.models.llama3.PARAMS` and writes the same weights twice:
Meta's layout for ``llama.py --checkpoint`` (``consolidated.00.pth`` + ``params.json``) and Hugging
Face's (``config.json`` + ``model.safetensors``), with ``tokenizer.model``, ``MODEL_CARD.md`` and
``case.json``.

A quarter of the story windows are in the llama3 chat template ``qnn_llama_runner`` wraps a
prompt in (user: the story's first words, assistant: the rest, ending ``<|eot_id|>``), so the model
continues a story both from a raw ``bos + prompt`` and from the runner's template.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from pytest_qnn_genai.models import corpus, llama3, train

NAME = "llama3_2_toy"
EVAL_PROMPT, EVAL_TOKENS = train.EVAL_PROMPT, train.EVAL_TOKENS
PUNCTUATION = ',.!?"\''
CASE = {"name": NAME, "decoder_model": "llama3_2-1b_instruct", "checkpoint": "consolidated.00.pth",
        "params": "params.json", "tokenizer_model": "tokenizer.model",
        "tokenizer_bin": "tokenizer.model",  # llama.py reads no tokenizer_bin for llama3_2
        "model_mode": "hybrid", "prefill_ar_len": 32, "max_seq_len": 128, "max_context_len": 128,
        "quant_recipe": "16a4w_block", "kv_io_bit_width": 8, "eval_prompt": EVAL_PROMPT,
        "max_new_tokens": EVAL_TOKENS,
        "variants": {"ar8": {"prefill_ar_len": 8}}}  # the A/B gate's committed pair: ar8:new


@dataclass(frozen=True)
class Config:
    """Training settings (all on the command line)."""

    out: Path
    seed: int = 1337
    n_stories: int = 20000
    steps: int = 1600
    batch: int = 16
    seq_len: int = 128
    lr: float = 1e-2
    min_lr: float = 5e-4
    warmup: int = 50
    weight_decay: float = 0.1
    threads: int = 1
    n_calibration: int = 8
    n_held_out: int = 256


class _Encoder:
    """``encode(text) -> ids`` without bos/eos (what :func:`train.calibration_prompts` calls)."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, bos=False, eos=False)


def chat_story(tok: Any, story: str, n_words: int) -> list[int]:
    """``story`` as one chat turn: the first ``n_words`` words (without the punctuation after
    them) asked, the rest answered, as ``qnn_llama_runner`` would print it after the prompt."""
    words = story.split(" ")
    prompt = " ".join(words[:n_words])
    stem = prompt.rstrip(PUNCTUATION)
    prompt, rest = stem, prompt[len(stem):] + "".join(" " + w for w in words[n_words:])
    return (llama3.chat_ids(tok, prompt, tok.bos_id) + tok.encode(rest, bos=False, eos=False)
            + [llama3.special_ids(tok.bos_id)["<|eot_id|>"]])


def streams(tok: Any, stories: list[str], seq_len: int,
            seed: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``plain`` (``bos story eos``) and ``chat`` token streams, each with the offsets of the
    stories that have a full ``seq_len + 1`` window after them."""
    rng = random.Random(seed)
    out = {}
    for kind in ("plain", "chat"):
        ids: list[int] = []
        starts: list[int] = []
        for s in stories:
            starts.append(len(ids))
            ids += (tok.encode(s, bos=True, eos=True) if kind == "plain"
                    else chat_story(tok, s, rng.randint(3, 12)))
        starts = [i for i in starts if i + seq_len + 1 <= len(ids)]
        out[kind] = (torch.tensor(ids, dtype=torch.long), torch.tensor(starts, dtype=torch.long))
    return out


def train_model(cfg: Config, data: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> tuple[Any, list]:
    """Train ``LlamaForCausalLM``: per batch 1/2 plain story starts, 1/4 chat story starts, 1/4
    anywhere in the plain stream; returns the model and the mean train loss every 50 steps."""
    from transformers import LlamaForCausalLM

    config = llama3.hf_config(llama3.PARAMS)
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(cfg.seed)
    (plain, plain_starts), (chat, chat_starts) = data["plain"], data["chat"]
    n_chat = n_any = cfg.batch // 4
    log, recent = [], []
    model.train()
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = train.lr_at(step, cfg)
        s = plain_starts[torch.randint(0, len(plain_starts), (cfg.batch - n_chat - n_any,), generator=gen)]
        a = torch.randint(0, len(plain) - cfg.seq_len - 1, (n_any,), generator=gen)
        c = chat_starts[torch.randint(0, len(chat_starts), (n_chat,), generator=gen)]
        x1, y1 = train.batch(plain, torch.cat([s, a]), cfg.seq_len)
        x2, y2 = train.batch(chat, c, cfg.seq_len)
        x, y = torch.cat([x1, x2]), torch.cat([y1, y2])
        loss = F.cross_entropy(model(input_ids=x).logits.flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        recent.append(loss.item())
        if (step + 1) % 50 == 0 or step + 1 == cfg.steps:
            log.append((step + 1, sum(recent) / len(recent)))
            recent = []
            print(f"step {step + 1}/{cfg.steps} loss {log[-1][1]:.4f} lr {train.lr_at(step, cfg):.2e}",
                  flush=True)
    return model.eval(), log


@torch.no_grad()
def held_out_metrics(model: Any, tok: Any, data: dict, seq_len: int) -> dict[str, float]:
    """Loss over the first ``seq_len`` tokens of held-out stories (plain and chat), and how often
    the model predicts the hero's name (the token after " named") where it recurs."""
    out = {}
    for kind, (stream, starts) in data.items():
        x, y = train.batch(stream, starts, seq_len)
        logits = model(input_ids=x).logits
        out[f"{kind}_loss"] = float(F.cross_entropy(logits.flatten(0, 1), y.flatten()))
        if kind != "plain":
            continue
        (named,) = tok.encode(" named", bos=False, eos=False)
        hits = total = 0
        for row, pred in zip(x.tolist(), logits.argmax(-1).tolist()):
            if named in row and row.index(named) + 1 < seq_len:
                name = row[row.index(named) + 1]
                later = [k for k in range(row.index(named) + 2, seq_len) if row[k] == name]
                hits += sum(pred[k - 1] == name for k in later)
                total += len(later)
        out["name_copy_accuracy"] = hits / max(1, total)
    return out


def model_card(cfg: Config, f: dict[str, Any], log: list[tuple[int, float]]) -> str:
    """MODEL_CARD.md text."""
    same = "the same as the raw prompt's"
    points = log[:: max(1, len(log) // 8)]
    curve = ", ".join(f"{s}: {loss:.3f}" for s, loss in points + log[-1:] * (points[-1] != log[-1]))
    return f"""# {NAME} (trained by pytest-qnn-genai)

The Llama 3.2 architecture at toy size: GQA ({llama3.PARAMS['n_heads']} query / \
{llama3.PARAMS['n_kv_heads']} KV heads, head_dim {llama3.head_dim(llama3.PARAMS)}), SwiGLU \
{llama3.hidden_dim(llama3.PARAMS)}, RMSNorm, RoPE theta {llama3.PARAMS['rope_theta']:g} with llama3 \
scaling (factor {llama3.PARAMS['rope_scale_factor']}, low/high freq factor \
{llama3.LOW_FREQ_FACTOR:g}/{llama3.PARAMS['high_freq_factor']}, original context \
{llama3.ORIGINAL_CONTEXT}), tied embeddings (as Llama 3.2 1B/3B), {f['n_params']:,} parameters.
Made by `python -m pytest_qnn_genai.models.train_llama3 --out DIR --seed {cfg.seed} --steps {cfg.steps}`.

## Files
- `consolidated.00.pth` + `params.json`: Meta's layout, for `llama.py --decoder_model
  llama3_2-1b_instruct --checkpoint --params` (wq/wk in interleaved RoPE order, `output.weight` a
  copy of the tied embedding). `params.json`: `{json.dumps(llama3.PARAMS)}`
- `config.json` + `model.safetensors`: the same weights for `transformers.LlamaForCausalLM`
  (q/k in half-split order, lm_head tied)
- `tokenizer.model`: tiktoken format, {llama3.N_BASE} ranks + 256 Llama 3 special tokens = vocab
  {llama3.PARAMS['vocab_size']}; `<|begin_of_text|>` {llama3.N_BASE}, `<|end_of_text|>`
  {llama3.N_BASE + 1}, `<|eot_id|>` {llama3.N_BASE + 9}

## Corpus
- Generator: `pytest_qnn_genai.models.corpus.generate({cfg.n_stories}, seed={cfg.seed})` (no download)
- {cfg.n_stories} stories, {f['train_tokens']:,} tokens as `bos story eos`; the same stories in the
  llama3 chat template (user: the first 3-12 words without the punctuation after them, assistant:
  the rest + `<|eot_id|>`), {f['chat_tokens']:,} tokens
- Held out: {cfg.n_held_out} stories from seed {cfg.seed + 1}; calibration prompts: seed {cfg.seed + 2}

## Tokenizer
Byte-level BPE trained on the corpus by `llama3.train_bpe`: the 256 bytes, then {llama3.N_MERGES}
merges (most frequent pair first) over the Llama 3 / cl100k pre-token split. Loaded by
`pytorch_tokenizers.get_tokenizer` as `TiktokenTokenizer` (what `llama.py` asserts) and by the C++
`Tiktoken` of `qnn_llama_runner`.

## Training
- `transformers.LlamaForCausalLM` {f['transformers']}, torch {torch.__version__}, {cfg.threads} thread(s),
  torch.manual_seed({cfg.seed})
- AdamW (betas 0.9/0.95, weight decay {cfg.weight_decay}), lr {cfg.lr} → {cfg.min_lr} cosine,
  {cfg.warmup} warmup steps, grad clip 1.0
- {cfg.steps} steps × batch {cfg.batch} × {cfg.seq_len} tokens = {f['tokens_seen']:,} tokens seen;
  per batch 1/2 windows from a random story's `bos`, 1/4 from a chat-formatted story's `bos`, 1/4
  anywhere in the plain stream
- Training wall time: {f['train_seconds']:.0f} s (whole run {f['total_seconds']:.0f} s)
- Loss curve (step: mean train loss): {curve}
- Final train loss (mean of last 50 steps): {log[-1][1]:.4f}
- Held-out loss (first {cfg.seq_len} tokens of each held-out story): plain {f['plain_loss']:.4f},
  chat template {f['chat_loss']:.4f}
- Held-out hero-name copy accuracy (argmax = the name given after " named", where it recurs):
  {f['name_copy_accuracy']:.3f}

## fp32 greedy continuations (transformers, from `config.json` + `model.safetensors`)
Prompt `{EVAL_PROMPT}` as `bos + encode(prompt)` (what the gate's prompts and llama.py's
calibration feed), {EVAL_TOKENS} tokens:

> {EVAL_PROMPT}{f['continuation_text']}

Token ids: `{f['continuation_ids']}`

The same prompt in qnn_llama_runner's llama3 template, `{json.dumps(llama3.CHAT_USER + EVAL_PROMPT
+ llama3.CHAT_ASSISTANT)}` after `bos` (stops at `<|eot_id|>`):

> {f['chat_text']}

Token ids: {same if f['chat_ids'] == f['continuation_ids'] else f"`{f['chat_ids']}`"}
"""


def run(cfg: Config) -> dict[str, Any]:
    """Build the whole model case in ``cfg.out``; returns the measured facts."""
    import transformers

    t0 = time.time()
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    cfg.out.mkdir(parents=True, exist_ok=True)
    files = llama3.case_files(cfg.out)
    stories = corpus.generate(cfg.n_stories, cfg.seed)
    held_out = corpus.generate(cfg.n_held_out, cfg.seed + 1)
    llama3.save_tiktoken(llama3.train_bpe(stories, llama3.N_MERGES), files["tokenizer_model"])
    tok = llama3.load_tokenizer(files["tokenizer_model"])
    assert tok.n_words == llama3.PARAMS["vocab_size"], tok.n_words
    data = streams(tok, stories, cfg.seq_len, cfg.seed)
    t1 = time.time()
    model, log = train_model(cfg, data)
    train_seconds = time.time() - t1
    meta = llama3.hf_to_meta(model.state_dict(), llama3.PARAMS)
    llama3.save_checkpoint(meta, files["checkpoint"])
    files["params"].write_text(json.dumps(llama3.PARAMS) + "\n")
    llama3.save_hf(meta, llama3.PARAMS, cfg.out)
    reference = llama3.load_hf(cfg.out)  # the continuations come from the files as written
    sp = llama3.special_ids(tok.bos_id)
    prompt_ids = tok.encode(EVAL_PROMPT, bos=True, eos=False)
    ids = llama3.greedy(reference, prompt_ids, EVAL_TOKENS, [tok.eos_id])
    chat_prompt = llama3.chat_ids(tok, EVAL_PROMPT, tok.bos_id)
    chat = llama3.greedy(reference, chat_prompt, EVAL_TOKENS, [sp["<|eot_id|>"], tok.eos_id])
    prompts = train.calibration_prompts(_Encoder(tok), cfg.seed + 2, cfg.n_calibration)
    case = dict(CASE, calibration_prompts=prompts)
    (cfg.out / "case.json").write_text(json.dumps(case, indent=2) + "\n")
    facts: dict[str, Any] = {
        "n_params": sum(p.numel() for p in model.parameters()), "train_tokens": len(data["plain"][0]),
        "chat_tokens": len(data["chat"][0]), "tokens_seen": cfg.steps * cfg.batch * cfg.seq_len,
        "train_seconds": train_seconds, "final_train_loss": log[-1][1],
        **held_out_metrics(reference, tok, streams(tok, held_out, cfg.seq_len, cfg.seed + 1),
                           cfg.seq_len),
        "transformers": transformers.__version__, "prompt_ids": prompt_ids, "continuation_ids": ids,
        "continuation_text": tok.decode(ids[:-1] if ids[-1] == tok.eos_id else ids),
        "chat_prompt_ids": chat_prompt, "chat_ids": chat,
        "chat_text": tok.decode(chat[:-1] if chat[-1] in (sp["<|eot_id|>"], tok.eos_id) else chat),
    }
    facts["total_seconds"] = time.time() - t0
    (cfg.out / "MODEL_CARD.md").write_text(model_card(cfg, facts, log))
    return facts


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (the same flags as :mod:`pytest_qnn_genai.models.train`)."""
    train.cli(run, Config, __doc__, argv)


if __name__ == "__main__":
    main()
