"""The graph builder. Every builder of include/nncl.h is one line of BUILDERS below: its Python
name, its C function and its arguments in the C order after the graph, with their kinds and
defaults; Graph gets one method per line. A line whose function the loaded library lacks gives
a method that raises UnsupportedError, so the package runs on an older libnncl."""
import ast
import ctypes
import inspect
import operator
import os
import tempfile

from . import _lib
from ._core import Owned, b, shape_arg
from ._lib import libc
from ._errors import GraphError, StateError, UnsupportedError, check

lib = _lib.lib
ACTS = {None: 0, "none": 0, "relu": 1, "sigmoid": 2, "tanh": 3}
BN_ACTS = {None: 0, "none": 0, "relu": 1, "relu6": 2, "hardswish": 3}
INITS = {"zeros": 0, "ones": 1, "uniform": 2, "normal": 3, "fan_in_uniform": 4}

# name, C function, "arg:kind[=default] ...", flags, doc. Kinds: node (of this graph), node? (a
# node or None), int, float, bool, str, act ("relu", "sigmoid", "tanh", None), bnact (a key of
# BN_ACTS), init (a key of INITS), shape (ndim and an int array in C). A default "@arg" takes
# arg's value. Flags: "loss" (the first two nodes are the logits or predictions and the labels
# or targets, remembered for the trainer), "input" (an input, remembered likewise), "status"
# (the C function returns nncl_status, not a node).
BUILDERS = [
    ("input", "nncl_input", "name:str shape:shape=()", "input", "An input fed every step, of per-sample shape (() for one number per sample, such as a class label)."),
    ("param", "nncl_param", "name:str shape:shape init:init=fan_in_uniform scale:float=1.0", "", "A parameter named as PyTorch would name it (\"fc1.weight\"); init: zeros, ones, uniform U(-scale, scale), normal N(0, scale^2), fan_in_uniform."),
    ("freeze", "nncl_param_freeze", "param:node frozen:bool=True", "status", "Frozen parameters get no update and no gradient work. Before any trainer."),
    ("add", "nncl_op_add", "a:node b:node", "", "a + b; b of a's shape, or a vector of a's last dimension."),
    ("sub", "nncl_op_sub", "a:node b:node", "", "a - b; b of a's shape, or a vector of a's last dimension."),
    ("mul", "nncl_op_mul", "a:node b:node", "", "a * b; b of a's shape, or a vector of a's last dimension."),
    ("scale", "nncl_op_scale", "x:node alpha:float", "", "alpha * x."),
    ("relu", "nncl_op_relu", "x:node", "", "max(x, 0)."),
    ("leaky_relu", "nncl_op_leaky_relu", "x:node slope:float=0.01", "", "x > 0 ? x : slope x."),
    ("sigmoid", "nncl_op_sigmoid", "x:node", "", "1 / (1 + exp(-x))."),
    ("tanh", "nncl_op_tanh", "x:node", "", "tanh(x)."),
    ("gelu", "nncl_op_gelu", "x:node", "", "x/2 (1 + erf(x/sqrt 2))."),
    ("gelu_tanh", "nncl_op_gelu_tanh", "x:node", "", "x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), PyTorch's GELU(approximate='tanh')."),
    ("silu", "nncl_op_silu", "x:node", "", "x sigmoid(x)."),
    ("elu", "nncl_op_elu", "x:node alpha:float=1.0", "", "x > 0 ? x : alpha (exp(x) - 1)."),
    ("softplus", "nncl_op_softplus", "x:node", "", "log(1 + exp(x)); x where x > 20."),
    ("softmax", "nncl_op_softmax", "x:node", "", "Softmax over the last dimension."),
    ("log_softmax", "nncl_op_log_softmax", "x:node", "", "Log softmax over the last dimension."),
    ("linear", "nncl_linear", "x:node out_features:int bias:bool=True act:act=None name:str=None", "", "act(x W^T + b) over the last dimension of x, W [out, in] as in PyTorch; creates NAME.weight and NAME.bias."),
    ("conv2d", "nncl_conv2d", "x:node out_channels:int kernel:int stride:int=1 padding:int=0 bias:bool=True act:act=None name:str=None", "", "NCHW convolution with a square kernel; creates NAME.weight [out, in, k, k] and NAME.bias."),
    ("maxpool2d", "nncl_maxpool2d", "x:node kernel:int stride:int=@kernel padding:int=0", "", "Max pooling (stride defaults to the kernel, as in PyTorch)."),
    ("avgpool2d", "nncl_avgpool2d", "x:node kernel:int stride:int=@kernel padding:int=0", "", "Average pooling, padding counted in the divisor (count_include_pad=True)."),
    ("global_avgpool", "nncl_global_avgpool", "x:node", "", "[B, C, H, W] -> [B, C]."),
    ("batchnorm", "nncl_batchnorm", "x:node momentum:float=0.1 eps:float=1e-5 name:str=None", "", "Batch normalisation per channel; creates NAME.weight, NAME.bias, NAME.running_mean, NAME.running_var."),
    ("batchnorm_act", "nncl_batchnorm_act", "x:node act:bnact='relu' momentum:float=0.1 eps:float=1e-5 name:str=None", "", "act(batchnorm(x)) in one node (act relu, relu6, hardswish or None), in fewer passes than the separate ops."),
    ("batchnorm_add_act", "nncl_batchnorm_add_act", "x:node residual:node act:bnact='relu' momentum:float=0.1 eps:float=1e-5 name:str=None", "", "act(batchnorm(x) + residual) in one node, residual of x's shape."),
    ("layernorm", "nncl_layernorm", "x:node eps:float=1e-5 name:str=None", "", "Layer normalisation over the last dimension, with NAME.weight and NAME.bias."),
    ("dropout", "nncl_dropout", "x:node p:float=0.5", "", "Zeroes elements with probability p in training (the rest scaled by 1/(1-p)); identity in evaluation."),
    ("embedding", "nncl_embedding", "indices:node num:int dim:int name:str=None", "", "Rows of NAME.weight [num, dim] picked by the whole-number indices."),
    ("reshape", "nncl_reshape", "x:node shape:shape", "", "New per-sample shape of the same element count."),
    ("flatten", "nncl_flatten", "x:node", "", "[B, ...] -> [B, prod(...)]."),
    ("concat", "nncl_concat", "a:node b:node axis:int=0", "", "Joins along a per-sample axis (0: the first after the batch)."),
    ("softmax_cross_entropy", "nncl_softmax_cross_entropy", "logits:node labels:node", "loss", "Mean cross-entropy of softmax(logits) against class-index labels."),
    ("bce_with_logits", "nncl_bce_with_logits", "logits:node targets:node", "loss", "Mean binary cross-entropy of sigmoid(logits) against targets."),
    ("mse", "nncl_mse", "pred:node target:node", "loss", "Mean squared error."),
    ("matmul", "nncl_matmul", "a:node b:node transpose_a:bool=False transpose_b:bool=False", "", "op(a) x op(b) batched over the leading dimensions: a [B, .., M, K], b [B, .., K, N] or an unbatched parameter [K, N] shared by every sample (weight tying); the flags transpose the last two axes."),
    ("transpose", "nncl_transpose", "x:node axis0:int axis1:int", "", "Swaps two per-sample axes (0: the first after the batch; negative: from the end)."),
    ("slice", "nncl_slice", "x:node axis:int start:int length:int", "", "x[..., start:start+length, ...] along one per-sample axis."),
    ("rmsnorm", "nncl_rmsnorm", "x:node eps:float=1e-5 name:str=None", "", "x / sqrt(mean(x^2) + eps) * weight over the last axis; creates NAME.weight (ones)."),
    ("layernorm_ex", "nncl_layernorm_ex", "x:node eps:float=1e-5 bias:bool=True name:str=None", "", "Layer norm over the last axis, with NAME.bias or (bias False, nanoGPT's LayerNorm(bias=False)) NAME.weight only."),
    ("causal_attention", "nncl_causal_attention", "q:node k:node v:node n_heads:int dropout:float=0.0", "", "Fused causal self-attention: q, k, v [B, T, C], C = n_heads * head_dim; per head softmax(q k^T / sqrt(head_dim) + causal mask) v, dropout on the weights in training; [B, T, C]."),
    ("sequence_cross_entropy", "nncl_sequence_cross_entropy", "logits:node labels:node ignore_index:int=-100", "loss", "Mean over the tokens whose label != ignore_index of -log softmax(logits)[label]: logits [B, T, V], labels [B, T]."),
    ("param_decay", "nncl_param_decay", "param:node decay:bool=True", "status", "Whether the optimizer's weight_decay applies to this parameter (default: all do); before any trainer."),
    ("checkpoint_mark", "nncl_checkpoint_mark", "node:node", "status", "Marks node as a gradient checkpoint boundary for trainers with checkpoint='marked'."),
    ("relu6", "nncl_op_relu6", "x:node", "", "min(max(x, 0), 6)."),
    ("hardswish", "nncl_op_hardswish", "x:node", "", "x relu6(x + 3) / 6."),
    ("hardsigmoid", "nncl_op_hardsigmoid", "x:node", "", "relu6(x + 3) / 6."),
    ("clamp", "nncl_op_clamp", "x:node min:float max:float", "", "min(max(x, min), max)."),
    ("upsample2d", "nncl_upsample2d", "x:node factor_h:int factor_w:int=@factor_h bilinear:bool=False", "", "PyTorch's Upsample(scale_factor=(factor_h, factor_w)) of [B, C, H, W]: nearest, or bilinear with align_corners=False."),
    ("groupnorm", "nncl_groupnorm", "x:node groups:int eps:float=1e-5 affine:bool=True name:str=None", "", "PyTorch's GroupNorm over [B, C, ...]: each group of C/groups channels normalised per sample, then * NAME.weight + NAME.bias when affine."),
    ("instancenorm", "nncl_instancenorm", "x:node eps:float=1e-5 affine:bool=False name:str=None", "", "PyTorch's InstanceNorm (no running statistics): groupnorm with one channel per group."),
    ("lstm", "nncl_lstm", "x:node hidden:int layers:int=1 name:str=None", "", "PyTorch's nn.LSTM(batch_first=True) over x [B, T, F], initial state zero: the last layer's hidden state of every step [B, T, hidden]; parameters NAME.weight_ih_l<l>, NAME.weight_hh_l<l>, NAME.bias_ih_l<l>, NAME.bias_hh_l<l>."),
    ("gru", "nncl_gru", "x:node hidden:int layers:int=1 name:str=None", "", "PyTorch's nn.GRU(batch_first=True) over x [B, T, F], initial state zero: [B, T, hidden], PyTorch's parameter names."),
    ("rnn_last", "nncl_rnn_last", "seq:node", "", "The last step of a sequence [B, T, H] as [B, H]."),
]

