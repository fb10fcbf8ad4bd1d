"""NumPy arrays in and out: float32 C-contiguous arrays are used as they are, other real
dtypes and strides converted by a copy, wrong shapes and non-real dtypes refused with a clear
error; outputs given with out= are checked, not converted; the library's arrays are handed out
as read-only views without a copy."""
import ctypes

import numpy as np
import pytest

import nncl
from nncl import _core, _lib
from test_errors import xor

rng = np.random.default_rng(3)


def loss_with(ctx, X, Y):
    t, x, y = xor(ctx)
    return t.step({x: X, y: Y})


def test_conversions_give_the_float32_result(ctx):
    X = rng.standard_normal((4, 2)).astype(np.float32)
    Y = np.array([0, 1, 1, 0], np.float32)
    want = loss_with(ctx, X, Y)
    wide = np.zeros((4, 4), np.float32)
    wide[:, ::2] = X
    assert not wide[:, ::2].flags.c_contiguous
    for X2, Y2 in [(X.astype(np.float64), Y.astype(np.int64)),  # other dtypes
                   (wide[:, ::2], Y),  # strided
                   (np.asfortranarray(X), Y.astype(np.uint8)),
                   (X.astype(">f4"), Y.astype(bool)),  # big-endian, bool labels
                   (X.tolist(), [0, 1, 1, 0])]:  # lists
        assert loss_with(ctx, X2, Y2) == want


def test_float32_contiguous_arrays_are_not_copied():
    a = np.zeros((3, 2), np.float32)
    assert _core.floats(a, "a") is a
    assert _core.floats(a[:, :1], "a") is not a
    misaligned = np.frombuffer(bytearray(4 * 7), np.float32, 6, 2)
    assert misaligned.flags.aligned or _core.floats(misaligned, "m") is not misaligned


def test_wrong_shapes_and_dtypes_are_refused(ctx):
    t, x, y = xor(ctx)
    with pytest.raises(ValueError, match=r"feed of <nncl.Node x \[2\]> must have shape \(batch, 2\); got \(4, 3\)"):
        t.step({x: np.zeros((4, 3), np.float32), y: np.zeros(4)})
    with pytest.raises(ValueError, match=r"must have shape \(batch, 2\); got \(8,\)"):
        t.step({x: np.zeros(8, np.float32), y: np.zeros(4)})  # flattened: refused, not guessed
    with pytest.raises(ValueError, match="different batch sizes"):
        t.step({x: np.zeros((4, 2)), y: np.zeros(3)})
    with pytest.raises(TypeError, match="complex"):
        t.step({x: np.zeros((4, 2), np.complex64), y: np.zeros(4)})
    with pytest.raises(TypeError, match="not a real number"):
        t.step({x: np.array([["a", "b"]] * 4), y: np.zeros(4)})
    with pytest.raises(KeyError, match="nope"):
        t.step({"nope": np.zeros((4, 2))})
    assert t.step_count == 0
    # names work as keys
    assert np.isfinite(t.step({"x": np.zeros((4, 2)), "y": np.zeros(4)}))


def test_predict_out_is_checked_and_filled_in_place(ctx):
    t, x, y = xor(ctx)
    X = rng.standard_normal((3, 2)).astype(np.float32)
    want = t.predict({x: X})
    out = np.full((3, 2), np.nan, np.float32)
    assert t.predict({x: X}, out=out) is out and np.array_equal(out, want)
    for bad in [np.zeros((3, 2), np.float64), np.zeros((2, 3), np.float32), np.zeros((3, 4), np.float32)[:, ::2],
                np.zeros((3, 2), np.float32, order="F")]:
        with pytest.raises(ValueError, match="out must be"):
            t.predict({x: X}, out=bad)
    ro = np.zeros((3, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        t.predict({x: X}, out=ro)


def test_library_arrays_are_read_only_views():
    X = rng.standard_normal((10, 3)).astype(np.float32)
    ds = nncl.Dataset.from_numpy(X, np.arange(10) % 2)
    v = ds.x
    assert v.ctypes.data == _lib.lib.nncl_dataset_x(ds._h)  # no copy of the library's samples
    assert not v.flags.writeable and np.array_equal(v, X) and ds.classes == 2
    del ds  # the view keeps the dataset alive
    assert np.array_equal(v, X)
    st = nncl.SafeTensors.parse(_roundtrip_bytes({"w": X}))
    w = st["w"]
    e = _lib.StEntry()
    _lib.lib.nncl_safetensors_get(st._h, 0, ctypes.byref(e))
    assert w.ctypes.data == e.data and not w.flags.writeable and np.array_equal(w, X)


def _roundtrip_bytes(tensors):
    import os
    import tempfile
    fd, path = tempfile.mkstemp(suffix=".safetensors")
    os.close(fd)
    try:
        nncl.save_safetensors(path, tensors)
        return open(path, "rb").read()
    finally:
        os.unlink(path)
