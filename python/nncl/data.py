"""Host data: IDX and CSV readers, datasets and the background batch loader. None of these need
a context. Arrays handed out are read-only NumPy views of the library's memory (no copy) that
keep their owner alive; arrays taken in are converted as _core.floats says."""
import ctypes
import os
from dataclasses import dataclass

import numpy as np

from . import _lib
from ._core import Owned, b, floats, out_array, ptr, shape_arg, text, view
from ._errors import check

lib = _lib.lib
NNCL_IDX_MAX_DIMS = _lib.NNCL_IDX_MAX_DIMS
LABEL_MODES = {"auto": 0, "classes": 1, "numeric": 2}


def _path(p):
    return b(os.fspath(p))


class _IdxOwner:
    """Owns a parsed nncl_idx; its views keep it alive."""

    def __init__(self):
        self.c = _lib.Idx()

    def __del__(self):
        lib.nncl_idx_free(ctypes.byref(self.c))


def _idx_array(owner):
    c = owner.c
    return view(ctypes.cast(c.data, ctypes.c_void_p).value, tuple(c.dims[:c.ndim]), owner)


def load_idx(path):
    """An IDX file (plain or .gz) as a read-only float32 array of its dims (no copy of the
    library's floats). Bytes keep their values 0..255 (Dataset.load_idx scales them)."""
    o = _IdxOwner()
    check(lib.nncl_idx_load(_path(path), ctypes.byref(o.c)), None, "nncl_idx_load")
    return _idx_array(o)


def _idx_struct(a):
    """The nncl_idx behind an array of load_idx/parse_idx (its stored type kept, so that bytes
    are scaled), else an F32 one over the array's floats; and what must stay alive."""
    base = a
    while base is not None and not hasattr(base, "_owner"):
        base = getattr(base, "base", None)
    o = getattr(base, "_owner", None)
    if isinstance(o, _IdxOwner) and isinstance(a, np.ndarray) and a.size and \
            a.shape == tuple(o.c.dims[:o.c.ndim]) and a.ctypes.data == ctypes.cast(o.c.data, ctypes.c_void_p).value:
        return o.c, o
    a = floats(a, "IDX array")
    if not 1 <= a.ndim <= NNCL_IDX_MAX_DIMS:
        raise ValueError("IDX arrays have 1 to %d dimensions; got %d" % (NNCL_IDX_MAX_DIMS, a.ndim))
    c = _lib.Idx(0x0D, a.ndim, (ctypes.c_uint32 * NNCL_IDX_MAX_DIMS)(*a.shape), a.size,
                 ctypes.cast(ptr(a), ctypes.POINTER(ctypes.c_float)))
    return c, a


def parse_idx(data, name=None):
    """IDX bytes in memory (plain or gzip) as load_idx gives them."""
    data = bytes(data)
    o = _IdxOwner()
    check(lib.nncl_idx_parse(data, len(data), b(name), ctypes.byref(o.c)), None, "nncl_idx_parse")
    return _idx_array(o)


def _csv_options(label, label_index, delimiter, label_mode, classes):
    o = lib.nncl_csv_options_default()
    keep = []
    if label is not None:
        o.label = b(label)
        keep.append(o.label)
    o.label_index = int(label_index)
    if len(delimiter.encode()) != 1:
        raise ValueError("csv: delimiter must be one byte; got %r" % delimiter)
    o.delimiter = delimiter.encode()
    if label_mode not in LABEL_MODES:
        raise ValueError("csv: label_mode must be one of %s; got %r" % (", ".join(LABEL_MODES), label_mode))
    o.label_mode = LABEL_MODES[label_mode]
    if classes is not None:
        arr = (ctypes.c_char_p * max(1, len(classes)))(*[b(c) for c in classes])
        keep.append(arr)
        o.classes, o.n_classes = arr, len(classes)
    return o, keep


class _CsvOwner:
    def __init__(self):
        self.c = _lib.Csv()

    def __del__(self):
        lib.nncl_csv_free(ctypes.byref(self.c))


@dataclass
class CsvTable:
    """A parsed CSV table (nncl_csv): features [rows, cols] and labels [rows] as read-only views,
    the header names, and the classes (class_names None when the labels were numbers)."""
    features: np.ndarray
    labels: np.ndarray
    feature_names: list
    label_name: str
    label_column: int
    n_classes: int
    class_names: list
    _owner: object = None


