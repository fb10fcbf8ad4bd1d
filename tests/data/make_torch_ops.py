# make_torch_ops.py - writes torch_ops.safetensors: every graph op of nncl as
# PyTorch computes it, for tests/test_torch_ops.c. Each case is a small graph
#     h = x + p   (p a parameter: a vector over x's last dimension)
#     z = OP(h, ...)            (OP's own parameters as PyTorch names them)
#     loss = mse(z, t)          (or OP itself when OP is a loss)
# with, per case CASE, the tensors
#     CASE.x, CASE.x2, CASE.t      inputs of a batch (x2 for two-input ops)
#     CASE.param.NAME              every parameter and running statistic
#     CASE.out                     z in evaluation mode (running statistics)
#     CASE.loss                    the loss in training mode (batch statistics)
#     CASE.after.NAME              NAME after one SGD step (lr LR) on that loss
# computed in float64 from the float32 inputs. The C side builds the same
# graph through the public API, sets the parameters, predicts, steps and
# compares: it checks nncl's semantics (padding, defaults, reductions,
# momentum) against PyTorch's, where the op tests check its arithmetic.
# The cases are the OP_TORCH rows of tests/op_cases.def. Run after changing
# one (needs torch 1.13): /usr/bin/python3 tests/data/make_torch_ops.py [OUT]
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
LR = 0.5
torch.manual_seed(7)
tensors = {}


def put(name, t):
    tensors[name] = t.detach().to(torch.float32).contiguous()


def case(name, x_shape, op, params=None, x2_shape=None, stats=None, loss_op=False, x_int=None, scale=1.0, wd=0.0,
         x_fixed=None):
    """op(h, h2, P) -> z (or the loss when loss_op); params: name -> shape; wd: SGD's weight decay on the
    parameters of two or more dimensions (nanoGPT's rule), none on the others; x_fixed: x itself, with p zero."""
    if x_fixed is not None:
        x = torch.tensor(x_fixed).float().reshape(x_shape)
    else:
        x = (torch.randn(*x_shape) * scale).float() if x_int is None else torch.randint(0, x_int, x_shape).float()
    put(name + ".x", x)
    P = {}
    if x_fixed is not None:
        P["p"] = torch.zeros(x_shape[-1]).float()
    elif x_int is None:
        P["p"] = torch.randn(x_shape[-1]).float() * 0.1
    for k, shp in (params or {}).items():
        P[k] = torch.randn(*shp).float() * 0.5
    if x2_shape is not None:
        x2 = torch.randn(*x2_shape).float()
        put(name + ".x2", x2)
        P["p2"] = torch.randn(x2_shape[-1]).float() * 0.1
    S = {}
    for k, shp in (stats or {}).items():
        S[k] = (torch.rand(*shp) + 0.5).float() if k.endswith("var") else torch.randn(*shp).float() * 0.2
    for k, v in list(P.items()) + list(S.items()):
        put(name + ".param." + k, v)
    Pd = {k: v.double().requires_grad_(True) for k, v in P.items()}
    Sd = {k: v.double().clone() for k, v in S.items()}

    def run(train):
        h = x.double() + Pd["p"] if "p" in Pd else x.double()
        h2 = x2.double() + Pd["p2"] if x2_shape is not None else None
        return op(h, h2, Pd, Sd, train)

    with torch.no_grad():
        z = run(False)
    if not loss_op:
        put(name + ".out", z)
        t = torch.randn(*z.shape).float()
        put(name + ".t", t)
    z = run(True)
    if loss_op:
        loss, t = z
        put(name + ".t", t)
    else:
        loss = F.mse_loss(z, t.double())
    loss.backward()
    put(name + ".loss", loss.reshape(1))
    for k, v in Pd.items():
        put(name + ".after." + k, v - LR * (v.grad + (wd * v if v.dim() >= 2 else 0)))
    for k, v in Sd.items():
        put(name + ".after." + k, v)


def unary(f):
    return lambda h, h2, P, S, train: f(h)


def conv(stride=1, padding=0, act=None, **kw):
    """F.conv2d of h with c.weight and c.bias (when the case has one), then act."""
    def op(h, h2, P, S, train):
        y = F.conv2d(h, P["c.weight"], P.get("c.bias"), stride=stride, padding=padding, **kw)
        return act(y) if act else y
    return op


