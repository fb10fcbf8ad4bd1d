"""Shared fixtures: one context for the whole run, the repository, and a C compiler for the
programs that check the package against the C library."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # the package of this tree, also without pip install

import nncl  # noqa: E402

# In the sanitized pass (the ASan-built library, its runtime preloaded) these have nothing to
# add to the plain pass: installing is the same, and ASan's quarantine keeps freed memory
# resident, so the RSS does not measure leaks there.
collect_ignore = ["test_install.py", "test_leak.py"] if os.environ.get("NNCL_SANITIZE") == "1" else []


@pytest.fixture(scope="module")
def ctx():
    c = nncl.init()
    yield c


@pytest.fixture(scope="module")
def cc(tmp_path_factory):
    """compile(source, name) -> path of a program built against the header and the very library
    the package loaded (with the sanitizers when that library has them)."""
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler (%s) to build the C side" % compiler)
    out = tmp_path_factory.mktemp("c")
    libdir = os.path.dirname(os.path.realpath(nncl.library_path))
    libfile = os.path.basename(os.path.realpath(nncl.library_path))
    san = ["-fsanitize=address,undefined"] if os.environ.get("NNCL_SANITIZE") == "1" else []

    def compile(source, name):
        exe = str(out / name)
        cmd = [compiler, "-std=c99", "-O1", "-I", os.path.join(TOP, "include")] + san + \
              [source, "-o", exe, "-L", libdir, "-l:" + libfile, "-Wl,-rpath," + libdir, "-lm"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, "%s\n%s" % (" ".join(cmd), r.stderr)
        return exe
    return compile
