"""Device tensors, transfers and the eager ops (each queued on the tensors' device)."""
import ctypes

import numpy as np

from . import _lib
from ._core import Owned, floats, out_array, ptr, shape_arg
from ._errors import check

lib = _lib.lib


class Tensor(Owned):
    """A float32 tensor of 1 to 4 dimensions on one device of ctx (nncl_tensor)."""

    def __init__(self, ctx, shape, device=0, data=None):
        ndim, dims = shape_arg(shape, "Tensor", allow_scalar=False)
        h = ctypes.c_void_p()
        check(lib.nncl_tensor_create(ctx._handle(), device, ndim, dims, ctypes.byref(h)), ctx._h,
              "nncl_tensor_create")
        self.ctx = ctx
        self._own(h.value, lib.nncl_tensor_free, ctx)
        if data is not None:
            self.write(data)

    @property
    def shape(self):
        h = self._handle()
        return tuple(lib.nncl_tensor_dim(h, i) for i in range(lib.nncl_tensor_ndim(h)))

    @property
    def ndim(self):
        return lib.nncl_tensor_ndim(self._handle())

    @property
    def size(self):
        return lib.nncl_tensor_numel(self._handle())

    @property
    def device(self):
        return lib.nncl_tensor_device(self._handle())

    def _src(self, data, what):
        a = floats(data, what)
        if a.size != self.size:
            raise ValueError("%s: %d values for a tensor of shape %s" % (what, a.size, self.shape))
        return a

    def write(self, data):
        """Copies data (converted to float32 as floats() does; any shape of numel values) to the device."""
        a = self._src(data, "Tensor.write")
        check(lib.nncl_tensor_write(self._handle(), ptr(a), a.size), self.ctx._h, "nncl_tensor_write")

    def write_half(self, data, store="fp16"):
        """Writes data's values into the first elements of the buffer as fp16 or bf16 bit patterns
        (the layout of half storage, up to twice the tensor's size; nncl_tensor_write_half)."""
        a = floats(data, "Tensor.write_half")
        if a.size > 2 * self.size:
            raise ValueError("Tensor.write_half: %d values for a tensor of %d floats" % (a.size, self.size))
        st = {"fp16": 1, "bf16": 2}.get(store)
        if st is None:
            raise ValueError("Tensor.write_half: store must be 'fp16' or 'bf16'; got %r" % (store,))
        check(lib.nncl_tensor_write_half(self._handle(), st, ptr(a), a.size), self.ctx._h, "nncl_tensor_write_half")

    @property
    def opencl(self):
        """The cl_mem of the tensor's buffer, as an integer owned by nncl (nncl_tensor_opencl)."""
        return lib.nncl_tensor_opencl(self._handle())

    def read(self, out=None):
        """The values as a new float32 array of the tensor's shape, or into out (checked, not converted)."""
        out = out_array(out, self.shape, "Tensor.read")
        check(lib.nncl_tensor_read(self._handle(), ptr(out), out.size), self.ctx._h, "nncl_tensor_read")
        return out

    def numpy(self):
        return self.read()

    def write_async(self, data):
        """Starts the copy and returns an Event; data stays referenced until the event is waited for."""
        a = self._src(data, "Tensor.write_async")
        ev = ctypes.c_void_p()
        check(lib.nncl_tensor_write_async(self._handle(), ptr(a), a.size, ctypes.byref(ev)), self.ctx._h,
              "nncl_tensor_write_async")
        return Event(ev.value, self, a)

    def read_async(self, out=None):
        """Starts reading into out (or a new array): Event.wait() returns the array."""
        out = out_array(out, self.shape, "Tensor.read_async")
        ev = ctypes.c_void_p()
        check(lib.nncl_tensor_read_async(self._handle(), ptr(out), out.size, ctypes.byref(ev)), self.ctx._h,
              "nncl_tensor_read_async")
        return Event(ev.value, self, out)

    def copy_from(self, src):
        """nncl_tensor_copy: src's values (equal element count; another device or platform too)."""
        check(lib.nncl_tensor_copy(self._handle(), src._handle()), self.ctx._h, "nncl_tensor_copy")

    def __repr__(self):
        return "<nncl.Tensor %s on device %d>" % (self.shape, self.device) if self._h else "<nncl.Tensor closed>"


class Event(Owned):
    """Completion of a non-blocking transfer; the host array stays alive until it is waited for."""

    def __init__(self, h, tensor, array):
        self._tensor, self.array = tensor, array
        self._own(h, lib.nncl_event_free, tensor, array)  # never freed before the transfer's memory

    def wait(self):
        """Waits for the transfer; returns its host array (the values read, for a read)."""
        check(lib.nncl_event_wait(self._handle()), self._tensor.ctx._h, "nncl_event_wait")
        a = self.array
        self.close()
        return a


