"""Progress output, training curves and SVG charts (nncl never prints on its own: these write
only to the stream or file named)."""
import ctypes
import math
import os
import sys
from dataclasses import dataclass

from . import _lib
from ._core import Owned, b
from ._errors import OutOfMemoryError, check

lib, libc = _lib.lib, _lib.libc
MODES = {"auto": 0, "bar": 1, "lines": 2, "quiet": 3}


def _stream_fd(file):
    """The file descriptor behind a Python stream (sys.stderr when None), or 2."""
    file = sys.stderr if file is None else file
    if isinstance(file, int):
        return file
    try:
        file.flush()
        return file.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (a notebook)
        return 2


def _close_progress(h, f):
    lib.nncl_progress_free(h)
    libc.fclose(f)


class Progress(Owned):
    """A progress reporter (nncl_progress) for epochs of steps_per_epoch steps (0: unknown),
    writing to file (a stream with a file descriptor, or one; None: sys.stderr). mode: "auto" (a
    bar on a terminal, else lines), "bar", "lines" or "quiet"; interval: the least seconds between
    two step lines in lines mode (default 10)."""

    def __init__(self, epochs, steps_per_epoch=0, file=None, mode="auto", interval=None):
        f = libc.fdopen(os.dup(_stream_fd(file)), b"w")
        if not f:
            raise OutOfMemoryError("Progress: fdopen failed")
        h = ctypes.c_void_p()
        st = lib.nncl_progress_create(f, int(epochs), int(steps_per_epoch), ctypes.byref(h))
        if st:
            libc.fclose(f)
            check(st, None, "nncl_progress_create")
        self._own(h.value, lambda p, f=f: _close_progress(p, f))
        self.mode = mode
        if interval is not None:
            self.interval = interval

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, mode):
        if mode not in MODES:
            raise ValueError("Progress mode must be one of %s; got %r" % (", ".join(MODES), mode))
        lib.nncl_progress_set_mode(self._handle(), MODES[mode])
        self._mode = mode

    @property
    def interval(self):
        return self._interval

    @interval.setter
    def interval(self, seconds):
        lib.nncl_progress_set_interval(self._handle(), float(seconds))
        self._interval = float(seconds)

    def set_extra(self, text):
        """A short text at the end of the line (at most 63 bytes kept; None clears)."""
        lib.nncl_progress_set_extra(self._handle(), b(text))

    def update(self, epoch, step, loss, acc=-1.0, samples=0):
        """After step `step` of epoch `epoch` (both 0-based) on `samples` samples; acc a fraction, < 0 unknown."""
        lib.nncl_progress_update(self._handle(), int(epoch), int(step), float(loss), float(acc), int(samples))

    def epoch_end(self, epoch, train_loss, train_acc=-1.0, val_loss=math.nan, val_acc=-1.0):
        lib.nncl_progress_epoch_end(self._handle(), int(epoch), float(train_loss), float(train_acc),
                                    float(val_loss), float(val_acc))

    def message(self, text):
        """A line of text that does not break the bar."""
        lib.nncl_progress_message(self._handle(), b(text))


@dataclass
class CurveRow:
    """One epoch of a training curve (nncl_curve_row); NaN marks a value not measured."""
    epoch: int
    train_loss: float
    train_acc: float
    val_loss: float = math.nan
    val_acc: float = math.nan
    seconds: float = 0.0
    samples_per_s: float = 0.0


class Curve(Owned):
    """A training curve (nncl_curve): one row per epoch, written as CSV and drawn as SVG."""

    def __init__(self):
        h = ctypes.c_void_p()
        check(lib.nncl_curve_create(ctypes.byref(h)), None, "nncl_curve_create")
        self._own(h.value, lib.nncl_curve_free)

    def add(self, row=None, **fields):
        """Appends a CurveRow (or its fields as keywords)."""
        row = row if row is not None else CurveRow(**fields)
        c = _lib.CurveRow(*[getattr(row, n) for n, _ in _lib.CurveRow._fields_])
        check(lib.nncl_curve_add(self._handle(), ctypes.byref(c)), None, "nncl_curve_add")

    def __len__(self):
        return lib.nncl_curve_count(self._handle())

    def __getitem__(self, i):
        if i < 0:
            i += len(self)
        c = _lib.CurveRow()
        check(lib.nncl_curve_get(self._handle(), int(i), ctypes.byref(c)), None, "nncl_curve_get")
        return CurveRow(*[getattr(c, n) for n, _ in _lib.CurveRow._fields_])

    @property
    def rows(self):
        return [self[i] for i in range(len(self))]

    def write_csv(self, path):
        check(lib.nncl_curve_write_csv(self._handle(), b(os.fspath(path))), None, "nncl_curve_write_csv")

    def write_svg(self, path, title=None):
        check(lib.nncl_curve_write_svg(self._handle(), b(os.fspath(path)), b(title)), None, "nncl_curve_write_svg")


def _strings(items):
    keep = [b(s) for s in items]
    return (ctypes.c_char_p * max(1, len(keep)))(*keep)


def svg_bar_chart(path, title, unit, labels, values):
    """A standalone SVG bar chart of values (>= 0) with their labels (nncl_svg_bar_chart)."""
    labels, values = list(labels), [float(v) for v in values]
    if len(labels) != len(values):
        raise ValueError("svg_bar_chart: %d labels for %d values" % (len(labels), len(values)))
    check(lib.nncl_svg_bar_chart(b(os.fspath(path)), b(title), b(unit), _strings(labels),
                                 (ctypes.c_double * max(1, len(values)))(*values), len(values)),
          None, "nncl_svg_bar_chart")


def svg_bar_panels(path, title, unit, panels):
    """Several bar charts in one SVG, each with its own value axis: panels is a list of
    (heading, labels, values) (nncl_svg_bar_panels)."""
    headings, counts, labels, values = [], [], [], []
    for heading, lab, val in panels:
        lab, val = list(lab), [float(v) for v in val]
        if len(lab) != len(val):
            raise ValueError("svg_bar_panels: panel %r has %d labels for %d values" % (heading, len(lab), len(val)))
        headings.append(heading)
        counts.append(len(lab))
        labels += lab
        values += val
    check(lib.nncl_svg_bar_panels(b(os.fspath(path)), b(title), b(unit), len(headings), _strings(headings),
                                  (ctypes.c_int * max(1, len(counts)))(*counts), _strings(labels),
                                  (ctypes.c_double * max(1, len(values)))(*values)),
          None, "nncl_svg_bar_panels")
