"""A training run from Python equals the same run from C bit for bit: tests/c/train10.c builds
the same model with the same seed, trains 10 Adam steps on the same batches and saves its
weights and losses; both use the library the package loaded, on device 0. The GEMM kernel of
each product is chosen by timing: each side runs in a fresh process (a process's earlier plans
may lend a shape without a choice of its own a near one's kernel), with a cache folder of their
own (the C run's choices are the Python run's; a shared folder may get other choices for some
shapes from other processes)."""
import os
import subprocess
import sys

import numpy as np

import nncl
from conftest import HERE


def python_run(data, weights, losses, start):
    ctx = nncl.init()
    st = nncl.load_safetensors(data)
    X, Y = st["x"], st["y"]
    g = nncl.Graph(ctx, seed=7)
    x, y = g.input("x", (6,)), g.input("y")
    h = g.linear(x, 16, act="relu", name="fc1")
    h = g.layernorm(h, 1e-5, name="ln")
    h = g.dropout(h, 0.25)
    logits = g.linear(h, 3, name="fc2")
    t = nncl.Trainer(g, g.softmax_cross_entropy(logits, y), optimizer="adam", lr=0.01, max_batch=16, devices=[0])
    t.save(start)
    loss = [t.step({x: X[i % 4 * 16:(i % 4 + 1) * 16], y: Y[i % 4 * 16:(i % 4 + 1) * 16]}) for i in range(10)]
    t.save(weights)
    nncl.save_safetensors(losses, {"loss": np.array(loss, np.float32)})


def test_ten_steps_equal_the_c_run_bit_for_bit(cc, tmp_path):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    Y = rng.integers(0, 3, 64).astype(np.float32)
    data = str(tmp_path / "data.safetensors")
    nncl.save_safetensors(data, {"x": X, "y": Y})
    exe = cc(os.path.join(HERE, "c", "train10.c"), "train10")
    cache = str(tmp_path / "cache")
    r = subprocess.run([exe, data, str(tmp_path / "c.safetensors"), str(tmp_path / "c_loss.safetensors")],
                       capture_output=True, text=True, env=dict(os.environ, NNCL_CACHE_DIR=cache))
    assert r.returncode == 0, r.stderr
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), NNCL_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, __file__, data, str(tmp_path / "py.safetensors"),
                        str(tmp_path / "py_loss.safetensors"), str(tmp_path / "start.safetensors")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    load = lambda name: nncl.load_safetensors(tmp_path / name).to_dict()
    c_weights, weights, start = load("c.safetensors"), load("py.safetensors"), load("start.safetensors")
    c_losses, losses = load("c_loss.safetensors")["loss"], load("py_loss.safetensors")["loss"]
    assert sorted(weights) == sorted(c_weights) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "ln.bias",
                                                    "ln.weight"]
    assert losses.tobytes() == c_losses.tobytes()
    for name in weights:
        assert weights[name].tobytes() == c_weights[name].tobytes(), name
    # and the run did train: every weight moved and the loss fell
    assert all(not np.array_equal(start[n], weights[n]) for n in weights)
    assert losses[-1] < losses[0]


if __name__ == "__main__":
    python_run(*sys.argv[1:5])
