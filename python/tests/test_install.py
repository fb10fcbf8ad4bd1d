"""pip install ./python into a virtual environment (offline: NumPy and setuptools from the
system's site-packages), and the installed package finding the library where `make install`
put it, or saying where it looked."""
import os
import shutil
import subprocess
import sys

import pytest

import nncl
from conftest import HERE, TOP

XOR = """
import numpy as np, nncl
ctx = nncl.init()
g = nncl.Graph(ctx, seed=1)
x = g.input("x", (2,)); y = g.input("y", ())
logits = g.linear(g.linear(x, 8, act="tanh", name="fc1"), 2, name="fc2")
t = nncl.Trainer(g, g.softmax_cross_entropy(logits, y), optimizer="adam", lr=0.05, max_batch=4)
X = np.array([[0,0],[0,1],[1,0],[1,1]], np.float32); Y = np.array([0,1,1,0], np.float32)
for _ in range(300): t.step({x: X, y: Y})
mapped = [l.split()[-1] for l in open("/proc/self/maps") if "libnncl.so" in l][0]
print(nncl.__file__, nncl.library_path, mapped, (t.predict({x: X}, logits).argmax(1) == Y).mean())
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    try:
        import ensurepip  # noqa: F401
        import setuptools  # noqa: F401
    except ImportError as e:
        pytest.skip("no %s for a virtual environment with an offline pip install "
                    "(apt-get install python3-venv python3-setuptools)" % e.name)
    d = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(d / "v")], check=True)
    py = str(d / "v" / "bin" / "python")
    src = str(d / "src")
    shutil.copytree(os.path.dirname(HERE), src, ignore=shutil.ignore_patterns("__pycache__", "tests"))
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", src],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return py, d


def run(py, cwd, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NNCL_LIBRARY")}
    e.update(env)
    return subprocess.run([py, "-c", XOR], cwd=cwd, env=e, capture_output=True, text=True)


def test_pip_install_into_a_venv(venv):
    py, d = venv
    r = run(py, d, NNCL_LIBRARY=nncl.library_path)
    assert r.returncode == 0, r.stderr
    where, lib, mapped, acc = r.stdout.split()
    assert where.startswith(str(d / "v")) and lib == nncl.library_path and acc == "1.0"


def test_the_installed_package_finds_make_install_or_says_where_it_looked(venv):
    py, d = venv
    r = run(py, d, LD_LIBRARY_PATH="/nonexistent")
    if r.returncode != 0:  # no installed libnncl on this machine: the message lists the places
        assert "LibraryNotFoundError" in r.stderr and "NNCL_LIBRARY" in r.stderr
        assert "/usr/local/lib/libnncl.so.0" in r.stderr and "ldconfig" in r.stderr
    stage = d / "stage"
    b = os.path.dirname(os.path.realpath(nncl.library_path))
    m = subprocess.run([os.environ.get("MAKE", "make"), "-s", "-C", TOP, "B=" + b, "install", "DESTDIR=" + str(stage),
                        "PREFIX=/usr"], capture_output=True, text=True)
    assert m.returncode == 0, m.stderr
    libdir = str(stage / "usr" / "lib")
    r = run(py, d, LD_LIBRARY_PATH=libdir)  # the loader's path, as after ldconfig
    assert r.returncode == 0, r.stderr
    where, lib, mapped, acc = r.stdout.split()
    assert acc == "1.0" and lib == "libnncl.so.0" and mapped.startswith(libdir + "/libnncl.so.0")
