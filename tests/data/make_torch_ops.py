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
# Run once (needs torch): python3 make_torch_ops.py
import json
import math
import struct

import torch
import torch.nn.functional as F

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


def bn(h, h2, P, S, train):
    return F.batch_norm(h, S["bn.running_mean"], S["bn.running_var"], P["bn.weight"], P["bn.bias"],
                        training=train, momentum=0.1, eps=1e-5)


for nm, f in [("relu", F.relu), ("leaky_relu", lambda h: F.leaky_relu(h, 0.1)), ("sigmoid", torch.sigmoid),
              ("tanh", torch.tanh), ("gelu", F.gelu), ("gelu_tanh", lambda h: F.gelu(h, approximate="tanh")),
              ("silu", F.silu), ("elu", F.elu), ("elu_half", lambda h: F.elu(h, 0.5)), ("softplus", F.softplus),
              ("scale", lambda h: h * 2.5), ("softmax", lambda h: F.softmax(h, -1)),
              ("log_softmax", lambda h: F.log_softmax(h, -1))]:
    case(nm, (4, 7), unary(f))
case("softplus_large", (4, 7), unary(F.softplus), scale=15.0)  # beyond the threshold of 20
case("add", (3, 5), lambda h, h2, P, S, t: h + h2, x2_shape=(3, 5))
case("sub", (3, 5), lambda h, h2, P, S, t: h - h2, x2_shape=(3, 5))
case("mul", (3, 5), lambda h, h2, P, S, t: h * h2, x2_shape=(3, 5))
case("add_vector", (3, 5), lambda h, h2, P, S, t: h + P["v"], params={"v": (5,)})
case("mul_vector", (3, 5), lambda h, h2, P, S, t: h * P["v"], params={"v": (5,)})
for act, f in [("none", lambda v: v), ("relu", F.relu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh)]:
    case("linear_" + act, (4, 6), lambda h, h2, P, S, t, f=f: f(F.linear(h, P["l.weight"], P["l.bias"])),
         params={"l.weight": (3, 6), "l.bias": (3,)})
case("linear_nobias", (4, 6), lambda h, h2, P, S, t: F.linear(h, P["l.weight"]), params={"l.weight": (3, 6)})
case("linear_3d", (2, 3, 6), lambda h, h2, P, S, t: F.linear(h, P["l.weight"], P["l.bias"]),
     params={"l.weight": (4, 6), "l.bias": (4,)})
# conv: name, in, out, k, stride, padding, bias, act, H, W
for nm, ci, co, k, s, pd, b, act, H, W in [("conv_3x3", 2, 3, 3, 1, 1, 1, F.relu, 6, 5),
                                          ("conv_stride2", 2, 3, 3, 2, 0, 1, None, 7, 7),
                                          ("conv_1x1", 3, 4, 1, 1, 0, 1, None, 4, 5),
                                          ("conv_5x5", 1, 2, 5, 2, 2, 0, torch.tanh, 8, 6)]:
    prm = {"c.weight": (co, ci, k, k)}
    if b:
        prm["c.bias"] = (co,)

    def conv(h, h2, P, S, t, s=s, pd=pd, act=act):
        y = F.conv2d(h, P["c.weight"], P.get("c.bias"), stride=s, padding=pd)
        return act(y) if act else y
    case(nm, (2, ci, H, W), conv, params=prm)
for nm, k, s, pd in [("maxpool_2", 2, 2, 0), ("maxpool_3s2p1", 3, 2, 1)]:
    case(nm, (2, 2, 6, 5), lambda h, h2, P, S, t, k=k, s=s, pd=pd: F.max_pool2d(h, k, s, pd))
for nm, k, s, pd in [("avgpool_2", 2, 2, 0), ("avgpool_3s2p1", 3, 2, 1)]:
    case(nm, (2, 2, 6, 5), lambda h, h2, P, S, t, k=k, s=s, pd=pd: F.avg_pool2d(h, k, s, pd, count_include_pad=True))
case("global_avgpool", (2, 3, 4, 5), lambda h, h2, P, S, t: h.mean(dim=(2, 3)))
case("batchnorm_2d", (6, 4), bn, params={"bn.weight": (4,), "bn.bias": (4,)},
     stats={"bn.running_mean": (4,), "bn.running_var": (4,)})
case("batchnorm_4d", (3, 2, 4, 5), bn, params={"bn.weight": (2,), "bn.bias": (2,)},
     stats={"bn.running_mean": (2,), "bn.running_var": (2,)})
case("layernorm", (3, 2, 6), lambda h, h2, P, S, t: F.layer_norm(h, (6,), P["ln.weight"], P["ln.bias"], 1e-5),
     params={"ln.weight": (6,), "ln.bias": (6,)})
case("embedding", (3, 4), lambda h, h2, P, S, t: F.embedding(h.long(), P["e.weight"]),
     params={"e.weight": (9, 5)}, x_int=9)