def _csv_table(o):
    c = o.c
    rows, cols = c.rows, c.cols
    addr = lambda p: ctypes.cast(p, ctypes.c_void_p).value
    names = [text(c.feature_names[i]) for i in range(cols)]
    classes = [text(c.class_names[k]) for k in range(c.n_classes)] if c.class_names else None
    return CsvTable(view(addr(c.features), (rows, cols), o), view(addr(c.labels), (rows,), o), names,
                    text(c.label_name), c.label_column, c.n_classes, classes, o)


def load_csv(path, label=None, label_index=-1, delimiter=",", label_mode="auto", classes=None):
    """A CSV table with a header row, numeric feature columns and one label column (by header
    name, else by 0-based index, -1 the last). label_mode: "auto", "classes" or "numeric";
    classes fixes the class-name order (e.g. the training table's)."""
    opt, keep = _csv_options(label, label_index, delimiter, label_mode, classes)
    o = _CsvOwner()
    check(lib.nncl_csv_load(_path(path), ctypes.byref(opt), ctypes.byref(o.c)), None, "nncl_csv_load")
    return _csv_table(o)


def parse_csv(text_, name=None, label=None, label_index=-1, delimiter=",", label_mode="auto", classes=None):
    """CSV text (str or bytes) parsed as load_csv does."""
    data = text_.encode("utf-8") if isinstance(text_, str) else bytes(text_)
    opt, keep = _csv_options(label, label_index, delimiter, label_mode, classes)
    o = _CsvOwner()
    check(lib.nncl_csv_parse(data, len(data), b(name), ctypes.byref(opt), ctypes.byref(o.c)), None, "nncl_csv_parse")
    return _csv_table(o)


def permutation(n, seed):
    """nncl_dataset_permutation: the permutation of 0..n-1 that seed gives (the same on every platform)."""
    out = np.empty(int(n), np.uintp)
    check(lib.nncl_dataset_permutation(int(n), int(seed) & (2**64 - 1), ptr(out)), None, "nncl_dataset_permutation")
    return out


def _indices(idx, n):
    """Sample indices as size_t, checked to be in 0..n-1 (a negative one would wrap around)."""
    a = np.ascontiguousarray(idx, dtype=np.int64)
    if a.ndim != 1:
        raise ValueError("indices must be 1-D; got shape %s" % (a.shape,))
    if a.size and (a.min() < 0 or a.max() >= n):
        raise IndexError("indices must be in 0..%d; got %d..%d" % (n - 1, a.min(), a.max()))
    return a.astype(np.uintp)


