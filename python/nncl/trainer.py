"""Training: the trainer (compiled plans on the chosen devices, the optimizer), its step,
predict, evaluate and fit, and parameter and model files."""
import ctypes
import math
import os
import signal
import tempfile
import threading
from dataclasses import dataclass

import numpy as np

from . import _lib
from ._core import Owned, b, f32, floats, out_array, ptr
from ._errors import InvalidArgumentError, check
from .data import Dataset
from .graph import Node, summary_text
from .progress import Curve, Progress

lib = _lib.lib
OPTIMIZERS = {"sgd": 0, "adam": 1, "adamw": 2, "rmsprop": 3}
SCHEDULES = {"constant": 0, "step": 1, "cosine": 2, "warmup_cosine": 3}
PRECISIONS = {"fp32": 0, "fp16": 1, "bf16": 2}
CHECKPOINTS = {"none": 0, "auto": 1, "marked": 2}
ARRANGEMENTS = {1: "one", 2: "data", 3: "pipeline"}
PIPE_SCHEDULES = {"1f1b": 0, "gpipe": 1}
OPTIM_FIELDS = [n for n, _ in _lib.OptimConfig._fields_ if n not in ("kind", "schedule")]


def _choice(table, v, what):
    if isinstance(v, str) and v.lower() in table:
        return table[v.lower()]
    raise ValueError("%s must be one of %s; got %r" % (what, ", ".join(table), v))


def optim_config(optimizer="adam", **fields):
    """An nncl_optim_config: PyTorch's defaults for the optimizer ("sgd", "adam", "adamw",
    "rmsprop"), then the fields given (lr, momentum, nesterov, dampening, weight_decay, beta1,
    beta2 or betas=(beta1, beta2), eps, alpha, schedule ("constant", "step", "cosine",
    "warmup_cosine": nanoGPT's get_lr),
    step_size, gamma, total_steps, min_lr, warmup_steps, clip_norm)."""
    o = lib.nncl_optim_default(_choice(OPTIMIZERS, optimizer, "optimizer"))
    if "betas" in fields:
        fields["beta1"], fields["beta2"] = fields.pop("betas")
    for k, v in fields.items():
        if v is None:
            continue
        if k == "schedule":
            o.schedule = _choice(SCHEDULES, v, "schedule")
        elif k in OPTIM_FIELDS:
            setattr(o, k, v)
        else:
            raise TypeError("unknown optimizer option %r (the options: %s, schedule, betas)" % (k, ", ".join(OPTIM_FIELDS)))
    return o


def learning_rate(step, optimizer="adam", **fields):
    """nncl_optim_lr: the learning rate the schedule gives at step (0-based)."""
    o = optim_config(optimizer, **fields)
    return lib.nncl_optim_lr(ctypes.byref(o), int(step))


@dataclass(frozen=True)
class StepInfo:
    """What the last step did (nncl_step_info)."""
    loss: float
    skipped: bool
    n_devices: int
    failed_device: int
    exchange_seconds: float
    seconds: float
    loss_scale: float
    overflow: bool
    arrangement: str  # "one" device, "data" parallel or "pipeline"
    arrangement_why: str


@dataclass(frozen=True)
class BatchFit:
    """What max_batch_fit found (nncl_batch_fit)."""
    batch: int
    device: int
    need_bytes: int
    have_bytes: int
    segments: int
    activation_bytes: int = 0


@dataclass(frozen=True)
class StageInfo:
    """One stage of a pipelined trainer (nncl_stage_info)."""
    device: int
    first: str
    last: str
    params: int
    busy_seconds: float
    idle_seconds: float
    transfer_seconds: float
    held_micro_batches: int = 0  # micro-batches held at its output cut (0: the last stage)
    held_bytes: int = 0
    arenas: int = 1  # activation arenas: one per micro-batch held where memory allows
    recomputed: int = 0  # forwards run again in the last step (micro-batches without an arena of their own)


