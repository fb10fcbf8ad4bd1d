#!/usr/bin/env python3
"""tinygrad_compare.py - the bench's Fashion-MNIST MLP (784-128-10, ReLU,
Adam lr 1e-3, batch 100, synthetic data) trained by tinygrad on an OpenCL
device (tinygrad's CL backend: the first OpenCL platform, PoCL on a CPU-only
machine), timed as bench/pytorch_compare.py times PyTorch: a jitted step,
warm-up first, median of repeats. Prints samples/s, or with --json one JSON
object. bench/pytorch_compare.py --tinygrad runs it in each round.

When tinygrad is not installed it says so and exits 0.

  python3 bench/tinygrad_compare.py [--repeats N] [--seconds S] [--json]
"""
import argparse
import json
import os
import statistics
import sys
import time

BATCH = 100


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="timed repeats (median reported)")
    p.add_argument("--seconds", type=float, default=1.0, help="least duration of one repeat")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()
    # tinygrad reads its device and mode from the environment at import
    os.environ.setdefault("DEV", "CL")
    os.environ.setdefault("TRAINING", "1")
    try:
        from tinygrad import Tensor, TinyJit, nn, Device
        from tinygrad.nn.optim import Adam
    except ImportError:
        print("tinygrad is not installed (pip install tinygrad)")
        return 0

    class MLP:
        def __init__(self):
            self.l1, self.l2 = nn.Linear(784, 128), nn.Linear(128, 10)

        def __call__(self, x):
            return self.l2(self.l1(x).relu())

    Tensor.manual_seed(1)
    model = MLP()
    opt = Adam(nn.state.get_parameters(model), lr=1e-3)
    x = Tensor.randn(BATCH, 784).realize()
    y = Tensor.randint(BATCH, high=10).realize()

    @TinyJit
    def step(xb, yb):
        opt.zero_grad()
        loss = model(xb).sparse_categorical_crossentropy(yb)
        loss.backward()
        opt.step()
        return loss.realize()

    for _ in range(5):  # compiles the kernels and captures the jit
        step(x, y).item()
    rates = []
    for _ in range(a.repeats):
        steps, t0 = 0, time.perf_counter()
        while True:
            loss = step(x, y)
            steps += 1
            if steps % 20 == 0:
                loss.item()  # the device queue drains here
                if time.perf_counter() - t0 >= a.seconds:
                    break
        rates.append(steps * BATCH / (time.perf_counter() - t0))
    med = statistics.median(rates)
    if a.json:
        print(json.dumps({"device": Device.DEFAULT, "mlp": med, "min": min(rates), "max": max(rates)}))
    else:
        print("tinygrad mlp on %s: %.0f samples/s (min %.0f, max %.0f; %d repeats)"
              % (Device.DEFAULT, med, min(rates), max(rates), a.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
