"""No leak over 1,000 trainer creations: the resident set stays bounded."""
import gc

import numpy as np

import nncl


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def make(ctx, k):
    g = nncl.Graph(ctx, seed=k)
    x, y = g.input("x", (32,)), g.input("y")
    logits = g.linear(g.linear(x, 64, act="relu", name="fc1"), 10, name="fc2")
    return nncl.Trainer(g, g.softmax_cross_entropy(logits, y), max_batch=64), x, y


def test_1000_trainers_rss_bounded(ctx):
    X, Y = np.zeros((64, 32), np.float32), np.zeros(64, np.float32)
    for k in range(50):  # warm: kernels built, caches and allocator pools filled
        t, x, y = make(ctx, k)
        t.step({x: X, y: Y})
    del t, x, y
    gc.collect()
    base = rss()
    alive = [make(ctx, k) for k in range(50)]
    each = max(1, (rss() - base) // 50)  # what one trainer and its graph hold (about 100 KiB)
    del alive
    gc.collect()
    start = rss()
    for k in range(1000):
        t, x, y = make(ctx, k)
        t.step({x: X, y: Y})
        del t, x, y
    gc.collect()
    grown = rss() - start
    # leaking the trainers, or only their graphs, would grow it by far more than 8 MiB
    assert grown < 8 * 2**20, "RSS grew by %.1f MiB over 1000 trainers of %.0f KiB each" % (grown / 2**20, each / 1024)
