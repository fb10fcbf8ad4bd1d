"""A training run from Python equals the same run from C bit for bit: tests/c/train10.c builds
the same model with the same seed, trains 10 Adam steps on the same batches and saves its
weights and losses; both use the library the package loaded, on device 0."""
import os
import subprocess

import numpy as np

import nncl
from conftest import HERE


def python_run(ctx, X, Y):
    g = nncl.Graph(ctx, seed=7)
    x, y = g.input("x", (6,)), g.input("y")
    h = g.linear(x, 16, act="relu", name="fc1")
    h = g.layernorm(h, 1e-5, name="ln")
    h = g.dropout(h, 0.25)
    logits = g.linear(h, 3, name="fc2")
    t = nncl.Trainer(g, g.softmax_cross_entropy(logits, y), optimizer="adam", lr=0.01, max_batch=16, devices=[0])
    start = t.state_dict()
    losses = [t.step({x: X[i % 4 * 16:(i % 4 + 1) * 16], y: Y[i % 4 * 16:(i % 4 + 1) * 16]}) for i in range(10)]
    return start, t.state_dict(), np.array(losses, np.float32)


def test_ten_steps_equal_the_c_run_bit_for_bit(ctx, cc, tmp_path):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    Y = rng.integers(0, 3, 64).astype(np.float32)
    nncl.save_safetensors(tmp_path / "data.safetensors", {"x": X, "y": Y})
    exe = cc(os.path.join(HERE, "c", "train10.c"), "train10")
    r = subprocess.run([exe, str(tmp_path / "data.safetensors"), str(tmp_path / "c.safetensors"),
                        str(tmp_path / "loss.safetensors")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    c_weights = nncl.load_safetensors(tmp_path / "c.safetensors").to_dict()
    c_losses = nncl.load_safetensors(tmp_path / "loss.safetensors")["loss"]
    start, weights, losses = python_run(ctx, X, Y)
    assert sorted(weights) == sorted(c_weights) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "ln.bias",
                                                    "ln.weight"]
    assert losses.tobytes() == c_losses.tobytes()
    for name in weights:
        assert weights[name].tobytes() == c_weights[name].tobytes(), name
    # and the run did train: every weight moved and the loss fell
    assert all(not np.array_equal(start[n], weights[n]) for n in weights)
    assert losses[-1] < losses[0]
