# char_gpt_pytorch.py - the GPT that examples/char_gpt trained, in PyTorch:
# loads char_gpt.safetensors into a module written as nanoGPT's model.py
# writes it (LayerNorm without bias, causal self-attention, GELU MLP, lm_head
# tied to wte; nanoGPT's parameter names, so the file loads as its
# state_dict), reads the architecture and the vocabulary from the file's
# metadata, then runs one batch of windows through both that module and
# nncl (the same file through nncl_model_load, by ctypes on
# build/libnncl.so) and checks that the logits agree.
#   /usr/bin/python3 examples/char_gpt_pytorch.py [MODEL] [--lib build/libnncl.so] [--devices SEL]
# Needs torch and numpy only (Debian 12: apt-get install python3-torch).
# Attention is written out where torch has no scaled_dot_product_attention
# (torch 1.13), as nanoGPT does. bench/pytorch_compare.py trains this module.
import argparse
import ctypes
import gzip
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def load_safetensors(name):
    """The tensors (as float32) and the __metadata__ of a file."""
    with open(name, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        blob = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for key, t in header.items():
        if t["dtype"] not in DTYPES:
            raise SystemExit(f"{name}: {key} is {t['dtype']}, this reader takes F32, F16 and BF16")
        a, b = t["data_offsets"]
        raw = bytearray(blob[a:b])  # little-endian, as on every machine torch runs on here
        tensors[key] = torch.frombuffer(raw, dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).float()
    return tensors, meta


# ---------------------------------------------------------------- the model, as nanoGPT's model.py


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (torch 1.13's has no bias=False)."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=False)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=False)
        self.n_head, self.n_embd = c.n_head, c.n_embd
        self.flash = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0, as nanoGPT chooses
        mask = torch.tril(torch.ones(c.block_size, c.block_size)).view(1, 1, c.block_size, c.block_size)
        self.register_buffer("bias", mask, persistent=False)  # not in the state_dict

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=False)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=False)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c.n_embd, bias=False)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c.n_embd, bias=False)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd),
            wpe=nn.Embedding(c.block_size, c.n_embd),
            h=nn.ModuleList([Block(c) for _ in range(c.n_layer)]),
            ln_f=LayerNorm(c.n_embd, bias=False),
        ))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


class Config:
    pass


def config_of(state, meta):
    """nanoGPT's GPTConfig from the tensors' shapes and, for the heads, the
    attention node of the architecture (nncl.graph)."""
    c = Config()
    c.vocab_size, c.n_embd = state["transformer.wte.weight"].shape
    c.block_size = state["transformer.wpe.weight"].shape[0]
    c.n_layer = len({k.split(".")[2] for k in state if k.startswith("transformer.h.")})
    c.n_head = None
    for line in meta.get("nncl.graph", "").split("\n"):
        f = line.split(" ")
        if len(f) > 1 and "attention" in f[1]:
            attrs = dict(a.split("=", 1) for a in f[5:] if "=" in a)  # "... heads=4 dropout=0"
            c.n_head = int(attrs.get("heads", 0))
            break
    if not c.n_head:
        raise SystemExit("the file's nncl.graph names no attention node with its number of heads")
    return c


# ---------------------------------------------------------------- nncl through its C API