def train_config(max_batch=None, optimizer="adam", precision="fp32", devices=None, shares=None, rebalance_every=None,
                 overlap=False, loss_scaling=0, loss_scale_init=0.0, loss_scale_growth_interval=0, checkpoint="none",
                 pipeline=0, micro_batches=0, cuts=None, pipe_schedule="1f1b", arrangement="auto", **optim):
    """An nncl_train_config from Trainer's options, and the ctypes arrays it points to (to keep)."""
    cfg = lib.nncl_train_default()
    if max_batch is not None:
        cfg.max_batch = int(max_batch)
    cfg.optim = optim_config(optimizer, **optim)
    cfg.precision = _choice(PRECISIONS, precision, "precision")
    keep = []
    if devices is not None:
        devs = (ctypes.c_int * max(1, len(devices)))(*[int(d) for d in devices])
        cfg.devices, cfg.n_devices = devs, len(devices)
        keep.append(devs)
    if shares is not None:
        sh = (ctypes.c_float * max(1, len(shares)))(*[float(s) for s in shares])
        cfg.shares = sh
        keep.append(sh)
    if rebalance_every is not None:
        cfg.rebalance_every = int(rebalance_every)
    cfg.overlap = int(bool(overlap))
    cfg.loss_scaling = int(loss_scaling)
    cfg.loss_scale_init = float(loss_scale_init)
    cfg.loss_scale_growth_interval = int(loss_scale_growth_interval)
    cfg.checkpoint = _choice(CHECKPOINTS, checkpoint, "checkpoint")
    cfg.pipeline = int(pipeline)
    cfg.micro_batches = int(micro_batches)
    cfg.pipe_schedule = _choice(PIPE_SCHEDULES, pipe_schedule, "pipe_schedule")
    arr_codes = {"auto": 0}
    arr_codes.update({v: k for k, v in ARRANGEMENTS.items()})
    cfg.arrangement = _choice(arr_codes, arrangement, "arrangement")
    if cuts is not None:
        names = [b(c.name if isinstance(c, Node) else c) for c in cuts]
        arr = (ctypes.c_char_p * max(1, len(names)))(*names)
        cfg.cuts = arr
        keep += [arr, names]
    return cfg, keep


def max_batch_fit(graph, loss, limit=0, **options):
    """nncl_train_max_batch: the largest global batch (1 .. limit; 0: 65536) a Trainer(graph, loss,
    **options) could take within every device's memory, planned on the host (nothing allocated)."""
    if graph.ctx is None:
        raise InvalidArgumentError("max_batch_fit: the graph was made without a context (Graph(ctx, seed))")
    if not isinstance(loss, Node) or loss.graph is not graph:
        raise TypeError("max_batch_fit: loss must be a Node of the graph; got %r" % (loss,))
    for k in ("x", "labels", "logits"):
        options.pop(k, None)
    cfg, keep = train_config(**options)
    r = _lib.BatchFitC()
    ctx = graph.ctx
    check(lib.nncl_train_max_batch(ctx._handle(), graph._handle(), loss._h, ctypes.byref(cfg), int(limit),
                                   ctypes.byref(r)), ctx._h, "nncl_train_max_batch")
    return BatchFit(r.batch, r.device, r.need_bytes, r.have_bytes, r.segments, r.activation_bytes)


@dataclass
class FitResult:
    """What fit did (nncl_fit_result), and the curve: one CurveRow per epoch in history."""
    epochs_done: int
    best_epoch: int
    best_val_loss: float
    stopped_early: bool
    interrupted: bool
    restored_best: bool
    resumed_epoch: int
    resumed_step: int
    train_samples: int
    val_samples: int
    history: list


