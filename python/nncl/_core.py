"""Handles, arrays, the context and its devices."""
import ctypes
import operator
import weakref
from dataclasses import dataclass

import numpy as np

from . import _lib
from ._errors import StateError, check

lib = _lib.lib
f32 = np.dtype(np.float32)


def _free(fn, h, *keep):
    # keep: the objects the handle depends on (a trainer's graph and context), held by the
    # finalizer so that they are freed after it, whatever order the collector finds them in
    fn(h)


class Owned:
    """An object owning one libnncl handle, freed by close(), by `with`, or when the object is
    collected; at interpreter exit the remaining ones are freed newest first."""
    _h = None

    def _own(self, h, free_fn, *keep):
        self._h = h
        self._finalizer = weakref.finalize(self, _free, free_fn, h, *keep)

    def _handle(self):
        if self._h is None:
            raise StateError("%s is closed" % type(self).__name__)
        return self._h

    def close(self):
        """Frees the handle now (also done when the object is collected); later calls raise StateError."""
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin()
        self._h = None

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def b(s):
    """str -> bytes for char * arguments (None stays NULL)."""
    if s is None or isinstance(s, bytes):
        return s
    return str(s).encode("utf-8")


def text(p):
    return None if p is None else p.decode("utf-8", "replace")


def floats(a, what):
    """An input array as float32, C-contiguous and aligned: used as it is when it already is
    (no copy), else converted by a copy (other real dtypes, other strides, byte orders). A
    dtype that is not a real number (complex, object, strings) raises TypeError."""
    if type(a) is np.ndarray and a.dtype is f32 and a.flags.c_contiguous and a.flags.aligned:
        return a
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise TypeError("%s: dtype %s is not a real number type (float32 is used without a copy; bool, "
                        "integer and other float arrays are converted)" % (what, a.dtype))
    if a.dtype != f32 or not a.flags.c_contiguous or not a.flags.aligned:
        a = np.array(a, dtype=f32, order="C", copy=True)
    return a


def out_array(out, shape, what):
    """A caller's output array, checked (refused, not converted: the results must land in it),
    or a new float32 one."""
    if out is None:
        return np.empty(shape, f32)
    if not isinstance(out, np.ndarray) or out.dtype != f32 or not out.flags.c_contiguous or \
            not out.flags.aligned or not out.flags.writeable or out.shape != tuple(shape):
        raise ValueError("%s: out must be a writeable C-contiguous float32 array of shape %s; got %s" % (
            what, tuple(shape),
            "%s %s%s" % (out.dtype, out.shape, "" if out.flags.c_contiguous else " (not C-contiguous)")
            if isinstance(out, np.ndarray) else type(out).__name__))
    return out


def ptr(a):
    return a.ctypes.data


def view(address, shape, owner):
    """A read-only float32 array over memory owned by a libnncl object, keeping the owner alive
    (no copy)."""
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0 or not address:
        return np.empty(shape, f32)
    buf = (ctypes.c_char * (n * 4)).from_address(address)
    buf._owner = owner
    a = np.frombuffer(buf, dtype=f32).reshape(shape)
    a.flags.writeable = False
    return a