class Dataset(Owned):
    """n samples of d float features and one float label each (nncl_dataset), in host memory.
    Build one with from_numpy, load_idx, from_idx, load_csv or from_csv."""

    @classmethod
    def _wrap(cls, h):
        ds = cls.__new__(cls)
        ds._own(h, lib.nncl_dataset_free)
        return ds

    @classmethod
    def _made(cls, fn, name, *args):
        h = ctypes.c_void_p()
        check(fn(*args, ctypes.byref(h)), None, name)
        return cls._wrap(h.value)

    @classmethod
    def from_numpy(cls, x, y=None, n_classes=None):
        """Copies x [n, ...] (per-sample shape of 1 to 3 dimensions; converted to float32 as
        needed) and labels y [n] (class indices; None: all zero). n_classes None: max(y) + 1 for
        whole-number labels, 0 (regression) otherwise."""
        x = floats(x, "Dataset.from_numpy x")
        if x.ndim < 2:
            x = x.reshape(len(x), 1)
        n = x.shape[0]
        ndim, dims = shape_arg(x.shape[1:], "Dataset.from_numpy")
        yp = None
        if y is not None:
            y = floats(y, "Dataset.from_numpy y")
            if y.shape != (n,):
                raise ValueError("Dataset.from_numpy: y must have shape (%d,); got %s" % (n, y.shape))
            yp = ptr(y)
            if n_classes is None:
                whole = n > 0 and np.all(y >= 0) and np.all(y == np.floor(y))
                n_classes = int(y.max()) + 1 if whole else 0
        return cls._made(lib.nncl_dataset_create, "nncl_dataset_create", n, ndim, dims, ptr(x), yp,
                         int(n_classes or 0))

    @classmethod
    def load_idx(cls, images, labels):
        """An IDX image file and label file (plain or .gz); bytes scaled to [0, 1]."""
        return cls._made(lib.nncl_dataset_load_idx, "nncl_dataset_load_idx", _path(images), _path(labels))

    @classmethod
    def from_idx(cls, images, labels):
        """From IDX arrays: those of load_idx/parse_idx (bytes scaled to [0, 1]), or any arrays
        images [n, ...] and integer labels [n] (taken as float32, unscaled). Images [n, h, w] get
        the sample shape [1, h, w]."""
        ci, ki = _idx_struct(images)
        cl, kl = _idx_struct(labels)
        return cls._made(lib.nncl_dataset_from_idx, "nncl_dataset_from_idx", ctypes.byref(ci), ctypes.byref(cl))

    @classmethod
    def load_csv(cls, path, label=None, label_index=-1, delimiter=",", label_mode="auto", classes=None):
        """A CSV table (see load_csv) as a dataset of sample shape [cols], class names kept."""
        opt, keep = _csv_options(label, label_index, delimiter, label_mode, classes)
        return cls._made(lib.nncl_dataset_load_csv, "nncl_dataset_load_csv", _path(path), ctypes.byref(opt))

    @classmethod
    def from_csv(cls, table):
        """A dataset from a CsvTable."""
        return cls._made(lib.nncl_dataset_from_csv, "nncl_dataset_from_csv", ctypes.byref(table._owner.c))

    def __len__(self):
        return lib.nncl_dataset_size(self._handle())

    @property
    def features(self):
        return lib.nncl_dataset_features(self._handle())

    @property
    def classes(self):
        return lib.nncl_dataset_classes(self._handle())

    @property
    def shape(self):
        """The per-sample shape."""
        dims = (ctypes.c_int * 3)()
        n = lib.nncl_dataset_shape(self._handle(), dims)
        return tuple(dims[:n])

    @property
    def class_names(self):
        names = [text(lib.nncl_dataset_class_name(self._handle(), k)) for k in range(self.classes)]
        return names if any(n is not None for n in names) else None

    @property
    def x(self):
        """The samples [n, *shape], a read-only view (valid while the dataset is unchanged: a later
        shuffle, standardize or scale changes the values it shows)."""
        return view(lib.nncl_dataset_x(self._handle()), (len(self),) + self.shape, self)

    @property
    def y(self):
        return view(lib.nncl_dataset_y(self._handle()), (len(self),), self)

    def batch(self, start, count):
        """Samples start .. start+count-1 as read-only views (no copy)."""
        xp, yp = ctypes.c_void_p(), ctypes.c_void_p()
        check(lib.nncl_dataset_batch(self._handle(), int(start), int(count), ctypes.byref(xp), ctypes.byref(yp)),
              None, "nncl_dataset_batch")
        return view(xp.value, (int(count),) + self.shape, self), view(yp.value, (int(count),), self)

    def gather(self, idx, x=None, y=None):
        """Copies the samples idx into new arrays (or x and y, checked) and returns (x, y)."""
        idx = _indices(idx, len(self))
        x = out_array(x, (len(idx),) + self.shape, "Dataset.gather x")
        y = out_array(y, (len(idx),), "Dataset.gather y")
        check(lib.nncl_dataset_gather(self._handle(), ptr(idx), len(idx), ptr(x), ptr(y)), None, "nncl_dataset_gather")
        return x, y

    def shuffle(self, seed):
        """Reorders the samples in place by permutation(n, seed)."""
        check(lib.nncl_dataset_shuffle(self._handle(), int(seed) & (2**64 - 1)), None, "nncl_dataset_shuffle")

    def subset(self, idx):
        """A new dataset of the samples idx (indices may repeat)."""
        idx = _indices(idx, len(self))
        return Dataset._made(lib.nncl_dataset_subset, "nncl_dataset_subset", self._handle(), ptr(idx), len(idx))

    def split(self, val_fraction, seed=0):
        """(train, val): a random validation part of round(val_fraction * n) samples and the rest."""
        t, v = ctypes.c_void_p(), ctypes.c_void_p()
        check(lib.nncl_dataset_split(self._handle(), float(val_fraction), int(seed) & (2**64 - 1), ctypes.byref(t),
                                     ctypes.byref(v)), None, "nncl_dataset_split")
        return Dataset._wrap(t.value), Dataset._wrap(v.value)

    def stats(self):
        """(mean, std) per feature, std divided by n (1 for a constant feature)."""
        mean, std = np.empty(self.features, np.float32), np.empty(self.features, np.float32)
        check(lib.nncl_dataset_stats(self._handle(), ptr(mean), ptr(std)), None, "nncl_dataset_stats")
        return mean, std

    def standardize(self, mean, std):
        """x = (x - mean) / std per feature, in place."""
        mean, std = floats(mean, "standardize mean"), floats(std, "standardize std")
        if mean.size != self.features or std.size != self.features:
            raise ValueError("Dataset.standardize: mean and std need %d values each; got %d and %d"
                             % (self.features, mean.size, std.size))
        check(lib.nncl_dataset_standardize(self._handle(), ptr(mean), ptr(std)), None, "nncl_dataset_standardize")

    def scale(self, scale, shift=0.0):
        """x = x * scale + shift, in place."""
        check(lib.nncl_dataset_scale(self._handle(), float(scale), float(shift)), None, "nncl_dataset_scale")

    def loader(self, batch_size, seed=0, shuffle=True, drop_last=False):
        return Loader(self, batch_size, seed, shuffle, drop_last)

    def __repr__(self):
        return "<nncl.Dataset %d x %s, %d classes>" % (len(self), list(self.shape), self.classes) \
            if self._h else "<nncl.Dataset closed>"