def bn(h, h2, P, S, train):
    return F.batch_norm(h, S["bn.running_mean"], S["bn.running_var"], P["bn.weight"], P["bn.bias"],
                        training=train, momentum=0.1, eps=1e-5)


def ce(h, h2, P, S, train):
    y = torch.tensor([2, 0, 4, 1, 4])
    return F.cross_entropy(h, y), y.float()


def bce(h, h2, P, S, train):
    t = torch.tensor([[0, 1, 1, 0, 0.5], [1, 0, 0.25, 1, 0], [0, 0, 1, 1, 1]]).float()
    return F.binary_cross_entropy_with_logits(h, t.double()), t


def mse(h, h2, P, S, train):
    return F.mse_loss(h, h2), h2.float()


def seq_ce(h, h2, P, S, train):
    y = torch.tensor([[2, -100, 5, 0], [-100, 1, 3, 3]])
    return F.cross_entropy(h.reshape(-1, 6), y.reshape(-1), ignore_index=-100), y.float()


def attention(h, h2, P, S, train, heads=2):
    """nanoGPT's CausalSelfAttention without its projections' biases, from
    q, k, v projections of h, written out (torch 1.13 has no fused one)."""
    B, T, C = h.shape
    q, k, v = (F.linear(h, P[n + ".weight"]).view(B, T, heads, C // heads).transpose(1, 2) for n in "qkv")
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // heads)
    att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return (F.softmax(att, -1) @ v).transpose(1, 2).reshape(B, T, C)


def recurrent(kind, F_, H):
    """PyTorch's own nn.LSTM / nn.GRU (batch first) run on the case's parameters (its forward reads the list
    _flat_weights, in the order of _flat_weights_names): the op and its parameters' shapes."""
    mod = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(F_, H, batch_first=True).double()

    def run(h, h2, P, S, t):
        mod._flat_weights = [P["r." + k] for k in mod._flat_weights_names]
        return mod(h)[0]
    G = 4 if kind == "lstm" else 3
    return run, {"r.weight_ih_l0": (G * H, F_), "r.weight_hh_l0": (G * H, H), "r.bias_ih_l0": (G * H,),
                 "r.bias_hh_l0": (G * H,)}


# MobileNet's activations exactly on every kink
KINKS = [-4.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0, 7.0]


def c_calls(text, macro):
    """The calls MACRO(...) in C source text, each as its list of arguments: adjacent string literals joined
    into one Python string, any other argument as its text."""
    calls, i, n = [], 0, len(text)

    def literal(i):  # the C string literal at text[i] == '"': its value, the index after it
        j, out = i + 1, []
        while text[j] != '"':
            if text[j] == "\\":
                j += 1
                out.append({"n": "\n", "t": "\t"}.get(text[j], text[j]))
            else:
                out.append(text[j])
            j += 1
        return "".join(out), j + 1
    while i < n:
        if text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif text[i] == '"':
            i = literal(i)[1]
        elif text.startswith(macro + "(", i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            i += len(macro) + 1
            args, cur, strs, depth = [], "", [], 0
            while depth or text[i] != ")":
                c = text[i]
                if text.startswith("/*", i):
                    i = text.index("*/", i) + 2
                    continue
                if c == '"':
                    v, i = literal(i)
                    strs.append(v)
                    continue
                if c == "," and not depth:
                    args.append("".join(strs) if strs and not cur.strip() else cur.strip())
                    cur, strs = "", []
                else:
                    depth += c in "([{"
                    depth -= c in ")]}"
                    cur += c
                i += 1
            args.append("".join(strs) if strs and not cur.strip() else cur.strip())
            calls.append(args)
            i += 1
        else:
            i += 1
    return calls


# The cases: the OP_TORCH rows of tests/op_cases.def, in their order (each draws its random values after those
# of the rows before it)
for name, builder, loss, wd, args in c_calls(open(os.path.join(HERE, "..", "op_cases.def")).read(), "OP_TORCH"):
    eval("case(%r, %s, loss_op=%s, wd=%r)" % (name, args, loss != "0", float(wd.rstrip("fF"))))

# safetensors by hand (F32, little-endian): no dependency beyond torch
header, blobs, off = {}, [], 0
for k in sorted(tensors):
    b = tensors[k].numpy().astype("<f4").tobytes()
    header[k] = {"dtype": "F32", "shape": list(tensors[k].shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
header["__metadata__"] = {"lr": str(LR), "torch": torch.__version__}
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "torch_ops.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print(len(tensors), "tensors,", off, "bytes of data")