# keyword builders over an options struct: Python name, C function, its *_default, the struct's
# fields given as keywords (kernel=, stride=, padding=, dilation= set both the _h and _w fields)
_CONV = [
    ("conv2d_ex", "nncl_conv2d_ex", "nncl_conv2d_default", ("kernel", "stride", "padding", "dilation"),
     "PyTorch's Conv2d of any geometry over [B, C, H, W]: kernel, stride, padding, dilation (an int or an (h, w) "
     "pair), groups, bias, act; NAME.weight [out, C/groups, kh, kw], NAME.bias [out]."),
    ("conv1d", "nncl_conv1d", "nncl_conv1d_default", (),
     "PyTorch's Conv1d over [B, C, L]: kernel, stride, padding, dilation, groups, bias, act; "
     "NAME.weight [out, C/groups, kernel]."),
    ("conv_transpose2d", "nncl_conv_transpose2d", "nncl_conv_transpose2d_default",
     ("kernel", "stride", "padding", "output_padding"),
     "PyTorch's ConvTranspose2d (dilation 1) over [B, C, H, W]: kernel, stride, padding, output_padding (an int "
     "or an (h, w) pair), groups, bias, act; NAME.weight [C, out/groups, kh, kw], NAME.bias [out]."),
]

def _int(v, where):
    try:
        return [operator.index(v)]
    except TypeError:
        raise TypeError("%s must be an integer; got %r" % (where, v)) from None