class Trainer(Owned):
    """A graph compiled for the context's devices with an optimizer (nncl_trainer).

    loss: the scalar loss node. optimizer: "sgd", "adam", "adamw" or "rmsprop", with PyTorch's
    defaults for every option not given (lr, momentum, weight_decay, betas, eps, schedule, ...;
    see optim_config). max_batch: the largest global batch a step gets (default the library's).
    precision: "fp32", "fp16" or "bf16" storage. devices: context device indices (None: all);
    shares, rebalance_every, overlap, loss_scaling, loss_scale_init, loss_scale_growth_interval,
    pipeline (1: pipeline stages, -1: data parallel where the model fits, else stages),
    micro_batches, cuts (node names ending the stages): nncl_train_config's fields; checkpoint:
    gradient checkpointing, "none", "auto" or "marked" (Graph.checkpoint_mark). x, labels, logits: the nodes evaluate() and fit() use; by default
    the loss's own inputs (for a loss built by Graph.softmax_cross_entropy, bce_with_logits or
    mse) and the graph's other input.

    The trainer keeps its graph and context alive and is freed before them."""

    def __init__(self, graph, loss, optimizer="adam", max_batch=None, precision="fp32", devices=None,
                 shares=None, rebalance_every=None, overlap=False, loss_scaling=0, loss_scale_init=0.0,
                 loss_scale_growth_interval=0, checkpoint="none", pipeline=0, micro_batches=0, cuts=None, x=None,
                 labels=None, logits=None, **optim):
        if graph.ctx is None:
            raise InvalidArgumentError("Trainer: the graph was made without a context (Graph(ctx, seed))")
        if not isinstance(loss, Node) or loss.graph is not graph:
            raise TypeError("Trainer: loss must be a Node of the graph; got %r" % (loss,))
        cfg, keep = train_config(max_batch, optimizer, precision, devices, shares, rebalance_every, overlap,
                                 loss_scaling, loss_scale_init, loss_scale_growth_interval, checkpoint, pipeline,
                                 micro_batches, cuts, **optim)
        ctx = graph.ctx
        h = ctypes.c_void_p()
        check(lib.nncl_trainer_create(ctx._handle(), graph._handle(), loss._h, ctypes.byref(cfg), ctypes.byref(h)),
              ctx._h, "nncl_trainer_create")
        self._own(h.value, lib.nncl_trainer_free, graph, ctx)
        self._init(graph, loss, cfg.max_batch)
        lo, la = graph._loss_inputs.get(loss, (None, None))
        self.logits = logits if logits is not None else lo
        self.labels = labels if labels is not None else la
        self.x = x

    @classmethod
    def _borrow(cls, h, graph, owner, max_batch):
        """The trainer inside a Model (freed with it)."""
        t = cls.__new__(cls)
        t._h, t._owner = h, owner
        t._init(graph, None, max_batch)
        t.x = t.labels = t.logits = None
        return t

    def _init(self, graph, loss, max_batch):
        self.graph, self.ctx, self.loss = graph, graph.ctx, loss
        self.max_batch = max_batch
        self._ctx_h = graph.ctx._h
        self._info = _lib.StepInfoC()
        self._step = lib.nncl_trainer_step

    # -------------------------------------------------------------- feeds

    def _resolve(self, node):
        if isinstance(node, Node):
            return node
        n = self.graph.find(node)
        if n is None:
            raise KeyError("no node %r in the graph" % (node,))
        return n

    def _feed(self, feeds, what):
        """The feeds array for C, the batch, and the arrays it points into (to keep alive). Made
        per call: threads may step one trainer at once (the library takes them in turns)."""
        n = len(feeds)
        arr = (_lib.Feed * n)()
        batch = -1
        keep = []
        i = 0
        for node, data in feeds.items():
            if type(node) is not Node:
                node = self._resolve(node)
            a = data if (type(data) is np.ndarray and data.dtype is f32 and data.flags.c_contiguous
                         and data.flags.aligned) else floats(data, "%s: the feed of %s" % (what, node))
            shape = a.shape
            if shape[1:] != node.shape or not shape:
                raise ValueError("%s: the feed of %s must have shape (batch, %s); got %s" % (
                    what, node, ", ".join(str(d) for d in node.shape), shape))
            if batch != shape[0]:
                if batch >= 0:
                    raise ValueError("%s: feeds of different batch sizes (%d and %d, the latter for %s)"
                                     % (what, batch, shape[0], node))
                batch = shape[0]
            f = arr[i]
            f.node = node._h
            f.data = a.ctypes.data
            keep.append(a)
            i += 1
        return arr, n, batch, keep

    def step(self, feeds):
        """One optimisation step on a batch: feeds maps each input Node (or its name) to an array
        of shape (batch, *node.shape). float32 C-contiguous arrays are used without a copy; other
        real dtypes and strides are converted by a copy; a wrong shape raises ValueError. Returns
        the batch's mean loss (last_step holds the rest of nncl_step_info)."""
        arr, n, batch, keep = self._feed(feeds, "step")
        info = _lib.StepInfoC()
        st = self._step(self._h or self._handle(), arr, n, batch, ctypes.byref(info))
        if st:
            check(st, self._ctx_h, "nncl_trainer_step")
        self._info = info
        return info.loss

    @property
    def last_step(self):
        i = self._info
        return StepInfo(i.loss, bool(i.skipped), i.n_devices, i.failed_device, i.exchange_seconds, i.seconds,
                        i.loss_scale, bool(i.overflow), ARRANGEMENTS.get(i.arrangement, ""),
                        i.arrangement_why.decode("utf-8", "replace"))

    def predict(self, feeds, output=None, out=None):
        """Evaluation-mode forward: the values of node output (default: the logits) for the batch,
        a new float32 array (batch, *output.shape), or written into out (checked, not converted).
        Feeds as step takes them."""
        output = self._resolve(output if output is not None else self._default("logits"))
        arr, n, batch, keep = self._feed(feeds, "predict")
        out = out_array(out, (batch,) + output.shape, "predict")
        check(lib.nncl_trainer_predict(self._handle(), arr, n, batch, output._h, ptr(out)), self._ctx_h,
              "nncl_trainer_predict")
        return out

    def _default(self, which):
        v = getattr(self, which)
        if v is None and which == "x":
            inputs = [n for n in self.graph._inputs if n != self.labels]
            if len(inputs) == 1:
                v = self.x = inputs[0]
        if v is None:
            raise InvalidArgumentError("Trainer: which node is %s? Name it: Trainer(..., %s=node)" % (which, which))
        return v

    def _fit_config(self, batch):
        cfg = lib.nncl_fit_default()
        cfg.x, cfg.labels, cfg.logits = self._default("x")._h, self._default("labels")._h, self._default("logits")._h
        cfg.batch = int(batch or self.max_batch)
        return cfg

    def evaluate(self, data, labels=None, batch=None):
        """(mean loss, accuracy) in evaluation mode over a Dataset, or over arrays data [n, ...]
        and labels [n] (converted as step's feeds are), in batches of at most batch (default
        max_batch). Accuracy counts argmax(logits) == label."""
        loss, acc = ctypes.c_float(), ctypes.c_float()
        if isinstance(data, Dataset):
            cfg = self._fit_config(batch)
            check(lib.nncl_trainer_evaluate_dataset(self._handle(), ctypes.byref(cfg), data._handle(),
                                                    ctypes.byref(loss), ctypes.byref(acc)), self._ctx_h,
                  "nncl_trainer_evaluate_dataset")
            return loss.value, acc.value
        x, y = self._default("x"), self._default("labels")
        xs = floats(data, "evaluate data")
        ys = floats(labels, "evaluate labels")
        n = xs.shape[0] if xs.ndim else 0
        if xs.shape[1:] != x.shape or ys.shape != (n,) + y.shape:
            raise ValueError("evaluate: data must have shape (n, %s) and labels (n, %s); got %s and %s" % (
                ", ".join(map(str, x.shape)), ", ".join(map(str, y.shape)), xs.shape, ys.shape))
        check(lib.nncl_trainer_evaluate(self._handle(), x._h, y._h, self._default("logits")._h, ptr(xs), ptr(ys), n,
                                        ctypes.byref(loss), ctypes.byref(acc)), self._ctx_h, "nncl_trainer_evaluate")
        return loss.value, acc.value

    def fit(self, data, labels=None, epochs=10, batch=None, seed=1, val=None, val_fraction=0.0, patience=0,
            keep_best=False, checkpoint=None, checkpoint_every=0, resume=None, progress=True, on_step=None,
            augment=None):
        """nncl_trainer_fit: trains for epochs over a Dataset (or arrays data, labels), shuffled
        each epoch, batches gathered ahead by a background thread. val: a Dataset validating each
        epoch, or val_fraction of the training set set apart for it; patience, keep_best,
        checkpoint, checkpoint_every, resume: as nncl_fit_config says. progress: True for a bar on
        a terminal (else lines) on sys.stderr, a Progress, a stream, or False. on_step(epoch,
        step, loss) is called after every step; a true return stops training. Ctrl-C stops it at
        the end of the step and raises KeyboardInterrupt. batch defaults to max_batch; epochs and
        seed default to nncl_fit_default's. augment: nncl.augment(...) for the training batches.
        Returns a FitResult."""
        if not isinstance(data, Dataset):
            data = Dataset.from_numpy(data, labels)
        cfg = self._fit_config(batch)
        cfg.epochs, cfg.seed = int(epochs), int(seed) & (2**64 - 1)
        if val is not None and not isinstance(val, Dataset):
            val = Dataset.from_numpy(*val)
        cfg.val = val._handle() if val is not None else None
        cfg.val_fraction, cfg.patience, cfg.keep_best = float(val_fraction), int(patience), int(bool(keep_best))
        cfg.checkpoint = b(os.fspath(checkpoint)) if checkpoint is not None else None
        cfg.checkpoint_every = int(checkpoint_every)
        cfg.resume = b(os.fspath(resume)) if resume is not None else None
        if augment is not None:
            cfg.augment = augment
        own_progress = None
        if progress is True or (progress and not isinstance(progress, Progress)):
            n_train = len(data) - (round(val_fraction * len(data)) if val is None else 0)
            own_progress = Progress(epochs, math.ceil(n_train / cfg.batch), None if progress is True else progress)
            progress = own_progress
        cfg.progress = progress._handle() if progress else None
        curve = Curve()
        cfg.curve = curve._handle()
        result = _lib.FitResultC()
        cfg.result = ctypes.pointer(result)
        raised = []

        def _on_step(user, epoch, step, loss):
            if raised:
                return 1
            try:
                return 1 if on_step is not None and on_step(epoch, step, loss) else 0
            except BaseException as e:  # stop, then raise it here
                raised.append(e)
                return 1
        cb = _lib.ON_STEP_FN(_on_step)
        cfg.on_step = cb
        # Ctrl-C: Python would raise KeyboardInterrupt on entering the callback, where C cannot
        # take it; a handler of our own notes it and the callback stops the run
        sigint = None
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            sigint = signal.signal(signal.SIGINT, lambda signum, frame: raised.append(KeyboardInterrupt()))
        try:
            check(lib.nncl_trainer_fit(self._handle(), data._handle(), ctypes.byref(cfg)), self._ctx_h,
                  "nncl_trainer_fit")
        finally:
            if sigint is not None:
                signal.signal(signal.SIGINT, sigint)
            if own_progress is not None:
                own_progress.close()
        if raised:
            raise raised[0]
        r = result
        return FitResult(r.epochs_done, r.best_epoch, r.best_val_loss, bool(r.stopped_early), bool(r.interrupted),
                         bool(r.restored_best), r.resumed_epoch, r.resumed_step, r.train_samples, r.val_samples,
                         curve.rows)

    # -------------------------------------------------------------- state

    def shards(self):
        """The current shard size of each device (for a global batch of max_batch)."""
        sizes = (ctypes.c_int * 64)()
        n = lib.nncl_trainer_shards(self._handle(), sizes, 64)
        return list(sizes[:min(n, 64)])

    def stages(self):
        """The stages of a pipelined trainer in pipeline order ([] when not pipelined)."""
        n = lib.nncl_trainer_stages(self._handle(), None, 0)
        arr = (_lib.StageInfoC * max(1, n))()
        n = min(n, lib.nncl_trainer_stages(self._h, arr, n))
        return [StageInfo(c.device, c.first.decode("utf-8", "replace"), c.last.decode("utf-8", "replace"), c.params,
                          c.busy_seconds, c.idle_seconds, c.transfer_seconds, c.held_micro_batches, c.held_bytes,
                          c.arenas, c.recomputed)
                for c in arr[:n]]

    def stage_device(self, name):
        """The context device whose pipeline stage holds op node name; -1 when not pipelined or no such node."""
        return lib.nncl_trainer_stage_device(self._handle(), b(name.name if isinstance(name, Node) else name))

    @property
    def step_count(self):
        return lib.nncl_trainer_step_count(self._handle())

    def param(self, name, out=None):
        """A parameter (or running statistic) by name, as a new array of its shape (or into out)."""
        node = self.graph.find(name)
        if node is None and name.endswith((".running_mean", ".running_var")):  # not nodes: batchnorm's own
            node = self.graph.find(name.rsplit(".", 1)[0] + ".weight")
        if node is None:
            raise KeyError("no parameter %r in the graph" % (name,))
        out = out_array(out, node.shape, "param")
        check(lib.nncl_trainer_param_get(self._handle(), b(name), ptr(out), out.size), self._ctx_h,
              "nncl_trainer_param_get")
        return out

    def set_param(self, name, values):
        """Replaces a parameter (or running statistic) by name; values converted as floats() says,
        of the parameter's element count."""
        a = floats(values, "set_param %r" % name)
        check(lib.nncl_trainer_param_set(self._handle(), b(name), ptr(a), a.size), self._ctx_h,
              "nncl_trainer_param_set")

    def state_dict(self):
        """Every parameter and running statistic under PyTorch's names, as saved (a dict of arrays)."""
        from .safetensors import SafeTensors
        fd, path = tempfile.mkstemp(prefix="nncl-state-", suffix=".safetensors")
        os.close(fd)
        try:
            self.save(path)
            return SafeTensors.load(path).to_dict()
        finally:
            os.unlink(path)

    def _file(self, fn, name, path):
        check(fn(self._handle(), b(os.fspath(path))), self._ctx_h, name)

    def save(self, path):
        """Parameters and running statistics as safetensors, under PyTorch's names."""
        self._file(lib.nncl_trainer_save, "nncl_trainer_save", path)

    def load(self, path):
        self._file(lib.nncl_trainer_load, "nncl_trainer_load", path)

    def save_checkpoint(self, path):
        """save() plus the optimizer state and step count, for an exact resume."""
        self._file(lib.nncl_trainer_save_checkpoint, "nncl_trainer_save_checkpoint", path)

    def load_checkpoint(self, path):
        self._file(lib.nncl_trainer_load_checkpoint, "nncl_trainer_load_checkpoint", path)

    def save_model(self, path, input=None, output=None, scale=1.0, shift=0.0, mean=None, std=None,
                   class_names=None, label_name=None, dtype="fp32"):
        """A model file Model.load (and nncl_model_load from C) can classify with alone: save()
        plus the graph, the input and output nodes (default: the graph's first input and the
        loss's first input), preprocessing x * scale + shift then (x - mean) / std per feature,
        class names, the label column's name, and the weights' dtype ("fp32", "fp16", "bf16")."""
        meta = lib.nncl_model_meta_default()
        meta.input = self._resolve(input)._h if input is not None else None
        meta.output = self._resolve(output)._h if output is not None else None
        meta.scale, meta.shift = float(scale), float(shift)
        keep = []
        if mean is not None or std is not None:
            m, s = floats(mean, "save_model mean"), floats(std, "save_model std")
            x = self._resolve(input) if input is not None else self._default("x")
            if m.size != x.size or s.size != x.size:
                raise ValueError("save_model: mean and std need %d values each; got %d and %d" % (x.size, m.size, s.size))
            keep += [m, s]
            meta.mean = ctypes.cast(ptr(m), ctypes.POINTER(ctypes.c_float))
            meta.std = ctypes.cast(ptr(s), ctypes.POINTER(ctypes.c_float))
        if class_names is not None:
            names = (ctypes.c_char_p * max(1, len(class_names)))(*[b(c) for c in class_names])
            keep.append(names)
            meta.class_names, meta.n_classes = names, len(class_names)
        meta.label_name = b(label_name)
        meta.dtype = _choice(PRECISIONS, dtype, "dtype")
        check(lib.nncl_trainer_save_model(self._handle(), b(os.fspath(path)), ctypes.byref(meta)), self._ctx_h,
              "nncl_trainer_save_model")

    def summary(self):
        """nncl_trainer_summary as a string: layers, shapes, parameter counts, each device's plan memory."""
        return summary_text(lib.nncl_trainer_summary, self._handle(), self._ctx_h, "nncl_trainer_summary")

    def __repr__(self):
        return "<nncl.Trainer step %d>" % self.step_count if self._h else "<nncl.Trainer closed>"
