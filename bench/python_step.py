#!/usr/bin/env python3
"""python_step.py - what the Python package adds to a training step: the README's
Fashion-MNIST MLP (784-128-10, Adam, batch 100) stepped in one process in alternating blocks
by Trainer.step (the package: feeds checked, converted when needed, passed) and by
nncl_trainer_step called through ctypes with a feed array made once (the C step, with only
the cost of one foreign call), with each step's own time as nncl_step_info.seconds reports
it. Prints the median per-step time of each over the rounds, the package's overhead against
both, and whether it is within the 5 % target.

usage: python3 bench/python_step.py [--rounds 30] [--steps 200] [--devices SEL]
(NNCL_LIBRARY names the library; by default build/libnncl.so of this tree)"""
import argparse
import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import numpy as np  # noqa: E402

import nncl  # noqa: E402
from nncl import _lib  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=30, help="alternating rounds (30)")
    p.add_argument("--steps", type=int, default=200, help="steps per block (200)")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--devices", default=None, help="device selection, as NNCL_DEVICES")
    a = p.parse_args()

    ctx = nncl.init(a.devices)
    g = nncl.Graph(ctx, seed=1)
    x, y = g.input("x", (784,)), g.input("y")
    logits = g.linear(g.linear(x, 128, act="relu", name="fc1"), 10, name="fc2")
    t = nncl.Trainer(g, g.softmax_cross_entropy(logits, y), optimizer="adam", lr=1e-3, max_batch=a.batch)
    rng = np.random.default_rng(1)
    X = rng.random((a.batch, 784), dtype=np.float32)
    Y = rng.integers(0, 10, a.batch).astype(np.float32)
    feeds = {x: X, y: Y}

    c_feeds = (_lib.Feed * 2)((x._h, X.ctypes.data), (y._h, Y.ctypes.data))
    info = _lib.StepInfoC()
    c_step = _lib.lib.nncl_trainer_step

    def block_c(n):
        inner = 0.0
        t0 = time.perf_counter()
        for _ in range(n):
            if c_step(t._h, c_feeds, 2, a.batch, ctypes.byref(info)):
                raise RuntimeError(nncl.last_error(ctx))
            inner += info.seconds
        return (time.perf_counter() - t0) / n, inner / n

    def block_py(n):
        inner = 0.0
        t0 = time.perf_counter()
        for _ in range(n):
            t.step(feeds)
            inner += t._info.seconds
        return (time.perf_counter() - t0) / n, inner / n

    print("device: %s" % ", ".join(d.name for d in ctx.devices))
    block_c(a.steps)  # warm: first steps, caches, clocks
    block_py(a.steps)
    c_wall, c_in, py_wall, py_in = [], [], [], []
    for r in range(a.rounds):
        order = (block_c, block_py) if r % 2 == 0 else (block_py, block_c)
        for fn in order:
            wall, inner = fn(a.steps)
            (c_wall if fn is block_c else py_wall).append(wall)
            (c_in if fn is block_c else py_in).append(inner)
    med = statistics.median
    cw, pw, ci, pi = med(c_wall), med(py_wall), med(c_in), med(py_in)
    print("per step, median of %d rounds of %d steps, batch %d:" % (a.rounds, a.steps, a.batch))
    print("  nncl_trainer_step through ctypes  %8.1f us  (step_info.seconds %8.1f us)" % (cw * 1e6, ci * 1e6))
    print("  Trainer.step                      %8.1f us  (step_info.seconds %8.1f us)" % (pw * 1e6, pi * 1e6))
    over_c = (pw - cw) / cw * 100
    over_in = (pw - pi) / pi * 100
    print("Trainer.step adds %.1f us: %+.2f %% to the ctypes call, %+.2f %% to the step's own time" % (
        (pw - cw) * 1e6, over_c, over_in))
    print("target: at most +5 %%: %s" % ("met" if over_c <= 5 and over_in <= 5 else "NOT met"))


if __name__ == "__main__":
    main()
