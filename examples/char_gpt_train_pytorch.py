# char_gpt_train_pytorch.py - char_gpt's training run in PyTorch, as
# nanoGPT's train.py runs it (config/train_shakespeare_char.py with its CPU
# overrides: 4 layers, 4 heads, 128 channels, context 64, batch 12, 2000
# iterations, dropout 0): the model of char_gpt_pytorch.py with nanoGPT's
# initialisation, AdamW (0.9, 0.99), weight decay 0.1 on the parameters of
# 2 or more dimensions, get_lr (warm-up 100, cosine to 1e-4), clipping at
# 1, batches from torch.randint(len(data) - block_size). After the last
# update it prints the loss by three estimators:
#   nanoGPT   estimate_loss() with eval_iters 20: 20 random batches of 12
#   char_gpt  the mean over 200 random windows (what char_gpt prints)
#   fixed     the mean over evenly spaced non-overlapping windows of the
#             split (all 1742 of validation's, every 9th of training's),
#             the same windows at every seed: no sampling noise
# so that a char_gpt run and this one compare on the same protocol.
# --nanogpt 2023 trains as nanoGPT did at commit 23a8e70 (2023-02-05),
# whose README states the loss of 1.88 for this configuration: GELU in its
# tanh form, weight decay on the blocks' Linear weights only (not on wte,
# the tied head, nor wpe), warm-up lr*it/100 (0 at the first iteration).
#   python3 examples/char_gpt_train_pytorch.py [--seed S] [--iters N]
#   python3 examples/char_gpt_train_pytorch.py --eval char_gpt.safetensors
# --eval evaluates a model char_gpt saved by the same estimators instead.
# Needs torch (1.13 or later); one thread by default (--threads).
import argparse
import gzip
import math
import os
import sys
import time

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from char_gpt_pytorch import GPT, Config, config_of, load_safetensors  # noqa: E402


def read_splits(path):
    """nanoGPT's data/shakespeare_char/prepare.py: sorted distinct characters,
    the first 90% of the text for training."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n = int(len(data) * 0.9)
    return chars, data[:n], data[n:]


FIXED = 1742  # windows of the fixed estimate: all of tiny Shakespeare's validation split


def get_batch(data, block, batch, gen=None):
    ix = torch.randint(len(data) - block, (batch,), generator=gen)
    x = torch.stack([data[i:i + block] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block] for i in ix])
    return x, y


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), reduction="sum").item(), y.numel()


@torch.no_grad()
def estimates(model, data, block, batch, gen):
    """The three estimators of the loss on one split."""
    model.eval()
    nano = sum(loss_of(model, *get_batch(data, block, batch, gen))[0] / (batch * block) for _ in range(20)) / 20
    s = n = 0
    for done in range(0, 200, batch):
        got, cnt = loss_of(model, *get_batch(data, block, min(batch, 200 - done), gen))
        s, n = s + got, n + cnt
    windows = (len(data) - 1) // block
    rows = torch.arange(0, windows, max(1, windows // FIXED)) * block  # evenly spaced: all, or FIXED to 2 FIXED
    full = fn = 0
    for w in range(0, len(rows), 256):
        x = torch.stack([data[i:i + block] for i in rows[w:w + 256]])
        y = torch.stack([data[i + 1:i + 1 + block] for i in rows[w:w + 256]])
        got, cnt = loss_of(model, x, y)
        full, fn = full + got, fn + cnt
    model.train()
    return nano, s / n, full / fn, len(rows)


def report(model, train, val, block, batch, gen):
    for name, data in (("train", train), ("val", val)):
        nano, cg, full, windows = estimates(model, data, block, batch, gen)
        print(f"{name} loss: nanoGPT {nano:.4f} (20 x {batch} windows), char_gpt {cg:.4f} (200 windows), "
              f"fixed {full:.4f} ({windows} windows)", flush=True)


def main():
    ap = argparse.ArgumentParser(description="char_gpt's configuration trained in PyTorch as nanoGPT trains it")
    ap.add_argument("--data", default="examples/data/tinyshakespeare.txt.gz")
    ap.add_argument("--seed", type=int, default=1337, help="torch.manual_seed (1337, nanoGPT's)")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1)")
    ap.add_argument("--nanogpt", choices=("2023", "now"), default="now",
                    help="nanoGPT's code of today (default, as char_gpt) or of 2023-02-05")
    ap.add_argument("--eval", metavar="MODEL", help="no training: evaluate this char_gpt model file")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    chars, train, val = read_splits(a.data)
    gen = torch.Generator().manual_seed(a.seed + 1)  # the estimates' windows, apart from training's draws

    if a.eval:
        state, meta = load_safetensors(a.eval)
        c = config_of(state, meta)
        model = GPT(c)
        model.load_state_dict(state, strict=False)  # lm_head is wte
        report(model, train, val, c.block_size, a.batch, gen)
        return 0

    c = Config()
    c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd = len(chars), a.block, a.layers, a.heads, a.embd
    model = GPT(c)
    # nanoGPT's _init_weights, then the residual projections' smaller std
    for m in model.modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
    for pn, p in model.named_parameters():
        if pn.endswith("c_proj.weight"):
            torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layer))
    params = dict(model.named_parameters())  # the tied weight once
    old = a.nanogpt == "2023"
    if old:
        for block in model.transformer.h:
            block.mlp.gelu = torch.nn.GELU(approximate="tanh")
    decays = {n: p.dim() >= 2 and (not old or n.startswith("transformer.h.")) for n, p in params.items()}
    groups = [{"params": [p for n, p in params.items() if decays[n]], "weight_decay": 0.1},
              {"params": [p for n, p in params.items() if not decays[n]], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))
    lr_max, min_lr, warmup, decay_iters = 1e-3, 1e-4, 100, a.iters

    def get_lr(it):
        if it < warmup:
            return lr_max * it / warmup if old else lr_max * (it + 1) / (warmup + 1)
        if it > decay_iters:
            return min_lr
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * (it - warmup) / (decay_iters - warmup))) * (lr_max - min_lr)

    print(f"vocabulary {len(chars)}, {len(train)} train, {len(val)} val; seed {a.seed}, {a.iters} iterations, "
          f"nanoGPT {a.nanogpt}",
          flush=True)
    t0 = time.time()
    x, y = get_batch(train, c.block_size, a.batch)
    for it in range(a.iters):
        for g in opt.param_groups:
            g["lr"] = get_lr(it)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        x, y = get_batch(train, c.block_size, a.batch)  # nanoGPT draws the next batch here
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (it + 1) % 250 == 0:
            print(f"iter {it + 1}: loss {loss.item():.4f}, {time.time() - t0:.0f} s", flush=True)
    report(model, train, val, c.block_size, a.batch, gen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