case("flatten", (2, 3, 2, 2), lambda h, h2, P, S, t: h.flatten(1))
case("reshape", (2, 6, 2), lambda h, h2, P, S, t: h.reshape(2, 3, 4))
case("concat_0", (2, 3, 4), lambda h, h2, P, S, t: torch.cat([h, h2], 1), x2_shape=(2, 2, 4))
case("concat_1", (2, 3, 4), lambda h, h2, P, S, t: torch.cat([h, h2], 2), x2_shape=(2, 3, 2))


def ce(h, h2, P, S, train):
    y = torch.tensor([2, 0, 4, 1, 4])
    return F.cross_entropy(h, y), y.float()


def bce(h, h2, P, S, train):
    t = torch.tensor([[0, 1, 1, 0, 0.5], [1, 0, 0.25, 1, 0], [0, 0, 1, 1, 1]]).float()
    return F.binary_cross_entropy_with_logits(h, t.double()), t


def mse(h, h2, P, S, train):
    return F.mse_loss(h, h2), h2.float()


case("softmax_cross_entropy", (5, 6), ce, loss_op=True, scale=3.0)
case("bce_with_logits", (3, 5), bce, loss_op=True, scale=3.0)
case("mse", (3, 5), mse, loss_op=True, x2_shape=(3, 5))

# The GPT's ops (appended, so that the cases above keep their random values)
case("matmul_shared_bt", (2, 3, 4), lambda h, h2, P, S, t: h @ P["w"].t(), params={"w": (5, 4)})
case("matmul_batched", (2, 3, 4), lambda h, h2, P, S, t: torch.matmul(h, h2), x2_shape=(2, 4, 5))
case("matmul_batched_ta", (2, 4, 3), lambda h, h2, P, S, t: h.transpose(-1, -2) @ h2, x2_shape=(2, 4, 5))
case("transpose", (2, 3, 4, 5), lambda h, h2, P, S, t: h.transpose(1, 3))
case("slice", (2, 3, 8), lambda h, h2, P, S, t: h[:, :, 2:6])
case("add_positions", (2, 3, 4), lambda h, h2, P, S, t: h + P["pos"], params={"pos": (3, 4)})
case("layernorm_nobias", (3, 2, 6), lambda h, h2, P, S, t: F.layer_norm(h, (6,), P["ln.weight"], None, 1e-5),
     params={"ln.weight": (6,)})
# torch 1.13 has no nn.RMSNorm: its definition written out
case("rmsnorm", (3, 2, 6), lambda h, h2, P, S, t: h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) *
     P["rms.weight"], params={"rms.weight": (6,)})


def seq_ce(h, h2, P, S, train):
    y = torch.tensor([[2, -100, 5, 0], [-100, 1, 3, 3]])
    return F.cross_entropy(h.reshape(-1, 6), y.reshape(-1), ignore_index=-100), y.float()


case("sequence_cross_entropy", (2, 4, 6), seq_ce, loss_op=True, scale=3.0)
# weight tying: the embedding's weight is also the output head (nanoGPT's wte / lm_head)
case("tied_head", (2, 3), lambda h, h2, P, S, t: F.embedding(h.long(), P["wte.weight"]) @ P["wte.weight"].t(),
     params={"wte.weight": (7, 5)}, x_int=7)
# weight decay on 2-D parameters only (nncl_param_decay 0 on the 1-D ones)
case("linear_decay_2d", (4, 6), lambda h, h2, P, S, t: F.linear(h, P["l.weight"], P["l.bias"]),
     params={"l.weight": (3, 6), "l.bias": (3,)}, wd=0.1)


