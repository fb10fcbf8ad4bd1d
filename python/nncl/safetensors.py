"""Safetensors files (Hugging Face's and PyTorch's checkpoint format): reading F32, F16, BF16,
F64 and integer tensors as float32, writing F32, F16 or BF16."""
import ctypes
import os

import numpy as np

from . import _lib
from ._core import Owned, b, floats, ptr, text, view
from ._errors import check

lib = _lib.lib


class SafeTensors(Owned):
    """A parsed, checked safetensors file (nncl_safetensors): a mapping of tensor names (in the
    file's header order) to read-only float32 views of the library's copy (no further copy),
    the stored dtype of each, and the __metadata__ strings."""

    @classmethod
    def load(cls, path):
        h = ctypes.c_void_p()
        check(lib.nncl_safetensors_load(b(os.fspath(path)), ctypes.byref(h)), None, "nncl_safetensors_load")
        return cls._wrap(h.value)

    @classmethod
    def parse(cls, data, source=None):
        """From bytes in memory (copied)."""
        data = bytes(data)
        h = ctypes.c_void_p()
        check(lib.nncl_safetensors_parse(data, len(data), b(source), ctypes.byref(h)), None, "nncl_safetensors_parse")
        return cls._wrap(h.value)

    @classmethod
    def _wrap(cls, h):
        st = cls.__new__(cls)
        st._own(h, lib.nncl_safetensors_free)
        return st

    def __len__(self):
        return lib.nncl_safetensors_count(self._handle())

    def _entry(self, i):
        e = _lib.StEntry()
        check(lib.nncl_safetensors_get(self._handle(), int(i), ctypes.byref(e)), None, "nncl_safetensors_get")
        return e

    def keys(self):
        return [text(self._entry(i).name) for i in range(len(self))]

    def __iter__(self):
        return iter(self.keys())

    def __contains__(self, name):
        return lib.nncl_safetensors_find(self._handle(), b(name)) >= 0

    def __getitem__(self, name):
        i = lib.nncl_safetensors_find(self._handle(), b(name))
        if i < 0:
            raise KeyError(name)
        e = self._entry(i)
        return view(e.data, tuple(e.shape[:e.ndim]), self)

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def dtype(self, name):
        """The tensor's dtype in the file ("F32", "F16", "BF16", ...)."""
        i = lib.nncl_safetensors_find(self._handle(), b(name))
        if i < 0:
            raise KeyError(name)
        return text(self._entry(i).dtype)

    def expect(self, name, shape):
        """The tensor called name, checked to have exactly shape (FormatError when missing,
        ShapeError naming both shapes when it differs)."""
        shape = tuple(int(s) for s in shape)
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        data = ctypes.c_void_p()
        check(lib.nncl_safetensors_expect(self._handle(), b(name), len(shape), dims, ctypes.byref(data)), None,
              "nncl_safetensors_expect")
        return view(data.value, shape, self)

    @property
    def metadata(self):
        """The __metadata__ pairs as a dict (sorted by key)."""
        out = {}
        k, v = ctypes.c_char_p(), ctypes.c_char_p()
        for i in range(lib.nncl_safetensors_meta_count(self._handle())):
            check(lib.nncl_safetensors_meta_at(self._h, i, ctypes.byref(k), ctypes.byref(v)), None,
                  "nncl_safetensors_meta_at")
            out[text(k.value)] = text(v.value)
        return out

    def meta(self, key):
        """One __metadata__ value, or None."""
        return text(lib.nncl_safetensors_meta(self._handle(), b(key)))

    def to_dict(self):
        """Every tensor copied into a dict of writeable arrays."""
        return {k: np.array(v) for k, v in self.items()}


def load_safetensors(path):
    """SafeTensors.load(path)."""
    return SafeTensors.load(path)


def save_safetensors(path, tensors, metadata=None, dtype=None):
    """Writes tensors (a mapping of name -> array, in its order; arrays converted to float32 as
    needed) atomically to path. metadata: a dict of strings for __metadata__. dtype: "F16" or
    "BF16" stores every tensor so (rounded to nearest even), or a dict name -> dtype; default F32."""
    items = list(tensors.items())
    entries = (_lib.StEntry * max(1, len(items)))()
    keep = []
    for i, (name, arr) in enumerate(items):
        a = floats(arr, "save_safetensors %r" % name)
        if a.ndim > _lib.NNCL_ST_MAX_DIMS:
            raise ValueError("save_safetensors: %r has %d dimensions, at most %d" % (name, a.ndim, _lib.NNCL_ST_MAX_DIMS))
        keep.append(a)
        e = entries[i]
        e.name = b(name)
        e.ndim = a.ndim
        for k, d in enumerate(a.shape):
            e.shape[k] = d
        e.data = ptr(a)
        dt = dtype.get(name) if isinstance(dtype, dict) else dtype
        e.dtype = b(dt or "F32")
    meta = None
    if metadata:
        flat = []
        for k, v in metadata.items():
            flat += [b(k), b(v)]
        meta = (ctypes.c_char_p * (len(flat) + 1))(*flat, None)
    check(lib.nncl_safetensors_save(b(os.fspath(path)), entries, len(items), meta), None, "nncl_safetensors_save")
