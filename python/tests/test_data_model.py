"""Data (IDX, CSV, datasets, loaders), safetensors, models, fit with its progress and curve,
device tensors and eager ops, the context's device calls."""
import gzip
import math
import struct

import numpy as np
import pytest

import nncl
from test_errors import xor

rng = np.random.default_rng(9)


def idx_bytes(a, type_code=0x08):
    a = np.asarray(a)
    head = struct.pack(">BBBB", 0, 0, type_code, a.ndim) + b"".join(struct.pack(">I", d) for d in a.shape)
    return head + a.astype(">u1" if type_code == 0x08 else ">f4").tobytes()


def test_idx(tmp_path):
    img = rng.integers(0, 256, (5, 3, 4)).astype(np.uint8)
    lab = np.array([0, 2, 1, 2, 0], np.uint8)
    (tmp_path / "i.gz").write_bytes(gzip.compress(idx_bytes(img)))
    (tmp_path / "l").write_bytes(idx_bytes(lab))
    a = nncl.load_idx(tmp_path / "i.gz")
    assert a.shape == (5, 3, 4) and np.array_equal(a, img)
    assert np.array_equal(nncl.parse_idx(idx_bytes(lab)), lab)
    ds = nncl.Dataset.load_idx(tmp_path / "i.gz", tmp_path / "l")
    assert len(ds) == 5 and ds.shape == (1, 3, 4) and ds.classes == 3 and ds.features == 12
    np.testing.assert_allclose(ds.x[:, 0], img / 255, rtol=1e-6)
    ds2 = nncl.Dataset.from_idx(a, nncl.load_idx(tmp_path / "l"))  # the stored type kept: scaled
    assert np.array_equal(ds2.x, ds.x) and np.array_equal(ds2.y, lab)
    with pytest.raises(nncl.FormatError):
        nncl.parse_idx(idx_bytes(lab)[:-1], "short")


def test_csv_and_dataset_operations(tmp_path):
    text = "w,h,kind\n1,2,cat\n3,4,dog\n5,6,cat\n7,8,dog\n"
    t = nncl.parse_csv(text, "pets.csv")
    assert t.feature_names == ["w", "h"] and t.label_name == "kind" and t.class_names == ["cat", "dog"]
    assert np.array_equal(t.features, [[1, 2], [3, 4], [5, 6], [7, 8]]) and np.array_equal(t.labels, [0, 1, 0, 1])
    (tmp_path / "p.csv").write_text(text.replace(",", ";"))
    ds = nncl.Dataset.load_csv(tmp_path / "p.csv", label="kind", delimiter=";")
    assert ds.class_names == ["cat", "dog"] and ds.shape == (2,)
    ds = nncl.Dataset.from_csv(t)
    mean, std = ds.stats()
    np.testing.assert_allclose(mean, [4, 5]) and np.testing.assert_allclose(std, np.sqrt(5))
    ds.standardize(mean, std)
    np.testing.assert_allclose(ds.x.mean(0), 0, atol=1e-6)
    ds.scale(2.0, 1.0)
    np.testing.assert_allclose(ds.x.mean(0), 1, atol=1e-6)
    x, y = ds.gather([3, 0])
    assert np.array_equal(x, ds.x[[3, 0]]) and np.array_equal(y, [1, 0])
    bx, by = ds.batch(1, 2)
    assert np.array_equal(bx, ds.x[1:3])
    sub = ds.subset([1, 1, 2])
    assert len(sub) == 3 and np.array_equal(sub.y, [1, 1, 0])
    tr, va = ds.split(0.25, seed=1)
    assert (len(tr), len(va)) == (3, 1)
    perm = nncl.permutation(4, 5)
    assert sorted(perm) == [0, 1, 2, 3]
    before = ds.x.copy()
    ds.shuffle(5)
    assert np.array_equal(ds.x, before[perm])
    with pytest.raises(nncl.FormatError, match="pets.csv:line 2"):
        nncl.parse_csv("w,kind\nabc,cat\n", "pets.csv")


def test_loader():
    ds = nncl.Dataset.from_numpy(np.arange(10, dtype=np.float32).reshape(10, 1), np.zeros(10))
    ld = ds.loader(4, seed=2, shuffle=True)
    assert len(ld) == 3
    seen = [x.copy() for x, y in ld]
    assert [len(s) for s in seen] == [4, 4, 2] and sorted(np.concatenate(seen).ravel()) == list(range(10))
    assert ld.epoch == 1
    ld.reset(0)
    assert np.array_equal(ld.next()[0], seen[0])
    assert [len(x) for x, _ in nncl.Loader(ds, 4, drop_last=True)] == [4, 4]


