#!/usr/bin/env python3
"""Writes the reference safetensors files that tests/test_safetensors.c reads,
with the Python `safetensors` package (pip install safetensors numpy), so the
test checks nncl against the format's own implementation. The test suite
itself needs no Python: the files are checked in. Run from the repo root:
    python3 tests/data/make_safetensors_ref.py
"""
import numpy as np
from safetensors.numpy import save_file

here = "tests/data/"

# All F32: read straight into place by nncl. save_file orders the tensors by
# dtype and name, not as given, which the reader must accept.
save_file(
    {
        "weight": np.array([[1.0, -2.5, 3.25], [0.0, 1e-3, -7.0]], dtype=np.float32),
        "bias": np.array([0.5, -0.5, 100.0], dtype=np.float32),
        "scalar": np.array(42.0, dtype=np.float32),
        "empty": np.zeros((0,), dtype=np.float32),
    },
    here + "ref_f32.safetensors",
    metadata={"format": "pt", "step": "7", "optimizer": "adam"},
)

# Mixed dtypes, converted to float by nncl.
save_file(
    {
        "w32": np.array([1.5, -2.0], dtype=np.float32),
        "h16": np.array([[1.0, -2.0], [0.5, 65504.0]], dtype=np.float16),
        "tiny16": np.array([2.0**-24, -(2.0**-20)], dtype=np.float16),
        "d64": np.array([3.5, -1e-10, 1e300], dtype=np.float64),
    },
    here + "ref_mixed.safetensors",
)
