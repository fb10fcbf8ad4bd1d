"""Exceptions: one class per nncl_status, raised with nncl_last_error()'s message."""
from . import _lib

OK = 0


class NNCLError(Exception):
    """A call into libnncl failed. str() is the library's own message (what failed and where);
    .status is the nncl_status code (None for a refused graph builder), .status_name its short
    name and .function the C function that returned it."""
    status = None

    def __init__(self, message, status=None, function=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.function = function

    @property
    def status_name(self):
        return _status_str(self.status) if self.status is not None else "refused"


class InvalidArgumentError(NNCLError, ValueError):
    """NNCL_ERR_INVALID_ARGUMENT: a NULL pointer, bad size, bad option, a bad feed."""
    status = -1


class ShapeError(NNCLError, ValueError):
    """NNCL_ERR_SHAPE: shapes do not fit together (the message names the node and both shapes)."""
    status = -2


class OutOfMemoryError(NNCLError, MemoryError):
    """NNCL_ERR_OUT_OF_MEMORY: a host or device allocation failed."""
    status = -3


class DeviceError(NNCLError, RuntimeError):
    """NNCL_ERR_DEVICE: an OpenCL call failed (the message names the call and its code)."""
    status = -4


class KernelBuildError(DeviceError):
    """NNCL_ERR_BUILD: a kernel program did not build (the message holds the build log)."""
    status = -5


class NoDeviceError(NNCLError, RuntimeError):
    """NNCL_ERR_NO_DEVICE: no OpenCL device matches the selection."""
    status = -6


class FileError(NNCLError, OSError):
    """NNCL_ERR_IO: a file could not be read or written."""
    status = -7


class FormatError(NNCLError, ValueError):
    """NNCL_ERR_FORMAT: a file or text is malformed."""
    status = -8


class UnsupportedError(NNCLError, NotImplementedError):
    """NNCL_ERR_UNSUPPORTED: the device or the build lacks a feature."""
    status = -9


class BlasError(DeviceError):
    """NNCL_ERR_BLAS: CLBlast reported an error."""
    status = -10


class NumericError(NNCLError, ArithmeticError):
    """NNCL_ERR_NUMERIC: NaN or Inf where a number is needed."""
    status = -11


class StateError(NNCLError, RuntimeError):
    """NNCL_ERR_STATE: the call is not valid in the current state (also: a closed object)."""
    status = -12


class GraphError(NNCLError, ValueError):
    """A graph builder returned NULL: a wrong shape (the message names the node and both
    shapes), a missing or duplicate name, a bad attribute. Builders give no status code."""


BY_STATUS = {c.status: c for c in (InvalidArgumentError, ShapeError, OutOfMemoryError, DeviceError,
                                   KernelBuildError, NoDeviceError, FileError, FormatError, UnsupportedError,
                                   BlasError, NumericError, StateError)}

_last_error = _lib.lib.nncl_last_error
_status_str_fn = _lib.lib.nncl_status_str


def _status_str(status):
    return _status_str_fn(status).decode("utf-8", "replace")


def last_error(ctx=None):
    """nncl_last_error(): the last message recorded on ctx (a Context or a raw handle), or with
    ctx None, the last of this thread's calls made without a context."""
    return _last_error(getattr(ctx, "_h", ctx)).decode("utf-8", "replace")


def error(status, ctx, function):
    """The exception for a non-OK status, carrying the message recorded on ctx (a raw handle or None)."""
    cls = BY_STATUS.get(status, NNCLError)
    return cls(_last_error(ctx).decode("utf-8", "replace"), status, function)


def check(status, ctx, function):
    """Raises the exception of a non-OK status; ctx is the raw context handle the message is on."""
    if status != OK:
        raise error(status, ctx, function)