_CONVERT = {
    "int": _int,
    "float": lambda v, where: [float(v)],
    "bool": lambda v, where: [int(bool(v))],
    "str": lambda v, where: [b(v)],
}
_CTYPE = {"node": ctypes.c_void_p, "int": ctypes.c_int, "float": ctypes.c_float, "bool": ctypes.c_int,
          "str": ctypes.c_char_p, "act": ctypes.c_int, "init": ctypes.c_int, "bnact": ctypes.c_int,
          "node?": ctypes.c_void_p}


def _parse(spec):
    """[(name, kind, default)] of a BUILDERS argument list; defaults are Python literals, else
    names (an init kind, "@arg")."""
    args = []
    for a in spec.split():
        name, _, rest = a.partition(":")
        kind, eq, default = rest.partition("=")
        if not eq:
            default = inspect.Parameter.empty
        else:
            try:
                default = ast.literal_eval(default)
            except (ValueError, SyntaxError):
                pass
        args.append((name, kind, default))
    return args


def _builder(pyname, cname, spec, flags, doc):
    args = _parse(spec)
    fn = getattr(lib, cname, None)
    if fn is not None:
        argtypes = [ctypes.c_void_p]
        for _, kind, _ in args:
            argtypes += [ctypes.c_int, ctypes.POINTER(ctypes.c_int)] if kind == "shape" else [_CTYPE[kind]]
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int if "status" in flags else ctypes.c_void_p
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for name, kind, default in args:
        d = None if isinstance(default, str) and default.startswith("@") else default
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d))
    sig = inspect.Signature(params)
    has_name = any(n == "name" and k == "str" for n, k, _ in args)

    def method(self, *a, **kw):
        if fn is None:
            raise UnsupportedError("%s: %s lacks %s (rebuild it from a newer nncl)" % (pyname, _lib.path, cname))
        bound = sig.bind(self, *a, **kw)
        bound.apply_defaults()
        values = bound.arguments
        c_args = [self._handle()]
        nodes = []
        for name, kind, default in args:
            v = values[name]
            if v is None and isinstance(default, str) and default.startswith("@"):
                v = values[default[1:]]
            if kind == "node":
                c_args.append(self._node_arg(v, pyname, name))
                nodes.append(v)
            elif kind == "node?":
                c_args.append(None if v is None else self._node_arg(v, pyname, name))
            elif kind == "bnact":
                if v not in BN_ACTS:
                    raise ValueError("%s: act must be one of None, 'relu', 'relu6', 'hardswish'; got %r" % (pyname, v))
                c_args.append(BN_ACTS[v])
            elif kind == "shape":
                c_args += list(shape_arg(v, pyname))
            elif kind == "act":
                if v not in ACTS:
                    raise ValueError("%s: act must be one of None, 'relu', 'sigmoid', 'tanh'; got %r" % (pyname, v))
                c_args.append(ACTS[v])
            elif kind == "init":
                if v not in INITS:
                    raise ValueError("%s: init must be one of %s; got %r" % (pyname, ", ".join(INITS), v))
                c_args.append(INITS[v])
            else:
                c_args += _CONVERT[kind](v, "%s: %s" % (pyname, name))
        r = fn(*c_args)
        if "status" in flags:
            check(r, self._ctx_h, cname)
            return None
        if not r:
            raise GraphError(self._message(), None, cname)
        node = Node(r, self, values.get("name") if has_name else None)
        if "loss" in flags:
            self._loss_inputs[node] = (nodes[0], nodes[1])
        elif "input" in flags:
            self._inputs.append(node)
        return node

    method.__name__ = pyname
    method.__qualname__ = "Graph." + pyname
    method.__signature__ = sig
    method.__doc__ = "%s\n\n(%s)" % (doc, cname)
    return method


