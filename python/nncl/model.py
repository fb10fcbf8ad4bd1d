"""Inference-only models from model files (Trainer.save_model, or a C program's
nncl_trainer_save_model): the graph, its weights and the preprocessing the file asks for."""
import ctypes
import json
import os
import struct

import numpy as np

from . import _lib
from ._core import Owned, b, floats, ptr, text
from ._errors import check
from .graph import Graph, Node
from .safetensors import SafeTensors
from .trainer import Trainer

lib = _lib.lib


def _header_meta(path):
    """A safetensors file's __metadata__, read from its header alone ({} when unreadable: the
    library has checked the file already)."""
    try:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            return json.loads(f.read(min(n, 100000000))).get("__metadata__", {})
    except (OSError, ValueError, struct.error, AttributeError):
        return {}


class Model(Owned):
    """A model file loaded onto ctx's devices (nncl_model), predicting at most max_batch rows per
    device pass. Made without a context (from_safetensors(st)), it only reads and checks the file."""

    @classmethod
    def load(cls, ctx, path, max_batch=256):
        h = ctypes.c_void_p()
        check(lib.nncl_model_load(ctx._handle(), b(os.fspath(path)), int(max_batch), ctypes.byref(h)), ctx._h,
              "nncl_model_load")
        return cls._wrap(h.value, ctx, max_batch, _header_meta(path).get("nncl.output"))

    @classmethod
    def from_safetensors(cls, st, ctx=None, max_batch=256):
        """From a parsed SafeTensors (or a path); ctx None: the description only."""
        if not isinstance(st, SafeTensors):
            st = SafeTensors.load(st)
        h = ctypes.c_void_p()
        ch = ctx._handle() if ctx is not None else None
        check(lib.nncl_model_from_safetensors(ch, st._handle(), int(max_batch), ctypes.byref(h)), ch,
              "nncl_model_from_safetensors")
        return cls._wrap(h.value, ctx, max_batch, st.meta("nncl.output"))

    @classmethod
    def _wrap(cls, h, ctx, max_batch, output):
        m = cls.__new__(cls)
        m.ctx, m._ctx_h, m._max_batch = ctx, ctx._h if ctx is not None else None, max_batch
        m._own(h, lib.nncl_model_free, ctx)
        # the positions of classes per row: () for a classifier, (T,) for a sequence's [T, classes]
        node = m.graph.find(output) if output else None
        m.positions = tuple(node.shape[:-1]) if node is not None and len(node.shape) > 1 else ()
        return m

    @property
    def graph(self):
        """The model's graph (owned by the model, which it keeps alive)."""
        g = Graph(self.ctx, _borrowed=(lib.nncl_model_graph(self._handle()), self))
        return g

    @property
    def input(self):
        """The input node fed with rows (nncl_model_input)."""
        h = lib.nncl_model_input(self._handle())
        return Node(h, self.graph) if h else None

    @property
    def output(self):
        """The node giving the class scores (nncl_model_output)."""
        h = lib.nncl_model_output(self._handle())
        return Node(h, self.graph) if h else None

    @property
    def trainer(self):
        """The trainer holding the model's plans (None without a context): predict() and param()
        on any node."""
        h = lib.nncl_model_trainer(self._handle())
        return Trainer._borrow(h, self.graph, self, self._max_batch) if h else None

    @property
    def features(self):
        """Floats per input row."""
        return lib.nncl_model_features(self._handle())

    @property
    def input_shape(self):
        dims = (ctypes.c_int * 3)()
        n = lib.nncl_model_input_shape(self._handle(), dims)
        return tuple(dims[:n])

    @property
    def classes(self):
        return lib.nncl_model_classes(self._handle())

    @property
    def class_names(self):
        names = [text(lib.nncl_model_class_name(self._handle(), k)) for k in range(self.classes)]
        return names if any(n is not None for n in names) else None

    @property
    def label_name(self):
        return text(lib.nncl_model_label_name(self._handle()))

    def _rows(self, rows, what):
        a = floats(rows, what)
        d = self.features
        if a.ndim == 1 and a.size == d:
            a = a.reshape(1, d)
        if a.ndim < 2 or int(np.prod(a.shape[1:])) != d:
            raise ValueError("%s: rows must have shape (n, %d) or (n, %s); got %s" % (
                what, d, ", ".join(map(str, self.input_shape)), a.shape))
        return a

    def preprocess(self, rows):
        """The preprocessing the file asks for, applied to a copy of raw rows [n, features]."""
        a = np.array(self._rows(rows, "Model.preprocess"), copy=True)
        check(lib.nncl_model_preprocess(self._handle(), ptr(a), a.shape[0]), self._ctx_h, "nncl_model_preprocess")
        return a

    def predict(self, rows):
        """(probabilities [n, classes], predicted class [n] as int32) of raw rows [n, features]
        (or [n, *input_shape]); float32 C-contiguous rows are used without a copy, others converted.
        A sequence output [T, classes] gives [n, T, classes] and [n, T]."""
        a = self._rows(rows, "Model.predict")
        n = a.shape[0]
        probs = np.empty((n,) + self.positions + (self.classes,), np.float32)
        classes = np.empty((n,) + self.positions, np.intc)
        check(lib.nncl_model_predict(self._handle(), ptr(a), n, ptr(probs), ptr(classes)), self._ctx_h,
              "nncl_model_predict")
        return probs, classes

    def __repr__(self):
        return "<nncl.Model %s -> %d classes>" % (list(self.input_shape), self.classes) if self._h \
            else "<nncl.Model closed>"
