# make_torch_gpt.py - writes torch_gpt.safetensors: a 2-layer GPT in
# nanoGPT's structure trained 20 AdamW steps by PyTorch, for tests/test_gpt.c.
#     wte + wpe -> 2 x [x + c_proj(attn(c_attn(ln_1 x)));  x + mlp(ln_2 x)]
#     -> ln_f -> logits = x wte^T (the tied head) -> cross-entropy over tokens
# with nanoGPT's names, no biases (LayerNorm(bias=False), Linear(bias=False)),
# GELU in its tanh form, c_attn one projection to 3C split into q, k, v.
# AdamW (betas 0.9/0.99, eps 1e-8, weight decay 0.1 on the 2-D weights
# only), gradients clipped to global norm 1.0, the learning rate of
# nanoGPT's get_lr (linear warm-up, then cosine to min_lr). Tensors:
#     init.NAME      every parameter before the first step (nanoGPT's init)
#     x, y           the 20 batches of tokens and next-token labels [20, B, T]
#     loss           the loss of every step [20] (before its update)
#     final.NAME     every parameter after the last step
# computed in float64 from the float32 initial values. Metadata: the sizes
# and the optimizer's settings. Run once (needs torch): python3 make_torch_gpt.py
import json
import math
import struct

import torch
import torch.nn.functional as F

V, T, C, H, L, B, STEPS = 40, 16, 32, 2, 2, 4, 20
LR, MIN_LR, WARMUP, WD, CLIP = 1e-2, 1e-3, 5, 0.1, 1.0
torch.manual_seed(39)


def names():
    out = [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (T, C))]
    for l in range(L):
        p = "transformer.h.%d." % l
        out += [(p + "ln_1.weight", (C,)), (p + "attn.c_attn.weight", (3 * C, C)),
                (p + "attn.c_proj.weight", (C, C)), (p + "ln_2.weight", (C,)),
                (p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_proj.weight", (C, 4 * C))]
    return out + [("transformer.ln_f.weight", (C,))]


# nanoGPT's initialisation: N(0, 0.02), residual projections 0.02 / sqrt(2 L),
# layer norm weights 1 (perturbed here so that their gradients show)
init = {}
for n, shp in names():
    if n.endswith("ln_1.weight") or n.endswith("ln_2.weight") or n.endswith("ln_f.weight"):
        init[n] = (1 + 0.1 * torch.randn(*shp)).float()
    else:
        std = 0.02 / math.sqrt(2 * L) if n.endswith("c_proj.weight") else 0.02
        init[n] = (torch.randn(*shp) * std).float()
# the data: rows counting up from a random token by a random stride, so
# that there is something to learn and the loss falls
start = torch.randint(0, V, (STEPS, B, 1))
stride = torch.randint(1, 4, (STEPS, B, 1))
seq = (start + stride * torch.arange(T + 1)) % V
xs, ys = seq[:, :, :T].float(), seq[:, :, 1:].float()

P = {n: v.double().clone().requires_grad_(True) for n, v in init.items()}


def forward(idx):
    x = P["transformer.wte.weight"][idx] + P["transformer.wpe.weight"]
    for l in range(L):
        p = "transformer.h.%d." % l
        h = F.layer_norm(x, (C,), P[p + "ln_1.weight"], None, 1e-5)
        q, k, v = F.linear(h, P[p + "attn.c_attn.weight"]).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        y = (F.softmax(att, -1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, P[p + "attn.c_proj.weight"])
        h = F.layer_norm(x, (C,), P[p + "ln_2.weight"], None, 1e-5)
        h = F.gelu(F.linear(h, P[p + "mlp.c_fc.weight"]), approximate="tanh")
        x = x + F.linear(h, P[p + "mlp.c_proj.weight"])
    x = F.layer_norm(x, (C,), P["transformer.ln_f.weight"], None, 1e-5)
    return x @ P["transformer.wte.weight"].t()


def lr_at(t):  # nanoGPT's get_lr, lr_decay_iters = STEPS (nncl's NNCL_SCHED_WARMUP_COSINE)
    if t < WARMUP:
        return LR * (t + 1) / (WARMUP + 1)
    return MIN_LR + (LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * (t - WARMUP) / (STEPS - WARMUP)))


decay = [v for n, v in P.items() if v.dim() >= 2]
rest = [v for n, v in P.items() if v.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                        lr=LR, betas=(0.9, 0.99), eps=1e-8)
losses = []
for t in range(STEPS):
    for g in opt.param_groups:
        g["lr"] = lr_at(t)
    logits = forward(xs[t].long())
    loss = F.cross_entropy(logits.reshape(-1, V), ys[t].long().reshape(-1), ignore_index=-1)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(P.values()), CLIP)
    opt.step()
    losses.append(loss.item())
print("loss", " ".join("%.4f" % v for v in losses))

tensors = {"x": xs, "y": ys, "loss": torch.tensor(losses)}
for n in init:
    tensors["init." + n] = init[n]
    tensors["final." + n] = P[n].detach()
meta = {"vocab": V, "block": T, "embd": C, "heads": H, "layers": L, "batch": B, "steps": STEPS, "lr": LR,
        "min_lr": MIN_LR, "warmup": WARMUP, "weight_decay": WD, "clip": CLIP, "beta1": 0.9, "beta2": 0.99,
        "eps": 1e-8}
# safetensors by hand (F32, little-endian): no dependency beyond torch
header, blobs, off = {}, [], 0
for k in sorted(tensors):
    b = tensors[k].to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
    header[k] = {"dtype": "F32", "shape": list(tensors[k].shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
header["__metadata__"] = {k: repr(v) for k, v in meta.items()}
header["__metadata__"]["torch"] = torch.__version__
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open("torch_gpt.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print(len(tensors), "tensors,", off, "bytes of data")