def augment(shift=0, flip_horizontal=False, shape=None):
    """nncl_augment: each image moved by up to shift pixels per axis (zeros moved in) and, with
    flip_horizontal, mirrored left-right half of the time. shape: the sample's (C, H, W); None
    in Trainer.fit: x's."""
    c, h, w = shape if shape is not None else (0, 0, 0)
    return _lib.Augment(int(c), int(h), int(w), int(shift), int(bool(flip_horizontal)))


class Loader(Owned):
    """Batches of a Dataset gathered ahead by a background thread (nncl_loader). Iterating gives
    one epoch of (x, y) batches; each pair is a read-only view valid until the next batch (copy
    it to keep it). The dataset stays alive and must stay unchanged while the loader exists.
    augment: shift and flip each image (augment(); None: none)."""

    def __init__(self, dataset, batch_size, seed=0, shuffle=True, drop_last=False, augment=None):
        flags = (1 if shuffle else 0) | (2 if drop_last else 0)
        h = ctypes.c_void_p()
        check(lib.nncl_loader_create(dataset._handle(), int(batch_size), int(seed) & (2**64 - 1), flags,
                                     ctypes.byref(h)), None, "nncl_loader_create")
        self.dataset = dataset
        self._shape = dataset.shape
        self._own(h.value, lib.nncl_loader_free, dataset)
        if augment is not None:
            check(lib.nncl_loader_set_augment(self._handle(), ctypes.byref(augment)), None, "nncl_loader_set_augment")

    def next(self):
        """The next batch of the current epoch, or None at its end (the call after starts the next)."""
        xp, yp, n = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
        check(lib.nncl_loader_next(self._handle(), ctypes.byref(xp), ctypes.byref(yp), ctypes.byref(n)), None,
              "nncl_loader_next")
        if n.value == 0:
            return None
        return view(xp.value, (n.value,) + self._shape, self), view(yp.value, (n.value,), self)

    def __iter__(self):
        while True:
            batch = self.next()
            if batch is None:
                return
            yield batch

    def reset(self, epoch=0):
        """Drops the batches prepared and starts epoch `epoch` from its first batch."""
        check(lib.nncl_loader_reset(self._handle(), int(epoch)), None, "nncl_loader_reset")

    def __len__(self):
        return lib.nncl_loader_batches(self._handle())

    @property
    def epoch(self):
        return lib.nncl_loader_epoch(self._handle())
