"""nncl: tensors and neural networks on any OpenCL device, from Python.

A thin layer over libnncl.so through ctypes (no compiler needed). The library is found in this
order: $NNCL_LIBRARY when set (that file only); build/libnncl.so of the source tree when the
package is used from it; the system's library search (ldconfig, LD_LIBRARY_PATH); make install's
/usr/local/lib and /usr/lib. Failing calls raise NNCLError subclasses carrying the library's
message (nncl_last_error). Example:

    import numpy as np, nncl
    ctx = nncl.init()
    g = nncl.Graph(ctx, seed=1)
    x = g.input("x", (2,)); y = g.input("y", ())
    h = g.linear(x, 8, act="tanh", name="fc1"); logits = g.linear(h, 2, name="fc2")
    loss = g.softmax_cross_entropy(logits, y)
    t = nncl.Trainer(g, loss, optimizer="adam", lr=0.05, max_batch=4)
"""
from ._lib import LibraryNotFoundError, path as library_path
from ._errors import (NNCLError, InvalidArgumentError, ShapeError, OutOfMemoryError, DeviceError, KernelBuildError,
                      NoDeviceError, FileError, FormatError, UnsupportedError, BlasError, NumericError, StateError,
                      GraphError, last_error)
from ._core import Context, DeviceInfo, ProfileReport, devices, init, kernel_families
from ._tensor import (Tensor, Event, add, sub, mul, scale, relu, sigmoid, tanh, gelu, softmax, log_softmax, sum,
                      mean, gemm, gemm_variant, gemm_half)
from .graph import Graph, Node
from .trainer import (Trainer, StepInfo, FitResult, BatchFit, StageInfo, optim_config, learning_rate,
                      max_batch_fit)
from .data import Dataset, Loader, augment, CsvTable, load_idx, parse_idx, load_csv, parse_csv, permutation
from .safetensors import SafeTensors, load_safetensors, save_safetensors
from .model import Model
from .progress import Progress, Curve, CurveRow, svg_bar_chart, svg_bar_panels

__version__ = "0.1.0"