def test_loader_augment():
    # 1x3x4 images, pixel p of sample i = 100 i + p + 1: each output is its image moved
    # (zeros moved in) and perhaps mirrored, never anything else
    imgs = (100 * np.arange(20)[:, None] + np.arange(12)[None, :] + 1).astype(np.float32).reshape(20, 1, 3, 4)
    ds = nncl.Dataset.from_numpy(imgs, np.zeros(20))
    ld = nncl.Loader(ds, 5, seed=3, augment=nncl.augment(shift=1, flip_horizontal=True, shape=(1, 3, 4)))
    flips = 0
    for x, _ in ld:
        for s in x:
            i = int(s.max() - 1) // 100
            cands = []
            for f in (0, 1):
                for dy in (-1, 0, 1):
                    for dx in (-1, 0, 1):
                        m = np.zeros((1, 5, 6), np.float32)
                        m[:, 1 + dy:4 + dy, 1 + dx:5 + dx] = imgs[i]
                        m = m[:, 1:4, 1:5]
                        cands.append((f, m[:, :, ::-1] if f else m))
            hit = [f for f, m in cands if np.array_equal(m, s)]
            assert hit, s
            flips += hit[0]
    assert 0 < flips < 20
    with pytest.raises(nncl.InvalidArgumentError, match="features per sample"):
        nncl.Loader(ds, 5, augment=nncl.augment(shift=1, shape=(1, 4, 4)))


def test_safetensors_roundtrip(tmp_path):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    nncl.save_safetensors(tmp_path / "t.safetensors", {"a": a, "s": np.float32(2.5), "h": a[0]},
                          metadata={"k": "v"}, dtype={"h": "F16"})
    st = nncl.load_safetensors(tmp_path / "t.safetensors")
    assert st.keys() == ["a", "s", "h"] and "a" in st and "b" not in st and len(st) == 3
    assert np.array_equal(st["a"], a) and st["s"].shape == () and float(st["s"]) == 2.5
    assert st.dtype("h") == "F16" and st.dtype("a") == "F32"
    np.testing.assert_allclose(st["h"], a[0], rtol=1e-3)
    assert st.metadata == {"format": "pt", "k": "v"} and st.meta("k") == "v" and st.meta("x") is None
    assert np.array_equal(st.expect("a", (3, 4)), a)
    with pytest.raises(nncl.ShapeError, match=r"\[4, 3\]|4,3"):
        st.expect("a", (4, 3))