class NNCL:
    def __init__(self, lib, path, batch):
        vp, ci = ctypes.c_void_p, ctypes.c_int
        self.lib = L = ctypes.CDLL(lib)
        L.nncl_init.argtypes = [vp, ctypes.POINTER(vp)]
        L.nncl_last_error.argtypes = [vp]
        L.nncl_last_error.restype = ctypes.c_char_p
        L.nncl_model_load.argtypes = [vp, ctypes.c_char_p, ci, ctypes.POINTER(vp)]
        for fn in ("nncl_model_trainer", "nncl_model_input", "nncl_model_output"):
            getattr(L, fn).argtypes = [vp]
            getattr(L, fn).restype = vp
        L.nncl_trainer_predict.argtypes = [vp, vp, ci, ci, vp, vp]
        L.nncl_model_free.argtypes = [vp]
        L.nncl_free.argtypes = [vp]
        self.ctx, self.model = vp(), vp()
        self.check(L.nncl_init(None, ctypes.byref(self.ctx)), "nncl_init")
        self.check(L.nncl_model_load(self.ctx, path.encode(), batch, ctypes.byref(self.model)), "nncl_model_load")

    def check(self, status, what):
        if status != 0:  # without a context yet, the message of calls made without one
            raise SystemExit(f"{what}: {self.lib.nncl_last_error(self.ctx).decode()}")

    def logits(self, idx, vocab):
        B, T = idx.shape
        x = np.ascontiguousarray(idx, dtype=np.float32)  # token indices travel as floats
        out = np.empty((B, T, vocab), dtype=np.float32)
        feed = (ctypes.c_void_p * 2)(self.lib.nncl_model_input(self.model), x.ctypes.data)  # nncl_feed {node, data}
        self.check(self.lib.nncl_trainer_predict(self.lib.nncl_model_trainer(self.model), feed, 1, B,
                                                 self.lib.nncl_model_output(self.model), out.ctypes.data),
                   "nncl_trainer_predict")
        return out

    def close(self):
        self.lib.nncl_model_free(self.model)
        self.lib.nncl_free(self.ctx)


def main():
    ap = argparse.ArgumentParser(description="char_gpt's model in PyTorch, its logits checked against nncl's")
    ap.add_argument("model", nargs="?", default="char_gpt.safetensors")
    ap.add_argument("--lib", default="build/libnncl.so", help="nncl's shared library (build/libnncl.so)")
    ap.add_argument("--devices", help="nncl's devices (NNCL_DEVICES)")
    ap.add_argument("--data", default="examples/data/tinyshakespeare.txt.gz",
                    help="text the windows are cut from (random tokens when it cannot be read)")
    ap.add_argument("--batch", type=int, default=8, help="windows in the batch (8)")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="largest |nncl - torch| allowed, relative to the largest |logit| (1e-4)")
    a = ap.parse_args()
    if a.devices:
        os.environ["NNCL_DEVICES"] = a.devices
    torch.manual_seed(0)

    state, meta = load_safetensors(a.model)
    c = config_of(state, meta)
    vocab = json.loads(meta.get("nncl.classes", "[]"))
    if len(vocab) != c.vocab_size:
        raise SystemExit(f"{a.model}: {len(vocab)} characters in nncl.classes for a vocabulary of {c.vocab_size}")
    print(f"{a.model}: {c.n_layer} layers, {c.n_head} heads, n_embd {c.n_embd}, block {c.block_size}, "
          f"vocabulary {c.vocab_size} {''.join(vocab)!r}")

    model = GPT(c)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or missing != ["lm_head.weight"]:  # the tied head is stored once, as wte
        raise SystemExit(f"state_dict: missing {missing}, unexpected {unexpected}")
    assert model.lm_head.weight is model.transformer.wte.weight
    model.eval()

    # a batch of windows of the text, else random tokens
    rng = np.random.default_rng(0)
    try:
        opener = gzip.open if a.data.endswith(".gz") else open
        with opener(a.data, "rt") as f:
            text = f.read()
        token = {ch: i for i, ch in enumerate(vocab)}
        starts = rng.integers(0, len(text) - c.block_size, a.batch)
        idx = np.array([[token[ch] for ch in text[s:s + c.block_size]] for s in starts], dtype=np.int64)
        source = f"windows of {a.data}"
    except (OSError, KeyError):
        idx = rng.integers(0, c.vocab_size, (a.batch, c.block_size))
        source = "random tokens"

    with torch.no_grad():
        theirs = model(torch.from_numpy(idx)).numpy()
    nn_ = NNCL(a.lib, a.model, a.batch)
    ours = nn_.logits(idx, c.vocab_size)
    nn_.close()
    diff = float(np.abs(ours - theirs).max())
    scale = float(np.abs(theirs).max())
    ok = np.isfinite(ours).all() and diff <= a.tolerance * max(scale, 1.0)
    print(f"logits of {a.batch} x {c.block_size} ({source}): max |nncl - torch| = {diff:.3g}, "
          f"max |logit| = {scale:.3g}: {'equal' if ok else 'DIFFERENT'} within {a.tolerance:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
