"""Every builder of Graph: its output shape, and its values in evaluation mode against NumPy
(so that each argument reaches the C builder in its place), losses through a step with lr 0."""
import math

import numpy as np
import pytest

import nncl
from nncl import graph as graph_mod

B = 3
rng = np.random.default_rng(5)


def forward(ctx, inputs, build, data=None, seed=3):
    """Builds inputs {name: sample shape} and out = build(g, nodes); returns out's values in
    evaluation mode for random (or the given) data, the trainer and the data by name."""
    g = nncl.Graph(ctx, seed)
    nodes = {n: g.input(n, s) for n, s in inputs.items()}
    out = build(g, nodes)
    loss = g.mse(out, g.input("target", out.shape))
    t = nncl.Trainer(g, loss, optimizer="sgd", lr=0.0, max_batch=B, x=nodes[next(iter(inputs))])
    data = dict(data or {})
    for n, s in inputs.items():
        if n not in data:
            data[n] = rng.standard_normal((B,) + tuple(s)).astype(np.float32)
    got = t.predict({nodes[n]: v for n, v in data.items()}, out)
    assert got.shape == (B,) + out.shape
    return got, t, data


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def test_every_builder_is_tested():
    covered = set(BINARY) | set(UNARY) | {n[5:] for n in globals() if n.startswith("test_")}
    untested = [s[0] for s in graph_mod.BUILDERS if s[0] not in covered]
    assert not untested


def test_input(ctx):
    g = nncl.Graph(ctx, 1)
    assert g.input("x", (2, 3)).shape == (2, 3)
    assert g.input("label").shape == ()
    assert g.find("x").shape == (2, 3) and g.find("nope") is None
    with pytest.raises(nncl.GraphError, match="x"):
        g.input("x", (2,))  # a second node of that name


def test_param(ctx):
    def build(g, n):
        w = g.param("w", (4,), init="ones")
        u = g.param("u", (4,), init="uniform", scale=0.5)
        return g.add(g.add(n["x"], w), g.scale(u, 0.0))
    got, t, d = forward(ctx, {"x": (4,)}, build)
    close(got, d["x"] + 1)
    u = t.param("u")
    assert u.shape == (4,) and np.all(np.abs(u) <= 0.5) and np.any(u != 0)
    with pytest.raises(ValueError, match="init"):
        nncl.Graph(ctx).param("p", (2,), init="glorot")


def test_freeze(ctx):
    g = nncl.Graph(ctx, 2)
    x, y = g.input("x", (3,)), g.input("y", (2,))
    h = g.linear(x, 4, name="a")
    out = g.linear(h, 2, name="b")
    g.freeze(g["a.weight"])
    t = nncl.Trainer(g, g.mse(out, y), optimizer="sgd", lr=0.1, max_batch=B)
    a0, b0 = t.param("a.weight"), t.param("b.weight")
    t.step({x: rng.standard_normal((B, 3)), y: rng.standard_normal((B, 2))})
    assert np.array_equal(t.param("a.weight"), a0) and not np.array_equal(t.param("b.weight"), b0)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(ctx, op):
    ref = BINARY[op]
    got, t, d = forward(ctx, {"a": (2, 3), "b": (2, 3)}, lambda g, n: getattr(g, op)(n["a"], n["b"]))
    close(got, ref(d["a"], d["b"]))
    # b a vector of a's last dimension
    got, t, d = forward(ctx, {"a": (2, 3)}, lambda g, n: getattr(g, op)(n["a"], g.param("v", (3,), init="normal")))
    close(got, ref(d["a"], t.param("v")))


def erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