def test_model_save_load_predict(ctx, tmp_path):
    t, x, y = xor(ctx)
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
    Y = np.array([0, 1, 1, 0], np.float32)
    for _ in range(300):
        t.step({x: X, y: Y})
    t.save_model(tmp_path / "m.safetensors", scale=0.5, class_names=["even", "odd"], label_name="parity")
    m = nncl.Model.load(ctx, tmp_path / "m.safetensors")
    assert (m.features, m.input_shape, m.classes, m.class_names, m.label_name) == (2, (2,), 2, ["even", "odd"],
                                                                                   "parity")
    probs, classes = m.predict(X * 2)  # raw rows, scaled by 0.5 on the way in
    logits = t.predict({x: X})
    assert np.array_equal(classes, logits.argmax(1)) and np.array_equal(classes, Y)
    np.testing.assert_allclose(probs, np.exp(logits) / np.exp(logits).sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(m.preprocess(X * 2), X)
    mt = m.trainer  # the model's own plans: predict any node
    assert np.array_equal(mt.predict({mt.graph["x"]: X}, mt.graph["fc2"]), logits)
    assert np.array_equal(mt.param("fc1.weight"), t.param("fc1.weight"))
    g = nncl.Graph.from_safetensors(tmp_path / "m.safetensors", ctx)
    assert g["fc1.weight"].shape == (8, 2) and "fc2" in g.summary()
    # parameters and checkpoints
    t.save(tmp_path / "w.safetensors")
    t2, x2, y2 = xor(ctx)
    t2.load(tmp_path / "w.safetensors")
    assert np.array_equal(t2.predict({x2: X}), logits)
    t2.set_param("fc2.bias", [1, 2])
    assert np.array_equal(t2.param("fc2.bias"), [1, 2])
    t.save_checkpoint(tmp_path / "c.safetensors")
    t2.load_checkpoint(tmp_path / "c.safetensors")
    assert t2.step_count == 300
    assert t.step({x: X, y: Y}) == t2.step({x2: X, y2: Y})


def test_fit_with_progress_curve_and_callbacks(ctx, capfd, tmp_path):
    n = 400
    X = rng.standard_normal((n, 2)).astype(np.float32)
    Y = (X[:, 0] * X[:, 1] > 0).astype(np.float32)
    t, x, y = xor(ctx, max_batch=40)
    r = t.fit(X, Y, epochs=3, batch=40, val_fraction=0.25, seed=1, progress=True)
    err = capfd.readouterr().err
    assert "epoch 3/3" in err and "val_acc" in err  # the library's progress lines on stderr
    assert (r.epochs_done, r.train_samples, r.val_samples) == (3, 300, 100) and len(r.history) == 3
    assert r.history[0].epoch == 1 and r.history[-1].val_loss == r.history[-1].val_loss
    loss, acc = t.evaluate(X, Y)
    loss2, acc2 = t.evaluate(nncl.Dataset.from_numpy(X, Y))
    assert math.isclose(loss, loss2, rel_tol=1e-5) and acc == acc2 and 0 <= acc <= 1
    calls = []
    r = t.fit(X, Y, epochs=5, batch=40, progress=False, on_step=lambda e, s, l: calls.append((e, s)) or s == 2)
    assert r.interrupted and calls == [(0, 0), (0, 1), (0, 2)] and capfd.readouterr().err == ""

    def interrupt(e, s, l):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        t.fit(X, Y, epochs=5, batch=40, progress=False, on_step=interrupt)
    p = nncl.Progress(2, 10, mode="lines")
    t.fit(X, Y, epochs=2, batch=40, progress=p)
    p.close()
    assert "epoch 2/2" in capfd.readouterr().err


def test_progress_curve_and_charts(capfd, tmp_path):
    p = nncl.Progress(1, 2, mode="lines", interval=0)
    p.update(0, 0, 0.5, 0.75, 10)
    p.message("hello")
    p.epoch_end(0, 0.5, 0.75)
    p.close()
    err = capfd.readouterr().err
    assert "hello" in err and "epoch 1/1" in err
    c = nncl.Curve()
    c.add(epoch=1, train_loss=0.5, train_acc=0.8, val_loss=0.6, val_acc=0.7, seconds=1.0, samples_per_s=100)
    c.add(nncl.CurveRow(2, 0.4, 0.85))
    assert len(c) == 2 and c[-1].train_loss == pytest.approx(0.4) and math.isnan(c[1].val_loss)
    c.write_csv(tmp_path / "c.csv")
    c.write_svg(tmp_path / "c.svg", "a title")
    assert (tmp_path / "c.csv").read_text().startswith("epoch,train_loss")
    assert "a title" in (tmp_path / "c.svg").read_text()
    nncl.svg_bar_chart(tmp_path / "b.svg", "speed", "samples/s", ["a", "b"], [1.0, 2.0])
    nncl.svg_bar_panels(tmp_path / "p.svg", "speed", "samples/s", [("MLP", ["a"], [3.0]), ("CNN", ["a", "b"], [1, 2])])
    assert "MLP" in (tmp_path / "p.svg").read_text() and "speed" in (tmp_path / "b.svg").read_text()


def test_summary_and_learning_rate(ctx):
    t, x, y = xor(ctx)
    s = t.summary()
    assert "fc1" in s and "parameters" in s and "device 0" in s
    assert "fc1" in t.graph.summary()
    assert sum(t.shards()) == 4 and len(t.shards()) == ctx.device_count
    assert nncl.learning_rate(0, "sgd", lr=0.1, warmup_steps=10) == pytest.approx(0.01)
    assert nncl.learning_rate(100, "adam", lr=1.0, schedule="cosine", total_steps=100) == pytest.approx(0.0, abs=1e-6)
    assert t.last_step.loss == 0 and isinstance(t.last_step, nncl.StepInfo)


def test_tensors_and_eager_ops(ctx):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    ta, tb = ctx.tensor(a), nncl.Tensor(ctx, (3, 4), data=b)
    assert ta.shape == (3, 4) and ta.size == 12 and ta.device == 0 and np.array_equal(ta.read(), a)
    np.testing.assert_allclose(nncl.add(ta, tb).read(), a + b, rtol=1e-6)
    np.testing.assert_allclose(nncl.sub(ta, tb).read(), a - b, rtol=1e-6)
    np.testing.assert_allclose(nncl.mul(ta, tb).read(), a * b, rtol=1e-6)
    np.testing.assert_allclose(nncl.scale(ta, 3).read(), 3 * a, rtol=1e-6)
    np.testing.assert_allclose(nncl.relu(ta).read(), np.maximum(a, 0))
    np.testing.assert_allclose(nncl.sigmoid(ta).read(), 1 / (1 + np.exp(-a)), rtol=1e-5)
    np.testing.assert_allclose(nncl.tanh(ta).read(), np.tanh(a), rtol=1e-5, atol=1e-6)
    assert nncl.gelu(ta).shape == (3, 4)
    sm = np.exp(a) / np.exp(a).sum(1, keepdims=True)
    np.testing.assert_allclose(nncl.softmax(ta).read(), sm, rtol=1e-5)
    np.testing.assert_allclose(nncl.log_softmax(ta).read(), np.log(sm), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(nncl.sum(ta, 0).read(), a.sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nncl.mean(ta, 1).read(), a.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nncl.gemm(ta, tb, trans_b=True).read(), a @ b.T, rtol=1e-4, atol=1e-5)
    c = ctx.tensor(np.ones((4, 4)))
    nncl.gemm(ta, tb, c, alpha=2.0, beta=1.0, trans_a=True)
    np.testing.assert_allclose(c.read(), 2 * a.T @ b + 1, rtol=1e-4, atol=1e-5)
    tc = nncl.Tensor(ctx, (12,))
    tc.copy_from(ta)
    assert np.array_equal(tc.read(), a.ravel())
    ev = tc.write_async(b.ravel())
    ev.wait()
    assert np.array_equal(tc.read_async().wait(), b.ravel())
    with pytest.raises(ValueError, match=r"5 values for a tensor of shape \(3, 4\)"):
        ta.write(np.zeros(5))
    with pytest.raises(nncl.ShapeError, match=r"nncl_add: b is \[5\]"):
        nncl.add(ta, ctx.tensor(np.zeros(5)))
    ctx.finish()
    used, peak = ctx.memory(0)
    assert peak >= used > 0


def test_profiling():
    pctx = nncl.init(profiling=True)
    t = pctx.tensor(np.ones((64, 64)))
    pctx.profile_start(0)
    nncl.relu(t)
    r = pctx.profile_stop(0)
    assert r.launches >= 1 and isinstance(r, nncl.ProfileReport)
    kernels = pctx.profile_kernels(0)
    assert kernels and any("relu" in k[0] for k in kernels)


def test_a_sequence_model_predicts_per_position(ctx, tmp_path):
    if not hasattr(nncl._lib.lib, "nncl_sequence_cross_entropy"):
        pytest.skip("%s has no sequence ops" % nncl.library_path)
    g = nncl.Graph(ctx, seed=2)
    tok, lab = g.input("tokens", (5,)), g.input("labels", (5,))
    logits = g.linear(g.embedding(tok, 7, 4, name="emb"), 7, name="head")
    t = nncl.Trainer(g, g.sequence_cross_entropy(logits, lab), max_batch=3)
    X = rng.integers(0, 7, (3, 5)).astype(np.float32)
    t.step({tok: X, lab: np.roll(X, -1, 1)})
    t.save_model(tmp_path / "seq.safetensors", input=tok, output=logits)
    m = nncl.Model.load(ctx, tmp_path / "seq.safetensors")
    assert m.positions == (5,) and m.classes == 7
    assert m.input.shape == (5,) and m.output.shape == (5, 7)
    probs, classes = m.predict(X)
    want = t.predict({tok: X}, logits)
    assert probs.shape == (3, 5, 7) and classes.shape == (3, 5)
    assert np.array_equal(classes, want.argmax(-1))
    np.testing.assert_allclose(probs, np.exp(want) / np.exp(want).sum(-1, keepdims=True), rtol=1e-5)


def test_ctrl_c_stops_fit(ctx):
    import os
    import signal
    import threading
    import time
    X = rng.standard_normal((400, 2)).astype(np.float32)
    Y = (X[:, 0] > 0).astype(np.float32)
    t, x, y = xor(ctx, max_batch=4)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.time()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            t.fit(X, Y, epochs=1000, batch=4, progress=False)  # minutes, were it not stopped
    finally:
        timer.cancel()
    assert 0 < t.step_count < 1000 * 100 and time.time() - start < 30
