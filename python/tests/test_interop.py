"""The interop functions (OpenCL handles, kernel programs, GEMM variants, half storage) and the
trainer's newer options (gradient checkpointing, pipeline, memory fit, the step's arrangement)."""
import numpy as np
import pytest

import nncl

rng = np.random.default_rng(9)


def test_opencl_handles(ctx):
    platform, device, context, queue = ctx.opencl(0)
    assert platform and device and context and queue
    t = ctx.tensor(np.zeros((2, 3), np.float32))
    assert t.opencl
    with pytest.raises(nncl.InvalidArgumentError):
        ctx.opencl(ctx.device_count)


def test_kernel_programs(ctx):
    fams = nncl.kernel_families()
    assert "common.cl" in fams and len(fams) == len(set(fams)) > 3
    assert ctx.kernel_program(fams[1][:-3])
    with pytest.raises(nncl.NNCLError):
        ctx.kernel_program("no_such_family")


def test_gemm_variants(ctx):
    variants = ctx.gemm_variants()
    assert ctx.gemm_tuned() in (False, True)
    if not variants:
        pytest.skip("the device has no own GEMM variants")
    m, n, k = 5, 7, 6
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    ran = 0
    for v, (name, takes) in enumerate(variants.items()):
        assert name
        if (False, True) not in takes:
            continue
        c = nncl.gemm_variant(v, ta, tb, ctx.tensor(np.full((m, n), np.nan, np.float32)), m, n, k, trans_b=True)
        np.testing.assert_allclose(c.read(), a @ b.T, rtol=1e-4, atol=1e-4)
        ran += 1
    assert ran
    nncl.gemm(ta, tb, trans_b=True)
    ctx.finish()
    assert isinstance(ctx.gemm_chosen(m, n, k, trans_b=True), str)


def test_gemm_half(ctx):
    m, n, k = 4, 6, 8
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ta, tb, tc = ctx.tensor(shape=(m * k,)), ctx.tensor(shape=(k * n,)), ctx.tensor(shape=(m * n,))
    ta.write_half(a)
    tb.write_half(b)
    tc.write_half(np.full(m * n, np.nan, np.float32))
    nncl.gemm_half(ta, tb, tc, m, n, k)
    got = tc.read().view(np.float16)[:m * n].astype(np.float32).reshape(m, n)
    ref = a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError):
        ta.write_half(np.zeros(2 * m * k + 1))
    with pytest.raises(ValueError):
        ta.write_half(a, store="fp8")


def mlp(ctx):
    g = nncl.Graph(ctx, 3)
    x, y = g.input("x", (6,)), g.input("y", ())
    h = g.linear(x, 16, act="relu", name="fc1")
    loss = g.softmax_cross_entropy(g.linear(h, 3, name="fc2"), y)
    return g, x, y, loss


def test_train_config_fields(ctx):
    g, x, y, loss = mlp(ctx)
    t = nncl.Trainer(g, loss, optimizer="sgd", lr=0.1, max_batch=8, checkpoint="auto", micro_batches=2,
                     pipeline=0, cuts=None)
    t.step({x: rng.standard_normal((8, 6)), y: rng.integers(0, 3, 8)})
    info = t.last_step
    assert info.arrangement in ("one", "data") and info.arrangement_why
    assert t.stages() == [] and t.stage_device("fc1") == -1
    with pytest.raises(ValueError, match="checkpoint"):
        nncl.Trainer(g, loss, checkpoint="sometimes")


def test_pipeline(ctx):
    two = nncl.init(devices="all")
    if two.device_count < 2:
        pytest.skip("pipeline stages need two devices (POCL_DEVICES='pthread pthread')")
    g, x, y, loss = mlp(two)
    with pytest.raises(nncl.InvalidArgumentError, match="no_such_node"):
        nncl.Trainer(g, loss, max_batch=4, devices=[0, 1], pipeline=1, cuts=["no_such_node"])
    t = nncl.Trainer(g, loss, optimizer="sgd", lr=0.1, max_batch=4, devices=[0, 1], pipeline=1, micro_batches=2,
                     cuts=["fc1"])
    one = nncl.Trainer(g, loss, optimizer="sgd", lr=0.1, max_batch=4, devices=[0])
    xs, ys = rng.standard_normal((4, 6)), rng.integers(0, 3, 4)
    for _ in range(2):
        np.testing.assert_allclose(t.step({x: xs, y: ys}), one.step({x: xs, y: ys}), rtol=1e-5)
    assert t.last_step.arrangement == "pipeline" and one.last_step.arrangement == "one"
    stages = t.stages()
    assert [s.device for s in stages] == [0, 1] and stages[0].first == stages[0].last == "fc1"
    assert stages[0].params == 6 * 16 + 16 and stages[1].params == 16 * 3 + 3
    assert t.stage_device("fc1") == 0 and t.stage_device("fc2") == 1 and t.stage_device("nope") == -1
    assert stages[0].held_micro_batches == 2 and stages[0].held_bytes > 0 and stages[1].held_micro_batches == 0
    assert [s.arenas for s in stages] == [2, 1] and [s.recomputed for s in stages] == [0, 0]
    forced = nncl.Trainer(g, loss, max_batch=4, devices=[0, 1], arrangement="data", pipe_schedule="gpipe")
    forced.step({x: xs, y: ys})
    assert forced.last_step.arrangement == "data" and forced.last_step.n_devices == 2
    with pytest.raises(ValueError, match="arrangement"):
        nncl.Trainer(g, loss, devices=[0, 1], arrangement="sometimes")


def test_max_batch_fit(ctx):
    g, x, y, loss = mlp(ctx)
    fit = nncl.max_batch_fit(g, loss, limit=64, optimizer="adam")
    assert fit.batch == 64 and 0 <= fit.device < ctx.device_count
    assert 0 < fit.need_bytes <= fit.have_bytes and fit.segments >= 1
    small = nncl.init(memory_cap=1 << 20)
    g2, x2, y2, loss2 = mlp(small)
    g2.input("big", (200000,))
    w = g2.linear(g2.find("big"), 1, name="wide")  # 200000 floats of weights, more in Adam's state
    loss3 = g2.mse(w, g2.input("t", (1,)))
    fit2 = nncl.max_batch_fit(g2, loss3, limit=64)
    assert fit2.batch < 64 and fit2.have_bytes < (1 << 20)