class Node:
    """A node of a Graph: an input, a parameter or an op's output. Hashable, so that it keys the
    feeds of a step. shape is the per-sample shape for batched nodes (the batch left out), the
    full shape for parameters; size its element count."""
    __slots__ = ("_h", "graph", "name", "shape", "size")

    def __init__(self, h, graph, name=None):
        self._h = h
        self.graph = graph
        self.name = name
        dims = (ctypes.c_int * 8)()
        n = lib.nncl_node_shape(h, dims)
        self.shape = tuple(dims[:n])
        size = 1
        for d in self.shape:
            size *= d
        self.size = size

    def __hash__(self):
        return hash(self._h)

    def __eq__(self, other):
        return isinstance(other, Node) and other._h == self._h

    def __repr__(self):
        return "<nncl.Node %s%s>" % (self.name + " " if self.name else "", list(self.shape))

    # a + b, a - b, a * b (a number: scale), a @ b: the graph's builders
    def __add__(self, other):
        return self.graph.add(self, other)

    def __sub__(self, other):
        return self.graph.sub(self, other)

    def __mul__(self, other):
        if isinstance(other, (int, float)):
            return self.graph.scale(self, other)
        return self.graph.mul(self, other)

    __rmul__ = __mul__

    def __matmul__(self, other):
        return self.graph.matmul(self, other)