def attention(h, h2, P, S, train, heads=2):
    """nanoGPT's CausalSelfAttention without its projections' biases, from
    q, k, v projections of h, written out (torch 1.13 has no fused one)."""
    B, T, C = h.shape
    q, k, v = (F.linear(h, P[n + ".weight"]).view(B, T, heads, C // heads).transpose(1, 2) for n in "qkv")
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // heads)
    att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return (F.softmax(att, -1) @ v).transpose(1, 2).reshape(B, T, C)


case("causal_attention", (2, 5, 6), attention, params={"q.weight": (6, 6), "k.weight": (6, 6), "v.weight": (6, 6)})
# convolutions of any geometry: groups, dilation, kernels and strides per axis, 1-D, transposed
case("conv2d_depthwise", (2, 4, 6, 5),
     lambda h, h2, P, S, t: F.relu(F.conv2d(h, P["c.weight"], P["c.bias"], padding=1, groups=4)),
     params={"c.weight": (4, 1, 3, 3), "c.bias": (4,)})
case("conv2d_grouped_dilated", (2, 4, 7, 8),
     lambda h, h2, P, S, t: F.conv2d(h, P["c.weight"], P["c.bias"], stride=(1, 2), padding=(2, 0), dilation=(2, 1),
                                     groups=2),
     params={"c.weight": (6, 2, 3, 1), "c.bias": (6,)})
case("conv1d", (2, 3, 9), lambda h, h2, P, S, t: torch.tanh(F.conv1d(h, P["c.weight"], P["c.bias"], stride=2, padding=1)),
     params={"c.weight": (4, 3, 3), "c.bias": (4,)})
case("conv_transpose2d", (2, 3, 4, 5),
     lambda h, h2, P, S, t: F.conv_transpose2d(h, P["c.weight"], P["c.bias"], stride=2, padding=1, output_padding=1),
     params={"c.weight": (3, 2, 3, 3), "c.bias": (2,)})
# depthwise kernels (src/ops/conv_dw.c): 5x5 at stride 2 with 2 outputs per channel, dilation with strides 1 and 2,
# 1x3 at stride 2 along H; rows of 13 and 29
case("conv2d_depthwise_5x5_s2", (2, 5, 13, 13),
     lambda h, h2, P, S, t: F.conv2d(h, P["c.weight"], None, stride=2, padding=2, groups=5),
     params={"c.weight": (10, 1, 5, 5)})
case("conv2d_depthwise_dilated", (2, 3, 7, 29),
     lambda h, h2, P, S, t: torch.sigmoid(F.conv2d(h, P["c.weight"], P["c.bias"], stride=(1, 2), padding=(2, 1),
                                                   dilation=2, groups=3)),
     params={"c.weight": (3, 1, 3, 3), "c.bias": (3,)})
case("conv2d_depthwise_1x3", (2, 7, 5, 13),
     lambda h, h2, P, S, t: F.conv2d(h, P["c.weight"], P["c.bias"], stride=(2, 1), padding=(0, 1), groups=7),
     params={"c.weight": (7, 1, 1, 3), "c.bias": (7,)})
# MobileNet's activations: random inputs, then exactly on every kink (the gradients there are PyTorch's choices)
KINKS = [-4.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0, 7.0]
for nm, f in [("relu6", F.relu6), ("hardswish", F.hardswish), ("hardsigmoid", F.hardsigmoid),
              ("clamp", lambda h: h.clamp(-1.0, 1.0))]:
    case(nm, (4, 7), unary(f), scale=4.0)
    # PyTorch 1.13's CPU kernels disagree on hardswish's gradient at exactly 3: 1.5 from the scalar loop (and
    # CUDA), 1 from the vectorised one (whole vectors of elements); nncl takes 1.5, and the case leaves 3 out
    case(nm + "_kinks", (2, 4), unary(f), x_fixed=[v if nm != "hardswish" or v != 3.0 else 2.0 for v in KINKS])
# group norm (affine) and instance norm (PyTorch's default: no affine, no running statistics)
case("groupnorm", (2, 6, 3, 4), lambda h, h2, P, S, t: F.group_norm(h, 3, P["gn.weight"], P["gn.bias"], 1e-5),
     params={"gn.weight": (6,), "gn.bias": (6,)})
case("instancenorm", (2, 3, 5, 4), lambda h, h2, P, S, t: F.instance_norm(h, eps=1e-5))
# upsampling by whole factors: nearest, and bilinear with align_corners=False
case("upsample_nearest", (2, 2, 3, 4), lambda h, h2, P, S, t: F.interpolate(h, scale_factor=(2, 3), mode="nearest"))
case("upsample_bilinear", (2, 2, 3, 4),
     lambda h, h2, P, S, t: F.interpolate(h, scale_factor=(3, 2), mode="bilinear", align_corners=False))
# recurrent layers: PyTorch's own nn.LSTM / nn.GRU (batch first) run on the case's parameters (its forward
# reads the list _flat_weights, in the order of _flat_weights_names)
def recurrent(kind, F_, H):
    mod = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(F_, H, batch_first=True).double()

    def run(h, h2, P, S, t):
        mod._flat_weights = [P["r." + k] for k in mod._flat_weights_names]
        return mod(h)[0]
    G = 4 if kind == "lstm" else 3
    return run, {"r.weight_ih_l0": (G * H, F_), "r.weight_hh_l0": (G * H, H), "r.bias_ih_l0": (G * H,),
                 "r.bias_hh_l0": (G * H,)}


for kind in ("lstm", "gru"):
    f, prm = recurrent(kind, 3, 4)
    case(kind, (2, 5, 3), f, params=prm)
# batch norm with its activation and residual in one node (nncl_batchnorm_act)
case("batchnorm_act_relu_residual", (3, 2, 4, 5), lambda h, h2, P, S, t: F.relu(bn(h, h2, P, S, t) + h2),
     x2_shape=(3, 2, 4, 5), params={"bn.weight": (2,), "bn.bias": (2,)},
     stats={"bn.running_mean": (2,), "bn.running_var": (2,)})
case("batchnorm_act_hardswish", (6, 4), lambda h, h2, P, S, t: F.hardswish(bn(h, h2, P, S, t)),
     params={"bn.weight": (4,), "bn.bias": (4,)}, stats={"bn.running_mean": (4,), "bn.running_var": (4,)})

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
with open("torch_ops.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print(len(tensors), "tensors,", off, "bytes of data")