UNARY = {
    "scale": ((2.5,), lambda x: 2.5 * x),
    "relu": ((), lambda x: np.maximum(x, 0)),
    "leaky_relu": ((0.2,), lambda x: np.where(x > 0, x, 0.2 * x)),
    "sigmoid": ((), lambda x: 1 / (1 + np.exp(-x))),
    "tanh": ((), np.tanh),
    "gelu": ((), lambda x: x / 2 * (1 + erf(x / math.sqrt(2)))),
    "gelu_tanh": ((), lambda x: x / 2 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    "silu": ((), lambda x: x / (1 + np.exp(-x))),
    "elu": ((0.7,), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1))),
    "softplus": ((), lambda x: np.log1p(np.exp(x))),
    "softmax": ((), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    "log_softmax": ((), lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True))),
    "relu6": ((), lambda x: np.clip(x, 0, 6)),
    "hardswish": ((), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hardsigmoid": ((), lambda x: np.clip(x + 3, 0, 6) / 6),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(ctx, op):
    args, ref = UNARY[op]
    got, t, d = forward(ctx, {"x": (2, 5)}, lambda g, n: getattr(g, op)(n["x"], *args))
    close(got, ref(d["x"]), 1e-4)


def test_linear(ctx):
    got, t, d = forward(ctx, {"x": (5,)}, lambda g, n: g.linear(n["x"], 4, act="relu", name="fc"))
    close(got, np.maximum(d["x"] @ t.param("fc.weight").T + t.param("fc.bias"), 0))
    got, t, d = forward(ctx, {"x": (5,)}, lambda g, n: g.linear(n["x"], 4, bias=False, act="sigmoid", name="fc"))
    assert t.graph.find("fc.bias") is None and t.param("fc.weight").shape == (4, 5)
    close(got, 1 / (1 + np.exp(-(d["x"] @ t.param("fc.weight").T))))
    g = nncl.Graph(ctx)
    with pytest.raises(ValueError, match="act must be one of"):
        g.linear(g.input("x", (2,)), 2, act="swish", name="l")


def conv_ref(x, w, bias, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[2]
    ho, wo = (x.shape[2] - k) // stride + 1, (x.shape[3] - k) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(ho):
        for j in range(wo):
            patch = x[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            out[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return out + bias[None, :, None, None]


def test_conv2d(ctx):
    got, t, d = forward(ctx, {"x": (2, 5, 5)},
                        lambda g, n: g.conv2d(n["x"], 3, 3, stride=2, padding=1, act="tanh", name="conv"))
    assert got.shape == (B, 3, 3, 3)
    close(got, np.tanh(conv_ref(d["x"], t.param("conv.weight"), t.param("conv.bias"), 2, 1)), 1e-4)


def pool_ref(x, k, stride, pad, fn, fill):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    ho, wo = (x.shape[2] - k) // stride + 1, (x.shape[3] - k) // stride + 1
    return np.stack([np.stack([fn(x[:, :, i * stride:i * stride + k, j * stride:j * stride + k], axis=(2, 3))
                               for j in range(wo)], -1) for i in range(ho)], -2)


def test_maxpool2d(ctx):
    got, t, d = forward(ctx, {"x": (2, 4, 6)}, lambda g, n: g.maxpool2d(n["x"], 2))  # stride = kernel
    assert got.shape == (B, 2, 2, 3)
    close(got, pool_ref(d["x"], 2, 2, 0, np.max, -np.inf))


def test_avgpool2d(ctx):
    got, t, d = forward(ctx, {"x": (1, 4, 4)}, lambda g, n: g.avgpool2d(n["x"], 3, stride=1, padding=1))
    assert got.shape == (B, 1, 4, 4)
    close(got, pool_ref(d["x"], 3, 1, 1, np.mean, 0.0))  # the padding counts in the divisor


def test_global_avgpool(ctx):
    got, t, d = forward(ctx, {"x": (3, 2, 4)}, lambda g, n: g.global_avgpool(n["x"]))
    close(got, d["x"].mean(axis=(2, 3)))


def test_batchnorm(ctx):
    g = nncl.Graph(ctx, 1)
    x = g.input("x", (4,))
    out = g.batchnorm(x, momentum=0.3, eps=0.5, name="bn")
    t = nncl.Trainer(g, g.mse(out, g.input("y", (4,))), optimizer="sgd", lr=0.0, max_batch=B)
    X = rng.standard_normal((B, 4)).astype(np.float32)
    close(t.predict({x: X}, out), X / np.sqrt(1 + 0.5))  # running statistics 0 and 1, eps 0.5
    t.step({x: X, "y": np.zeros((B, 4))})
    close(t.param("bn.running_mean"), 0.3 * X.mean(0))  # momentum 0.3


def test_batchnorm_act(ctx):
    g = nncl.Graph(ctx, 1)
    x = g.input("x", (3, 2, 2))
    out = g.batchnorm_act(x, act="relu6", eps=0.5, name="bn")
    t = nncl.Trainer(g, g.mse(out, g.input("y", (3, 2, 2))), optimizer="sgd", lr=0.0, max_batch=B)
    X = 8 * rng.standard_normal((B, 3, 2, 2)).astype(np.float32)
    close(t.predict({x: X}, out), np.clip(X / np.sqrt(1 + 0.5), 0, 6))  # running statistics 0 and 1
    with pytest.raises(ValueError, match="relu6"):
        g.batchnorm_act(x, act="gelu", name="bn2")


def test_batchnorm_add_act(ctx):
    g = nncl.Graph(ctx, 1)
    x, r = g.input("x", (3, 2, 2)), g.input("r", (3, 2, 2))
    out = g.batchnorm_add_act(x, r, act="relu6", eps=0.5, name="bn")
    t = nncl.Trainer(g, g.mse(out, g.input("y", (3, 2, 2))), optimizer="sgd", lr=0.0, max_batch=B)
    X = rng.standard_normal((B, 3, 2, 2)).astype(np.float32)
    R = 4 * rng.standard_normal((B, 3, 2, 2)).astype(np.float32)
    close(t.predict({x: X, r: R}, out), np.clip(X / np.sqrt(1 + 0.5) + R, 0, 6))  # running statistics 0 and 1


def test_layernorm(ctx):
    got, t, d = forward(ctx, {"x": (6,)}, lambda g, n: g.layernorm(n["x"], eps=0.1, name="ln"))
    x = d["x"]
    close(got, (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 0.1), 1e-4)
    assert t.param("ln.weight").shape == (6,) and t.param("ln.bias").shape == (6,)


def test_dropout(ctx):
    got, t, d = forward(ctx, {"x": (8,)}, lambda g, n: g.dropout(n["x"], 0.5))
    close(got, d["x"])  # the identity in evaluation
    with pytest.raises(nncl.GraphError, match="probability 1.5"):
        g = nncl.Graph(ctx)
        g.dropout(g.input("x", (2,)), 1.5)


def test_embedding(ctx):
    idx = np.array([[0, 4], [2, 2], [1, 3]], np.float32)
    got, t, d = forward(ctx, {"i": (2,)}, lambda g, n: g.embedding(n["i"], 5, 3, name="emb"), data={"i": idx})
    assert got.shape == (B, 2, 3)
    close(got, t.param("emb.weight")[idx.astype(int)])


def test_reshape(ctx):
    got, t, d = forward(ctx, {"x": (6,)}, lambda g, n: g.reshape(n["x"], (2, 3)))
    close(got, d["x"].reshape(B, 2, 3))


def test_flatten(ctx):
    got, t, d = forward(ctx, {"x": (2, 3)}, lambda g, n: g.flatten(n["x"]))
    close(got, d["x"].reshape(B, 6))


def test_concat(ctx):
    got, t, d = forward(ctx, {"a": (2, 3), "b": (2, 2)}, lambda g, n: g.concat(n["a"], n["b"], axis=1))
    close(got, np.concatenate([d["a"], d["b"]], axis=2))
    with pytest.raises(nncl.GraphError):
        g = nncl.Graph(ctx)
        g.concat(g.input("a", (2, 3)), g.input("b", (3, 2)), axis=1)


def loss_of(ctx, build, pred_shape, target):
    g = nncl.Graph(ctx, 1)
    p, y = g.input("p", pred_shape), g.input("y", target.shape[1:])
    t = nncl.Trainer(g, build(g, p, y), optimizer="sgd", lr=0.0, max_batch=B)
    P = rng.standard_normal((B,) + pred_shape).astype(np.float32)
    return t.step({p: P, y: target}), P


def test_softmax_cross_entropy(ctx):
    y = np.array([0, 3, 1], np.float32)
    loss, p = loss_of(ctx, lambda g, p, y: g.softmax_cross_entropy(p, y), (4,), y)
    ls = p - np.log(np.exp(p).sum(1, keepdims=True))
    close(loss, -ls[np.arange(B), y.astype(int)].mean())


def test_bce_with_logits(ctx):
    y = rng.integers(0, 2, (B, 2)).astype(np.float32)
    loss, p = loss_of(ctx, lambda g, p, y: g.bce_with_logits(p, y), (2,), y)
    s = 1 / (1 + np.exp(-p))
    close(loss, -(y * np.log(s) + (1 - y) * np.log(1 - s)).mean())


def test_mse(ctx):
    y = rng.standard_normal((B, 3)).astype(np.float32)
    loss, p = loss_of(ctx, lambda g, p, y: g.mse(p, y), (3,), y)
    close(loss, ((p - y) ** 2).mean())


def test_builder_refusals_carry_the_c_message(ctx):
    g = nncl.Graph(ctx, 1)
    x = g.input("x", (3,))
    h = g.linear(x, 4, name="fc1")
    with pytest.raises(nncl.GraphError) as e:
        g.add(h, g.input("z", (5,)))
    msg = str(e.value)
    assert msg == nncl.last_error(ctx) and "[B,4]" in msg and "[B,5]" in msg
    with pytest.raises(nncl.GraphError, match="needs a name"):
        g.linear(x, 2)
    with pytest.raises(TypeError, match="must be a Node"):
        g.relu(None)
    other = nncl.Graph(ctx, 1).input("x", (3,))
    with pytest.raises(ValueError, match="another graph"):
        g.relu(other)


# ------------------------------------------------------------------ the GPT ops (GPT_API.md)

def needs(cname):
    if not hasattr(nncl._lib.lib, cname):
        pytest.skip("%s lacks %s" % (nncl.library_path, cname))


def test_matmul(ctx):
    needs("nncl_matmul")
    got, t, d = forward(ctx, {"a": (2, 3, 4), "b": (2, 4, 5)}, lambda g, n: g.matmul(n["a"], n["b"]))
    close(got, d["a"] @ d["b"], 1e-4)
    got, t, d = forward(ctx, {"a": (4, 3), "b": (5, 4)},
                        lambda g, n: g.matmul(n["a"], n["b"], transpose_a=True, transpose_b=True))
    close(got, np.swapaxes(d["a"], 1, 2) @ np.swapaxes(d["b"], 1, 2), 1e-4)
    # an unbatched parameter shared by every sample (weight tying)
    got, t, d = forward(ctx, {"a": (3, 4)}, lambda g, n: g.matmul(n["a"], g.param("w", (5, 4), init="normal"),
                                                               transpose_b=True))
    close(got, d["a"] @ t.param("w").T, 1e-4)


def test_transpose(ctx):
    needs("nncl_transpose")
    got, t, d = forward(ctx, {"x": (2, 3, 4)}, lambda g, n: g.transpose(n["x"], 0, 2))
    close(got, np.swapaxes(d["x"], 1, 3))
    got, t, d = forward(ctx, {"x": (2, 3, 4)}, lambda g, n: g.transpose(n["x"], -1, -2))
    close(got, np.swapaxes(d["x"], 2, 3))


def test_slice(ctx):
    needs("nncl_slice")
    got, t, d = forward(ctx, {"x": (2, 6)}, lambda g, n: g.slice(n["x"], 1, 2, 3))
    close(got, d["x"][:, :, 2:5])


def test_rmsnorm(ctx):
    needs("nncl_rmsnorm")
    got, t, d = forward(ctx, {"x": (3, 6)}, lambda g, n: g.rmsnorm(n["x"], eps=0.1, name="rms"))
    x = d["x"]
    close(got, x / np.sqrt((x * x).mean(-1, keepdims=True) + 0.1), 1e-4)
    assert np.array_equal(t.param("rms.weight"), np.ones(6))


def test_layernorm_ex(ctx):
    needs("nncl_layernorm_ex")
    got, t, d = forward(ctx, {"x": (2, 6)}, lambda g, n: g.layernorm_ex(n["x"], eps=0.1, bias=False, name="ln"))
    x = d["x"]
    close(got, (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 0.1), 1e-4)
    assert t.graph.find("ln.bias") is None and t.graph.find("ln.weight") is not None


def attention_ref(q, k, v, heads):
    b, T, C = q.shape
    hd = C // heads
    split = lambda a: a.reshape(b, T, heads, hd).transpose(0, 2, 1, 3).astype(np.float64)
    q, k, v = split(q), split(k), split(v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + np.triu(np.full((T, T), -np.inf), 1)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(b, T, C)


def test_causal_attention(ctx):
    needs("nncl_causal_attention")
    got, t, d = forward(ctx, {"q": (5, 6), "k": (5, 6), "v": (5, 6)},
                        lambda g, n: g.causal_attention(n["q"], n["k"], n["v"], 2, dropout=0.1))
    close(got, attention_ref(d["q"], d["k"], d["v"], 2), 1e-4)  # dropout: training only


def test_sequence_cross_entropy(ctx):
    needs("nncl_sequence_cross_entropy")
    y = np.array([[0, 3, -1], [2, -1, 1], [1, 1, 0]], np.float32)
    loss, p = loss_of(ctx, lambda g, p, y: g.sequence_cross_entropy(p, y, ignore_index=-1), (3, 4), y)
    ls = p - np.log(np.exp(p).sum(-1, keepdims=True))
    counted = y != -1
    want = -np.take_along_axis(ls, np.maximum(y, 0).astype(int)[..., None], -1)[..., 0][counted].mean()
    close(loss, want)


def test_param_decay(ctx):
    needs("nncl_param_decay")

    def weight_after_a_step(decay):
        g = nncl.Graph(ctx, 4)
        x, y = g.input("x", (3,)), g.input("y", (2,))
        out = g.linear(x, 2, name="fc")
        g.param_decay(g["fc.weight"], decay)
        t = nncl.Trainer(g, g.mse(out, y), optimizer="sgd", lr=0.1, weight_decay=0.5, max_batch=B)
        w = t.param("fc.weight")
        t.step({x: np.zeros((B, 3)), y: np.ones((B, 2))})  # x = 0: the weight's gradient is 0
        return w, t.param("fc.weight")
    w0, w1 = weight_after_a_step(False)
    assert np.array_equal(w0, w1)
    w0, w1 = weight_after_a_step(True)
    close(w1, w0 * (1 - 0.1 * 0.5))
    g = nncl.Graph(ctx)
    with pytest.raises(nncl.InvalidArgumentError) as e:
        g.param_decay(g.input("x", (2,)))
    assert str(e.value) == nncl.last_error(ctx)


def test_node_operators(ctx):
    got, t, d = forward(ctx, {"a": (2, 3), "b": (2, 3)}, lambda g, n: (n["a"] + n["b"]) * 2.0 - n["a"] * n["b"])
    close(got, (d["a"] + d["b"]) * 2 - d["a"] * d["b"])
    if hasattr(nncl._lib.lib, "nncl_matmul"):
        got, t, d = forward(ctx, {"a": (2, 3), "b": (3, 4)}, lambda g, n: n["a"] @ n["b"])
        close(got, d["a"] @ d["b"], 1e-4)


def test_clamp(ctx):
    got, t, d = forward(ctx, {"x": (2, 5)}, lambda g, n: g.clamp(n["x"], -0.5, 0.25))
    close(got, np.clip(d["x"], -0.5, 0.25))


def test_upsample2d(ctx):
    got, t, d = forward(ctx, {"x": (2, 3, 4)}, lambda g, n: g.upsample2d(n["x"], 2, 3))
    assert got.shape == (B, 2, 6, 12)
    close(got, d["x"].repeat(2, axis=2).repeat(3, axis=3))
    got, t, d = forward(ctx, {"x": (1, 3, 4)}, lambda g, n: g.upsample2d(n["x"], 2, bilinear=True))
    assert got.shape == (B, 1, 6, 8)

    def axis_weights(n, f):  # align_corners=False: source max((o + 0.5) / f - 0.5, 0), the edge repeated
        m = np.zeros((n * f, n))
        for o in range(n * f):
            src = max((o + 0.5) / f - 0.5, 0.0)
            i0 = min(int(src), n - 1)
            i1 = min(i0 + 1, n - 1)
            m[o, i0] += 1 - (src - i0)
            m[o, i1] += src - i0
        return m
    close(got, np.einsum("oh,bchw,pw->bcop", axis_weights(3, 2), d["x"], axis_weights(4, 2)), 1e-5)


def norm_ref(x, groups, eps=1e-5):
    xs = x.reshape(x.shape[0], groups, -1).astype(np.float64)
    y = (xs - xs.mean(-1, keepdims=True)) / np.sqrt(xs.var(-1, keepdims=True) + eps)
    return y.reshape(x.shape)


def test_groupnorm(ctx):
    got, t, d = forward(ctx, {"x": (4, 3, 2)}, lambda g, n: g.groupnorm(n["x"], 2, name="gn"))
    assert t.param("gn.weight").shape == (4,) and t.param("gn.bias").shape == (4,)
    close(got, norm_ref(d["x"], 2), 1e-4)


def test_instancenorm(ctx):
    got, t, d = forward(ctx, {"x": (3, 5)}, lambda g, n: g.instancenorm(n["x"], eps=1e-3, name="in"))
    assert t.graph.find("in.weight") is None
    close(got, norm_ref(d["x"], 3, 1e-3), 1e-4)


def sig(x):
    return 1 / (1 + np.exp(-x))


def test_lstm(ctx):
    got, t, d = forward(ctx, {"x": (4, 3)}, lambda g, n: g.lstm(n["x"], 5, layers=2, name="rnn"))
    assert got.shape == (B, 4, 5)
    seq = d["x"].astype(np.float64)
    for l in range(2):
        wi, wh = t.param("rnn.weight_ih_l%d" % l), t.param("rnn.weight_hh_l%d" % l)
        bias = t.param("rnn.bias_ih_l%d" % l) + t.param("rnn.bias_hh_l%d" % l)
        h, c, out = np.zeros((B, 5)), np.zeros((B, 5)), []
        for s in range(seq.shape[1]):
            i, f, gg, o = np.split(seq[:, s] @ wi.T + h @ wh.T + bias, 4, axis=1)
            c = sig(f) * c + sig(i) * np.tanh(gg)
            h = sig(o) * np.tanh(c)
            out.append(h)
        seq = np.stack(out, 1)
    close(got, seq, 1e-4)


def test_gru(ctx):
    got, t, d = forward(ctx, {"x": (3, 2)}, lambda g, n: g.gru(n["x"], 4, name="gru"))
    assert got.shape == (B, 3, 4)
    wi, wh = t.param("gru.weight_ih_l0"), t.param("gru.weight_hh_l0")
    bi, bh = t.param("gru.bias_ih_l0"), t.param("gru.bias_hh_l0")
    h, out = np.zeros((B, 4)), []
    for s in range(3):
        xi, hh = d["x"][:, s] @ wi.T + bi, h @ wh.T + bh
        r, z = sig(xi[:, :4] + hh[:, :4]), sig(xi[:, 4:8] + hh[:, 4:8])
        n_ = np.tanh(xi[:, 8:] + r * hh[:, 8:])
        h = (1 - z) * n_ + z * h
        out.append(h)
    close(got, np.stack(out, 1), 1e-4)


def test_rnn_last(ctx):
    got, t, d = forward(ctx, {"x": (4, 3)}, lambda g, n: g.rnn_last(n["x"]))
    assert got.shape == (B, 3)
    close(got, d["x"][:, -1])


def conv_general(x, w, bias, stride, pad, dil, groups):
    bsz, c, hh, ww = x.shape
    o_n, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (hh + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (ww + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((bsz, o_n, oh, ow))
    for o in range(o_n):
        g = o // (o_n // groups)
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                           j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
                out[:, o] += np.einsum("bchw,c->bhw", patch, w[o, :, i, j])
    return out + bias[None, :, None, None]


def test_conv2d_ex(ctx):
    got, t, d = forward(ctx, {"x": (4, 6, 7)},
                        lambda g, n: g.conv2d_ex(n["x"], 6, kernel=(3, 2), stride=(1, 2), padding=(1, 2),
                                                 dilation=(2, 1), groups=2, act="relu", name="cv"))
    w = t.param("cv.weight")
    assert w.shape == (6, 2, 3, 2)
    ref = conv_general(d["x"], w, t.param("cv.bias"), (1, 2), (1, 2), (2, 1), 2)
    assert got.shape == ref.shape
    close(got, np.maximum(ref, 0), 1e-4)
    g = nncl.Graph(ctx)
    with pytest.raises(TypeError, match="unknown option"):
        g.conv2d_ex(g.input("x", (1, 4, 4)), 2, kernal=3)
    with pytest.raises(nncl.GraphError):
        g.conv2d_ex(g.find("x"), 3, groups=2)  # 1 channel in 2 groups


def test_conv1d(ctx):
    got, t, d = forward(ctx, {"x": (3, 9)},
                        lambda g, n: g.conv1d(n["x"], 2, kernel=4, stride=2, padding=1, bias=False, name="c1"))
    w = t.param("c1.weight")
    assert w.shape == (2, 3, 4) and t.graph.find("c1.bias") is None
    ref = conv_general(d["x"][:, :, None], w[:, :, None], np.zeros(2), (1, 2), (0, 1), (1, 1), 1)[:, :, 0]
    assert got.shape == ref.shape == (B, 2, 4)
    close(got, ref, 1e-4)


def test_conv_transpose2d(ctx):
    s, p, op_ = 2, 1, 1
    got, t, d = forward(ctx, {"x": (3, 3, 4)},
                        lambda g, n: g.conv_transpose2d(n["x"], 2, kernel=3, stride=s, padding=p,
                                                        output_padding=op_, name="ct"))
    w, bias = t.param("ct.weight"), t.param("ct.bias")
    assert w.shape == (3, 2, 3, 3)
    oh, ow = (3 - 1) * s - 2 * p + 3 + op_, (4 - 1) * s - 2 * p + 3 + op_
    full = np.zeros((B, 2, oh + 2 * p + 3, ow + 2 * p + 3))
    for ih in range(3):
        for iw in range(4):
            full[:, :, ih * s:ih * s + 3, iw * s:iw * s + 3] += np.einsum("bc,coij->boij", d["x"][:, :, ih, iw], w)
    ref = full[:, :, p:p + oh, p:p + ow] + bias[None, :, None, None]
    assert got.shape == ref.shape
    close(got, ref, 1e-4)


def test_checkpoint_mark(ctx):
    def run(checkpoint):
        g = nncl.Graph(ctx, 4)
        x, y = g.input("x", (6,)), g.input("y", (3,))
        h = g.linear(x, 8, act="tanh", name="fc1")
        if checkpoint == "marked":
            g.checkpoint_mark(h)
            with pytest.raises(nncl.InvalidArgumentError):
                g.checkpoint_mark(x)  # an input
        loss = g.mse(g.linear(g.linear(h, 8, act="tanh", name="fc2"), 3, name="fc3"), y)
        t = nncl.Trainer(g, loss, optimizer="sgd", lr=0.1, max_batch=4, checkpoint=checkpoint)
        r = np.random.default_rng(1)
        xs, ys = r.standard_normal((4, 6)).astype(np.float32), r.standard_normal((4, 3)).astype(np.float32)
        return [t.step({x: xs, y: ys}) for _ in range(3)], t.param("fc1.weight")
    base = run("none")
    for mode in ("marked", "auto"):
        got = run(mode)
        assert got[0] == base[0], mode  # recomputation is bit-identical
        np.testing.assert_array_equal(got[1], base[1])