def shape_arg(shape, what, allow_scalar=True):
    """A shape (int or sequence of ints) as (ndim, c_int array)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError("%s: a shape is a sequence of integers; got %r" % (what, shape)) from None
    if not shape and not allow_scalar:
        raise ValueError("%s: needs at least one dimension" % what)
    return len(shape), (ctypes.c_int * max(1, len(shape)))(*shape)


# ------------------------------------------------------------------ devices

DEVICE_TYPES = {1: "cpu", 2: "gpu", 4: "accelerator", 8: "other"}


@dataclass(frozen=True)
class DeviceInfo:
    """One OpenCL device (nncl_device_info); type is "cpu", "gpu", "accelerator" or "other"."""
    index: int
    platform_index: int
    platform: str
    vendor: str
    name: str
    driver: str
    cl_version: str
    pci_bus_id: str
    type: str
    compute_units: int
    clock_mhz: int
    global_mem: int
    max_alloc: int
    local_mem: int
    fp16: bool
    fp64: bool

    @classmethod
    def _from(cls, c):
        return cls(c.index, c.platform_index, text(c.platform), text(c.vendor), text(c.name), text(c.driver),
                   text(c.cl_version), text(c.pci_bus_id), DEVICE_TYPES.get(c.type, str(c.type)),
                   c.compute_units, c.clock_mhz, c.global_mem, c.max_alloc, c.local_mem, bool(c.fp16),
                   bool(c.fp64))

    def __str__(self):
        return "%d: %s (%s, %s, %d compute units, %.1f GiB)" % (
            self.index, self.name, self.platform, self.type, self.compute_units, self.global_mem / 2**30)


def devices():
    """Every device of every OpenCL platform present (nncl_devices_list), whatever the selection:
    the list the bench and examples/devices print, and the indices NNCL_DEVICES takes."""
    n = ctypes.c_int(0)
    check(lib.nncl_devices_list(None, 0, ctypes.byref(n)), None, "nncl_devices_list")
    arr = (_lib.DeviceInfoC * max(1, n.value))()
    check(lib.nncl_devices_list(arr, n.value, ctypes.byref(n)), None, "nncl_devices_list")
    return [DeviceInfo._from(arr[i]) for i in range(min(n.value, len(arr)))]


@dataclass(frozen=True)
class ProfileReport:
    """nncl_profile_report: kernels timed between profile_start and profile_stop."""
    launches: int
    kernel_seconds: float
    span_seconds: float
    plausible: bool


LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}


class Context(Owned):
    """An nncl context (nncl_init): the chosen devices, their kernels and queues.

    devices: a selection as NNCL_DEVICES takes it ("all", "gpu", "cpu", an index, a part of a
    name such as "pocl", comma-separated; a list of indices or names is joined), None for
    $NNCL_DEVICES or the default (all GPUs, else the fastest CPU device). log: a callable
    log(level, message) receiving messages up to log_level ("error", "warn", "info", "debug");
    it may be called from the trainer's device threads and must not call nncl on this context.
    The other options are nncl_config's fields of the same names."""

    def __init__(self, devices=None, kernel_dir=None, log=None, log_level="warn", profiling=False,
                 binary_cache=0, gemm_tune=0, memory_cap=0):
        cfg = lib.nncl_config_default()
        if devices is not None and not isinstance(devices, (str, bytes)):
            devices = ",".join(str(d) for d in devices)
        cfg.devices = b(devices)
        cfg.kernel_dir = b(kernel_dir)
        if log is not None:
            def _log(user, level, message, fn=log):
                try:
                    fn(level, message.decode("utf-8", "replace"))
                except Exception:  # a callback cannot raise into C
                    pass
            self._log = _lib.LOG_FN(_log)  # kept alive as long as the context
            cfg.log = self._log
            cfg.log_level = LOG_LEVELS.get(log_level, log_level)
        cfg.profiling = int(bool(profiling))
        cfg.binary_cache = int(binary_cache)
        cfg.gemm_tune = int(gemm_tune)
        cfg.memory_cap = int(memory_cap)
        h = ctypes.c_void_p()
        check(lib.nncl_init(ctypes.byref(cfg), ctypes.byref(h)), None, "nncl_init")
        self._own(h.value, lib.nncl_free, getattr(self, "_log", None))

    def _check(self, status, function):
        if status:
            check(status, self._h, function)

    @property
    def device_count(self):
        return lib.nncl_device_count(self._handle())

    @property
    def devices(self):
        """The context's devices (index: their position in the context)."""
        out = []
        for d in range(self.device_count):
            c = _lib.DeviceInfoC()
            self._check(lib.nncl_device_info_get(self._h, d, ctypes.byref(c)), "nncl_device_info_get")
            out.append(DeviceInfo._from(c))
        return out

    def _devs(self, device):
        return range(self.device_count) if device is None else [device]

    def finish(self, device=None):
        """Waits until the work queued on the device (None: every device) is done."""
        for d in self._devs(device):
            self._check(lib.nncl_finish(self._handle(), d), "nncl_finish")

    def memory(self, device=0):
        """(bytes in use, peak bytes) nncl holds on the device."""
        a, p = ctypes.c_uint64(), ctypes.c_uint64()
        self._check(lib.nncl_device_memory(self._handle(), device, ctypes.byref(a), ctypes.byref(p)),
                    "nncl_device_memory")
        return a.value, p.value

    def tune_gemm(self, device=0, seconds=60.0):
        """nncl_tune_gemm: tunes CLBlast's SGEMM for the device and stores the result."""
        self._check(lib.nncl_tune_gemm(self._handle(), device, float(seconds)), "nncl_tune_gemm")

    def profile_start(self, device=0):
        """Starts timing every kernel on the device (the context needs profiling=True)."""
        self._check(lib.nncl_profile_start(self._handle(), device), "nncl_profile_start")

    def profile_stop(self, device=0):
        """Waits for the device, stops timing, returns a ProfileReport."""
        r = _lib.ProfileReportC()
        self._check(lib.nncl_profile_stop(self._handle(), device, ctypes.byref(r)), "nncl_profile_stop")
        return ProfileReport(r.launches, r.kernel_seconds, r.span_seconds, bool(r.plausible))

    def profile_kernels(self, device=0):
        """[(kernel name, launches, seconds)] of the last profile_stop, the most time first."""
        n = lib.nncl_profile_kernels(self._handle(), device, None, 0)
        arr = (_lib.ProfileKernelC * max(1, n))()
        n = lib.nncl_profile_kernels(self._h, device, arr, n)
        return [(text(arr[i].name), arr[i].launches, arr[i].seconds) for i in range(n)]

    def opencl(self, device=0):
        """nncl_device_opencl: device's (cl_platform_id, cl_device_id, cl_context, cl_command_queue) as
        integers, owned by nncl (for OpenCL work of one's own beside nncl's)."""
        o = _lib.OpenCLC()
        self._check(lib.nncl_device_opencl(self._handle(), device, ctypes.byref(o)), "nncl_device_opencl")
        return (o.platform, o.device, o.context, o.queue)

    def kernel_program(self, family, device=0):
        """nncl_kernel_program: the cl_program (an integer, owned by nncl) of cl/<family>.cl on device."""
        p = ctypes.c_void_p()
        self._check(lib.nncl_kernel_program(self._handle(), device, b(family), ctypes.byref(p)),
                    "nncl_kernel_program")
        return p.value

    def gemm_variants(self, device=0):
        """nncl's own GEMM variants on device: {name: the (trans_a, trans_b) pairs it runs}."""
        out = {}
        for v in range(lib.nncl_gemm_variant_count(self._handle(), device)):
            name = text(lib.nncl_gemm_variant_name(self._h, device, v))
            out[name] = [(ta, tb) for ta in (False, True) for tb in (False, True)
                         if lib.nncl_gemm_variant_takes(self._h, device, v, int(ta), int(tb))]
        return out

    def gemm_chosen(self, m, n, k, trans_a=False, trans_b=False, device=0):
        """What nncl_gemm runs for the shape on device: "clblast", a variant's name, or "" before one chose."""
        return text(lib.nncl_gemm_chosen(self._handle(), device, int(bool(trans_a)), int(bool(trans_b)), int(m),
                                         int(n), int(k)))

    def gemm_tuned(self, device=0):
        """Whether a stored CLBlast tuning is applied on device (nncl_gemm_tuned)."""
        return bool(lib.nncl_gemm_tuned(self._handle(), device))

    @property
    def last_error(self):
        return text(lib.nncl_last_error(self._handle()))

    def tensor(self, data=None, shape=None, device=0):
        """A device tensor of shape, written from data when given (its shape when shape is None)."""
        from ._tensor import Tensor
        return Tensor(self, shape if shape is not None else np.shape(data), device, data)

    def __repr__(self):
        return "<nncl.Context %s>" % ("closed" if self._h is None else
                                      ", ".join(d.name for d in self.devices))


def kernel_families():
    """The kernel files built into the library ("common.cl", ...; nncl_kernel_family)."""
    out = []
    while True:
        f = lib.nncl_kernel_family(len(out))
        if f is None:
            return out
        out.append(f.decode())


def init(devices=None, **options):
    """nncl_init: a Context on the selected devices (see Context for the options)."""
    return Context(devices, **options)