class Graph(Owned):
    """A model graph (nncl_graph) built once from inputs, parameters and ops, then compiled by a
    Trainer. ctx receives the builders' messages (it may be None); seed drives initialisation and
    dropout. Builders return Nodes and raise GraphError with the library's message (a wrong shape
    names the node and both shapes) when they refuse."""

    def __init__(self, ctx=None, seed=0, _borrowed=None):
        self.ctx = ctx
        self._ctx_h = ctx._handle() if ctx is not None else None
        self._loss_inputs, self._inputs = {}, []
        if _borrowed is not None:  # a model's own graph: freed with the model
            h, owner = _borrowed
            self._h, self._owner = h, owner
            return
        h = lib.nncl_graph_create(self._ctx_h, int(seed) & (2**64 - 1))
        if not h:
            raise GraphError(self._message(), None, "nncl_graph_create")
        self._own(h, lib.nncl_graph_free, ctx)

    def _message(self):
        return lib.nncl_last_error(self._ctx_h).decode("utf-8", "replace")

    def _node_arg(self, v, pyname, name):
        if not isinstance(v, Node):
            raise TypeError("%s: %s must be a Node of this graph; got %r" % (pyname, name, v))
        if v.graph is not self and v.graph._h != self._h:
            raise ValueError("%s: %s is a node of another graph" % (pyname, name))
        return v._h

    @classmethod
    def from_safetensors(cls, st, ctx=None):
        """The graph a model or checkpoint file describes (its nncl.graph metadata); st is a
        SafeTensors or a path. Parameters get their initial values until a trainer loads the file's."""
        from .safetensors import SafeTensors
        if not isinstance(st, SafeTensors):
            st = SafeTensors.load(st)
        h = ctypes.c_void_p()
        ch = ctx._handle() if ctx is not None else None
        check(lib.nncl_graph_from_safetensors(ch, st._handle(), ctypes.byref(h)), ch, "nncl_graph_from_safetensors")
        g = cls.__new__(cls)
        g.ctx, g._ctx_h, g._loss_inputs, g._inputs = ctx, ch, {}, []
        g._own(h.value, lib.nncl_graph_free, ctx)
        return g

    def find(self, name):
        """The node called name (a parameter or input; layers' names too), or None."""
        h = lib.nncl_graph_find(self._handle(), b(name))
        return Node(h, self, name) if h else None

    def __getitem__(self, name):
        n = self.find(name)
        if n is None:
            raise KeyError(name)
        return n

    def summary(self):
        """nncl_graph_summary as a string: every layer, its output shape and parameter count."""
        return summary_text(lib.nncl_graph_summary, self._handle(), self._ctx_h, "nncl_graph_summary")


def summary_text(fn, h, ctx_h, name):
    """What a summary function writes to a FILE *, as a str."""
    fd, path = tempfile.mkstemp(prefix="nncl-summary-")
    os.close(fd)
    try:
        f = libc.fopen(path.encode(), b"w")
        if not f:
            raise StateError("%s: cannot open a temporary file" % name)
        st = fn(h, f)
        libc.fclose(f)
        check(st, ctx_h, name)
        with open(path, encoding="utf-8", errors="replace") as t:
            return t.read()
    finally:
        os.unlink(path)


for _spec in BUILDERS:
    setattr(Graph, _spec[0], _builder(*_spec))


def _conv_builder(pyname, cname, default_name, pairs, doc):
    fn, default = getattr(lib, cname, None), getattr(lib, default_name, None)

    def method(self, x, out_channels, name=None, **options):
        if fn is None or default is None:
            raise UnsupportedError("%s: %s lacks %s (rebuild it from a newer nncl)" % (pyname, _lib.path, cname))
        opts = default()
        fields = {f for f, _ in type(opts)._fields_}
        for key, v in options.items():
            if key in pairs:
                hw = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
                if len(hw) != 2:
                    raise ValueError("%s: %s must be an int or an (h, w) pair; got %r" % (pyname, key, v))
                for f, e in zip((key + "_h", key + "_w"), hw):
                    setattr(opts, f, _int(e, "%s: %s" % (pyname, key))[0])
            elif key == "act":
                if v not in ACTS:
                    raise ValueError("%s: act must be one of None, 'relu', 'sigmoid', 'tanh'; got %r" % (pyname, v))
                opts.act = ACTS[v]
            elif key == "bias":
                opts.bias = int(bool(v))
            elif key in fields:
                setattr(opts, key, _int(v, "%s: %s" % (pyname, key))[0])
            else:
                raise TypeError("%s: unknown option %r" % (pyname, key))
        r = fn(self._handle(), self._node_arg(x, pyname, "x"), _int(out_channels, pyname + ": out_channels")[0],
               ctypes.byref(opts), b(name) if name is not None else None)
        if not r:
            raise GraphError(self._message(), None, cname)
        return Node(r, self, name)

    method.__name__ = pyname
    method.__qualname__ = "Graph." + pyname
    method.__doc__ = "%s\n\n(%s)" % (doc, cname)
    return method


for _spec in _CONV:
    setattr(Graph, _spec[0], _conv_builder(*_spec))
