"""The README's Python examples, run as written: the XOR loop reaches accuracy 1.0; the
Fashion-MNIST MLP prints the C example's test accuracy to the last digit (the same run through
the same library) and saves a model file the C predict program classifies with that accuracy."""
import os
import re
import subprocess
import sys

import pytest

from conftest import HERE, TOP

README = open(os.path.join(TOP, "README.md")).read()
DATA = os.environ.get("NNCL_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
EXAMPLES = os.environ.get("NNCL_EXAMPLES", os.path.join(TOP, "build", "examples"))


def block(start):
    """The ```python block of the README's Python section that starts with this line."""
    section = README[README.index("\n## Python\n"):]
    i = section.index("```python\n" + start)
    return section[i + len("```python\n"):section.index("```", i + 10)]


def run_python(code, cwd, **env):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), **env)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_readme_xor(tmp_path):
    r = run_python(block("import numpy as np, nncl\n"), tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1.0"


def test_readme_fashion_mnist_equals_the_c_example(tmp_path):
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        pytest.skip("no Fashion-MNIST in %s (apt-get install dataset-fashion-mnist)" % DATA)
    code = block("import nncl\n")
    assert len(code.splitlines()) <= 15
    c_mlp = os.path.join(EXAMPLES, "fashion_mnist_mlp")
    if not os.access(c_mlp, os.X_OK):
        pytest.skip("no C example at %s to compare with (make examples)" % c_mlp)
    # the GEMM kernel of each product is chosen by timing and kept in the cache folder: a folder of
    # their own lets the C run take the Python run's choices (a shared one may hold other choices
    # for some shapes, written by other processes, and the bits follow the kernels)
    cache = str(tmp_path / "cache")
    r = run_python(code.replace("/usr/share/datasets/fashion-mnist/", DATA + "/"), tmp_path, NNCL_CACHE_DIR=cache)
    assert r.returncode == 0, r.stderr
    got = re.search(r"^test accuracy ([0-9.]+) \(loss ([0-9.]+)\) on 10000 images$", r.stdout, re.M)
    assert got, r.stdout
    assert "epoch 10/10" in r.stderr  # the progress of fit
    c = subprocess.run([c_mlp, "--data", DATA, "--quiet", "--out", str(tmp_path / "c.safetensors")],
                       capture_output=True, text=True, env=dict(os.environ, NNCL_CACHE_DIR=cache))
    assert c.returncode == 0, c.stderr
    want = re.search(r"^test accuracy ([0-9.]+) \(loss ([0-9.]+)\) on 10000 images$", c.stdout, re.M)
    assert got.groups() == want.groups()
    assert float(got.group(1)) > 0.85
    p = subprocess.run([os.path.join(EXAMPLES, "predict"), str(tmp_path / "fashion_mnist_mlp.safetensors"),
                        os.path.join(DATA, "t10k-images-idx3-ubyte.gz"), "--quiet"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert re.search(r"^accuracy %s " % re.escape(got.group(1)), p.stdout, re.M) and "Ankle boot" in p.stdout