def _out(x, out):
    return out if out is not None else Tensor(x.ctx, x.shape, x.device)


def _binary(fn, name):
    def op(a, b, out=None):
        out = _out(a, out)
        check(fn(a.ctx._handle(), a._handle(), b._handle(), out._handle()), a.ctx._h, name)
        return out
    op.__name__ = name[5:]
    op.__doc__ = "out = a %s b (nncl_%s): b of a's shape or a row vector [cols]; out new when None." % (
        {"add": "+", "sub": "-", "mul": "*"}[name[5:]], name[5:])
    return op


def _unary(fn, name, doc):
    def op(x, out=None):
        out = _out(x, out)
        check(fn(x.ctx._handle(), x._handle(), out._handle()), x.ctx._h, name)
        return out
    op.__name__ = name[5:]
    op.__doc__ = "out = %s (%s), queued on x's device; out new when None." % (doc, name)
    return op


add = _binary(lib.nncl_add, "nncl_add")
sub = _binary(lib.nncl_sub, "nncl_sub")
mul = _binary(lib.nncl_mul, "nncl_mul")
relu = _unary(lib.nncl_relu, "nncl_relu", "max(x, 0)")
sigmoid = _unary(lib.nncl_sigmoid, "nncl_sigmoid", "1 / (1 + exp(-x))")
tanh = _unary(lib.nncl_tanh, "nncl_tanh", "tanh(x)")
gelu = _unary(lib.nncl_gelu, "nncl_gelu", "x/2 (1 + erf(x/sqrt 2))")
softmax = _unary(lib.nncl_softmax, "nncl_softmax", "softmax over the last dimension")
log_softmax = _unary(lib.nncl_log_softmax, "nncl_log_softmax", "log softmax over the last dimension")


def scale(x, alpha, out=None):
    """out = alpha * x (nncl_scale)."""
    out = _out(x, out)
    check(lib.nncl_scale(x.ctx._handle(), x._handle(), float(alpha), out._handle()), x.ctx._h, "nncl_scale")
    return out


def _reduce(fn, name):
    def op(x, axis, out=None):
        rows, cols = x.shape[0], x.size // max(1, x.shape[0])
        out = out if out is not None else Tensor(x.ctx, (cols,) if axis == 0 else (rows,), x.device)
        check(fn(x.ctx._handle(), x._handle(), int(axis), out._handle()), x.ctx._h, name)
        return out
    op.__name__ = name[5:]
    op.__doc__ = ("%s of x [rows, cols] (%s): axis 0 over the rows (out [cols]), axis 1 over the columns "
                  "(out [rows])." % (name[5:], name))
    return op


sum = _reduce(lib.nncl_sum, "nncl_sum")
mean = _reduce(lib.nncl_mean, "nncl_mean")


def gemm(a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False):
    """c = alpha * op(a) op(b) + beta * c (nncl_gemm), all 2-D; c new (and beta ignored) when None."""
    if c is None:
        m = a.shape[1] if trans_a else a.shape[0]
        n = b.shape[0] if trans_b else b.shape[1]
        c, beta = Tensor(a.ctx, (m, n), a.device), 0.0
    check(lib.nncl_gemm(a.ctx._handle(), int(bool(trans_a)), int(bool(trans_b)), float(alpha), a._handle(),
                        b._handle(), float(beta), c._handle()), a.ctx._h, "nncl_gemm")
    return c


def gemm_variant(variant, a, b, c, m, n, k, trans_a=False, trans_b=False):
    """c = op(a) op(b) through nncl's own GEMM variant (an index of Context.gemm_variants) alone:
    c [m, n] from the first elements of the buffers (nncl_gemm_variant_run)."""
    check(lib.nncl_gemm_variant_run(a.ctx._handle(), int(variant), int(bool(trans_a)), int(bool(trans_b)), int(m),
                                    int(n), int(k), a._handle(), b._handle(), c._handle()), a.ctx._h,
          "nncl_gemm_variant_run")
    return c


def gemm_half(a, b, c, m, n, k, store="fp16", trans_a=False, trans_b=False):
    """The product of gemm_variant in half storage (a, b, c written by Tensor.write_half; nncl_gemm_half)."""
    st = {"fp16": 1, "bf16": 2}.get(store)
    if st is None:
        raise ValueError("gemm_half: store must be 'fp16' or 'bf16'; got %r" % (store,))
    check(lib.nncl_gemm_half(a.ctx._handle(), st, int(bool(trans_a)), int(bool(trans_b)), int(m), int(n), int(k),
                             a._handle(), b._handle(), c._handle()), a.ctx._h, "nncl_gemm_half")
    return c
