#!/usr/bin/env python3
"""pytorch_compare.py - the same training steps as nncl's bench in PyTorch on
the host CPU: the Fashion-MNIST MLP (784-128-10) and the bench's CNN (conv
1->16 3x3 pad 1 + ReLU + maxpool 2, conv 16->32 3x3 pad 1 + ReLU + maxpool 2,
dense 1568->128 + ReLU, dense 128->10) and the bench's LSTM (nn.LSTM 28->128
over 28 steps of 28 pixels, batch first, dense 128->10 on the last step), Adam
lr 1e-3, batch 100, synthetic data of the same shapes; the CIFAR-shaped VGG-
and ResNet-style networks (bench/train.c: 3x32x32, batch 64, Adam lr 1e-3,
synthetic data); examples/fashion_mnist_mobilenet's depthwise-separable CNN
(conv 3x3 1->16, then depthwise 3x3 and pointwise 1x1 blocks 16->32 stride 2,
32->64 stride 2, 64->128, each convolution without bias followed by batch
norm and ReLU6, global average pool, dense 128->10; Adam lr 1e-3, batch 100,
1x28x28); and the bench's GPTs
(examples/char_gpt's model in nanoGPT's form, examples/char_gpt_pytorch.py:
tied head, no biases, attention written out or F.scaled_dot_product_attention
where torch has it; AdamW lr 1e-3, betas 0.9/0.99, weight decay 0.1 on 2-D
weights, clipping at 1; gpt: 4 layers, 4 heads, 128, context 64, batch 12;
gpt_large: 6, 6, 384, 256, batch 64) on windows of random tokens, eager; all
with the thread count set (torch.set_num_threads). A GPT's sample is one
window: samples/s times the context is tokens/s.
It prints samples/s (median of repeats, with min-max), then nncl's figures
and nncl's ratio to PyTorch: from --bench-json FILE (written by
`bench --json FILE`), or by running the bench itself
(build/bench/bench --only training; --bench-quick for its quick mode).

With --gemm it compares matrix products instead: torch.mm (transposes as
views, so BLAS gets the flags) on the bench's GEMM shapes, squares of
--sizes and the MLP and CNN shapes, against the bench's gemm section
(nncl_gemm with the chosen kernel, raw CLBlast, each own kernel).

--rounds N alternates the two sides N times (PyTorch, then the bench, and
again), so that both see the same machine load; each ratio is reported as
the median of the per-round ratios with their range. With --gemm the ratio
is finer still: nncl_gemm runs in this process too (build/libnncl.so through
ctypes, --lib), and each shape's repeats alternate torch.mm and nncl_gemm
in pairs (torch.mm first, then nncl_gemm first, ...), so that a machine
whose speed drifts within seconds (a shared VM) slows both sides of a pair
alike; the bench run of each round then gives CLBlast's and each own
kernel's figure. --tinygrad adds a third
side to each round: the MLP trained by tinygrad on its OpenCL device
(bench/tinygrad_compare.py, run with the same Python). --torch-device cuda
runs PyTorch's side on the GPU instead (TF32 off, the data on the GPU, the
timers read after torch.cuda.synchronize()), to set beside nncl on the same
GPU through its OpenCL driver.

When PyTorch is not installed it says so and exits 0.

  python3 bench/pytorch_compare.py [--threads N] [--repeats N] [--seconds S] [--models LIST]
          [--bench-json FILE | --bench PATH] [--bench-quick] [--devices SEL]
          [--no-bench] [--json FILE] [--gemm] [--sizes LIST] [--rounds N] [--tinygrad]
          [--torch-device cpu|cuda] [--lib PATH]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# OpenBLAS picks its kernels from this variable; a value set for another
# machine would slow PyTorch (or NumPy) down and skew the comparison.
os.environ.pop("OPENBLAS_CORETYPE", None)

BATCH = 100
CIFAR_BATCH = 64
MODELS = ("mlp", "cnn", "lstm", "vgg", "resnet", "mobilenet", "gpt", "gpt_large")
# the bench's GPTs (bench/train_gpt.c): layers, heads, channels, context, batch
GPT_SHAPES = {"gpt": (4, 4, 128, 64, 12), "gpt_large": (6, 6, 384, 256, 64)}
GPT_VOCAB = 65


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="torch.set_num_threads (default: all %d CPUs)" % (os.cpu_count() or 1))
    p.add_argument("--repeats", type=int, default=5, help="timed repeats (median reported)")
    p.add_argument("--seconds", type=float, default=1.0, help="least duration of one repeat")
    p.add_argument("--bench-json", help="nncl's figures from this bench --json file")
    p.add_argument("--bench", default=os.path.join(here, "..", "build", "bench", "bench"),
                   help="the bench program to run when no --bench-json is given")
    p.add_argument("--bench-quick", action="store_true", help="run the bench with --quick")
    p.add_argument("--devices", default=None, help="--devices for the bench (default: its own)")
    p.add_argument("--no-bench", action="store_true", help="PyTorch figures only")
    p.add_argument("--models", help="models to train, comma-separated: mlp, cnn, lstm, vgg, resnet, mobilenet, gpt, "
                   "gpt_large (default all; with --bench-quick all but vgg, resnet, mobilenet and gpt_large, as the "
                   "quick bench)")
    p.add_argument("--json", help="write the comparison as JSON to this file")
    p.add_argument("--gemm", action="store_true", help="compare torch.mm with the bench's gemm section")
    p.add_argument("--sizes", default="256,512,1024,2048", help="square GEMM sizes for --gemm")
    p.add_argument("--rounds", type=int, default=1, help="alternate PyTorch and the bench this many times")
    p.add_argument("--torch-device", default="cpu",
                   help="PyTorch's device: cpu, or cuda (TF32 off, data on the GPU, synchronised timing)")
    p.add_argument("--lib", default=os.path.join(here, "..", "build", "libnncl.so"),
                   help="with --gemm: the nncl library whose nncl_gemm is timed beside torch.mm in this process")
    p.add_argument("--tinygrad", action="store_true",
                   help="with --rounds: also tinygrad's MLP on its OpenCL device in each round")
    a = p.parse_args()
    if a.rounds > 1 and a.bench_json:
        p.error("--rounds runs the bench each round: leave out --bench-json")
    if not a.models:
        a.models = "mlp,cnn,lstm,gpt" if a.bench_quick else ",".join(MODELS)
    unknown = set(a.models.split(",")) - set(MODELS)
    if unknown:
        p.error("--models: unknown %s (%s)" % (",".join(sorted(unknown)), ", ".join(MODELS)))
    return a


# The bench's GEMM shapes besides the squares (bench/gemm.c): m, n, k, ta, tb.
GEMM_MODEL = [(100, 128, 784, 0, 1), (100, 784, 128, 0, 0), (128, 784, 100, 1, 0), (100, 10, 128, 0, 1),
              (100, 128, 10, 0, 0), (10, 128, 100, 1, 0), (32, 19600, 144, 0, 0), (100, 128, 1568, 0, 1)]


def gemm_item(m, n, k, ta, tb):
    return "%dx%dx%d %s%s" % (m, n, k, "T" if ta else "N", "T" if tb else "N")


def gemm_shapes(args):
    sq = [int(x) for x in args.sizes.split(",") if x.strip()]
    return [(s, s, s, 0, 0) for s in sq] + GEMM_MODEL


def mm_operands(torch, shape, args):
    """A and B as stored (host), op(A) and op(B) as torch.mm takes them
    (transposes as views, so BLAS gets the flags) and C, on --torch-device"""
    m, n, k, ta, tb = shape
    gen = torch.Generator().manual_seed(2)
    a = torch.rand((k, m) if ta else (m, k), generator=gen) - 0.5
    b = torch.rand((n, k) if tb else (k, n), generator=gen) - 0.5
    a_d, b_d = a.to(args.torch_device), b.to(args.torch_device)
    return a, b, (a_d.t() if ta else a_d), (b_d.t() if tb else b_d), torch.empty(m, n, device=args.torch_device)


def measure_mm(torch, shape, args):
    """GFLOP/s of torch.mm on one shape: (median, min, max)."""
    m, n, k = shape[:3]
    a, b, out = mm_operands(torch, shape, args)[2:]
    for _ in range(3):
        torch.mm(a, b, out=out)
    sync(torch, args)
    t0 = time.perf_counter()
    torch.mm(a, b, out=out)
    sync(torch, args)
    one = time.perf_counter() - t0
    calls = max(3, int(args.seconds / 5 / max(one, 1e-7)) + 1)
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.mm(a, b, out=out)
        sync(torch, args)
        rates.append(2.0 * m * n * k * calls / (time.perf_counter() - t0) * 1e-9)
    return statistics.median(rates), min(rates), max(rates)


class Nncl:
    """nncl_gemm through the shared library, on the devices --devices
    selects (as the bench's), for products timed beside torch.mm."""

    def __init__(self, path, devices):
        if devices:
            os.environ["NNCL_DEVICES"] = devices
        lib = ctypes.CDLL(path)
        vp, ci = ctypes.c_void_p, ctypes.c_int
        lib.nncl_init.argtypes = [vp, ctypes.POINTER(vp)]
        lib.nncl_last_error.argtypes = [vp]
        lib.nncl_last_error.restype = ctypes.c_char_p
        lib.nncl_device_count.argtypes = [vp]
        lib.nncl_tensor_create.argtypes = [vp, ci, ci, ctypes.POINTER(ci), ctypes.POINTER(vp)]
        lib.nncl_tensor_write.argtypes = [vp, vp, ctypes.c_size_t]
        lib.nncl_tensor_free.argtypes = [vp]
        lib.nncl_gemm.argtypes = [vp, ci, ci, ctypes.c_float, vp, vp, ctypes.c_float, vp]
        lib.nncl_finish.argtypes = [vp, ci]
        lib.nncl_free.argtypes = [vp]
        self.lib, self.ctx = lib, vp()
        self.check(lib.nncl_init(None, ctypes.byref(self.ctx)), "nncl_init")
        self.devices = lib.nncl_device_count(self.ctx)

    def check(self, status, what):
        if status != 0:
            raise RuntimeError("%s: %s" % (what, self.lib.nncl_last_error(self.ctx).decode(errors="replace")))

    def tensor(self, dev, t):
        """a device copy of the float32 torch tensor t (2-D)"""
        h, shape = ctypes.c_void_p(), (ctypes.c_int * 2)(*t.shape)
        self.check(self.lib.nncl_tensor_create(self.ctx, dev, 2, shape, ctypes.byref(h)), "nncl_tensor_create")
        t = t.contiguous()
        self.check(self.lib.nncl_tensor_write(h, t.data_ptr(), t.numel()), "nncl_tensor_write")
        return h

    def close(self):
        self.lib.nncl_free(self.ctx)


def paired_mm(torch, nn, dev, shape, args):
    """torch.mm and nncl_gemm on one shape, repeats alternating (3x
    --repeats pairs, each side first in turn): GFLOP/s of each (medians)
    and the per-pair ratios nncl/torch."""
    m, n, k, ta, tb = shape
    a, b, a_d, b_d, out = mm_operands(torch, shape, args)
    ha, hb, hc = nn.tensor(dev, a), nn.tensor(dev, b), nn.tensor(dev, torch.zeros(m, n))

    def run_torch(calls):
        for _ in range(calls):
            torch.mm(a_d, b_d, out=out)
        sync(torch, args)

    def run_nncl(calls):
        for _ in range(calls):
            nn.check(nn.lib.nncl_gemm(nn.ctx, ta, tb, 1.0, ha, hb, 0.0, hc), "nncl_gemm")
        nn.check(nn.lib.nncl_finish(nn.ctx, dev), "nncl_finish")

    try:
        one = 0.0
        for f in (run_torch, run_nncl):
            f(3)  # warm-up: nncl's first call per shape chooses its kernel (or reads the stored choice)
            t0 = time.perf_counter()
            f(3)
            one = max(one, (time.perf_counter() - t0) / 3)
        calls = max(3, int(args.seconds / 5 / max(one, 1e-7)) + 1)
        gflop = 2.0 * m * n * k * calls * 1e-9
        rt, rn, ratio = [], [], []
        for r in range(3 * args.repeats):
            took = {}
            for f in ((run_torch, run_nncl) if r % 2 == 0 else (run_nncl, run_torch)):
                t0 = time.perf_counter()
                f(calls)
                took[f] = time.perf_counter() - t0
            rt.append(gflop / took[run_torch])
            rn.append(gflop / took[run_nncl])
            ratio.append(took[run_torch] / took[run_nncl])
    finally:
        for h in (ha, hb, hc):
            nn.lib.nncl_tensor_free(h)
    return statistics.median(rt), statistics.median(rn), ratio


def sync(torch, args):
    """waits for the GPU's queued work, so that a timer reads finished work"""
    if args.torch_device != "cpu":
        torch.cuda.synchronize()


class Spec:
    """One model as the bench trains it: the module, its batch, data of
    n_batches batches, the loss, the optimizer, clipping, tokens per sample
    (0 for the classifiers)."""

    def __init__(self, model, batch, x, y, loss, opt, clip=0.0, tokens=0):
        self.model, self.batch, self.x, self.y, self.loss = model, batch, x, y, loss
        self.opt, self.clip, self.tokens = opt, clip, tokens


def gpt_spec(torch, name, gen, n_batches):
    """A bench GPT in nanoGPT's form, with nanoGPT's AdamW."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "examples"))
    import char_gpt_pytorch as cg  # the module examples/char_gpt's file loads into
    c = cg.Config()
    c.n_layer, c.n_head, c.n_embd, c.block_size, batch = GPT_SHAPES[name]
    c.vocab_size = GPT_VOCAB
    model = cg.GPT(c)
    params = [p for p in model.parameters() if p.requires_grad]  # the tied weight once
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))
    tokens = torch.randint(0, GPT_VOCAB, (n_batches * batch, c.block_size + 1), generator=gen)

    def loss(m, xb, yb):
        logits = m(xb)
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), yb.reshape(-1))

    return Spec(model, batch, tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous(), loss, opt, 1.0, c.block_size)


def cifar_model(torch, name):
    """bench/train.c's VGG- or ResNet-style network."""
    nn = torch.nn
    if name == "vgg":
        return nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(128 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10))

    def conv_bn(cin, cout, stride, relu=True):
        layers = [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*(layers + [nn.ReLU()] if relu else layers))

    class Block(nn.Module):
        """relu(x + bn(conv(relu(bn(conv x))))), as train_res_block"""

        def __init__(self, ch):
            super().__init__()
            self.body = nn.Sequential(conv_bn(ch, ch, 1), conv_bn(ch, ch, 1, relu=False))

        def forward(self, x):
            return torch.relu(self.body(x) + x)

    return nn.Sequential(conv_bn(3, 32, 1), Block(32), conv_bn(32, 64, 2), Block(64), conv_bn(64, 128, 2), Block(128),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


def mobilenet_model(torch):
    """bench/train.c's train_build_mobilenet (examples/fashion_mnist_mobilenet.c)."""
    nn = torch.nn

    def conv_bn6(cin, cout, k, stride, groups):
        return [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU6()]

    layers = conv_bn6(1, 16, 3, 1, 1)
    for cin, cout, stride in ((16, 32, 2), (32, 64, 2), (64, 128, 1)):
        layers += conv_bn6(cin, cin, 3, stride, cin) + conv_bn6(cin, cout, 1, 1, 1)
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


def models(torch, names, n_batches=10):
    """{name: Spec} of the models named (the bench's data shapes)."""
    nn = torch.nn

    class SeqLSTM(nn.Module):
        """each image as 28 steps of 28 pixels, one LSTM layer of 128, dense 10 on the last step"""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(28, 128, batch_first=True)
            self.fc = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc(self.lstm(x)[0][:, -1])

    gen = torch.Generator().manual_seed(1)
    ce = torch.nn.CrossEntropyLoss()
    specs = {}
    for name in names:
        if name in GPT_SHAPES:
            specs[name] = gpt_spec(torch, name, gen, n_batches)
            continue
        batch = BATCH
        if name == "mlp":
            model, shape = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)), (784,)
        elif name == "lstm":
            model, shape = SeqLSTM(), (28, 28)
        elif name == "mobilenet":
            model, shape = mobilenet_model(torch), (1, 28, 28)
        elif name == "cnn":
            model, shape = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)), (1, 28, 28)
        else:
            model, shape, batch = cifar_model(torch, name), (3, 32, 32), CIFAR_BATCH
        x = torch.rand((n_batches * batch,) + shape, generator=gen)
        y = torch.randint(0, 10, (n_batches * batch,), generator=gen)
        specs[name] = Spec(model, batch, x, y, lambda m, xb, yb: ce(m(xb), yb),
                           torch.optim.Adam(model.parameters(), lr=1e-3))
    return specs


def measure(torch, spec, args):
    """samples/s of training steps: warm-up, then repeats of a calibrated
    number of steps; returns (median, min, max, steps per repeat)."""
    model, B = spec.model, spec.batch
    model.to(args.torch_device)
    x, y = spec.x.to(args.torch_device), spec.y.to(args.torch_device)
    n_batches = x.shape[0] // B
    # the optimizer holds the parameters themselves: moved in place by .to()
    opt = spec.opt
    model.train()
    state = {"k": 0}

    def step():
        b = state["k"] % n_batches
        state["k"] += 1
        opt.zero_grad(set_to_none=True)
        loss = spec.loss(model, x[b * B:(b + 1) * B], y[b * B:(b + 1) * B])
        loss.backward()
        if spec.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip)
        opt.step()
        return loss

    for _ in range(10 if not spec.tokens else 3):
        step()
    sync(torch, args)
    t0 = time.perf_counter()
    for _ in range(5 if not spec.tokens else 2):
        step()
    sync(torch, args)
    one = (time.perf_counter() - t0) / (5 if not spec.tokens else 2)
    steps = max(3, int(args.seconds / max(one, 1e-6)) + 1)
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync(torch, args)
        rates.append(steps * B / (time.perf_counter() - t0))
    return statistics.median(rates), min(rates), max(rates), steps


def nncl_figures(args):
    """{(model, device or None): samples/s} and device names from the bench."""
    path = args.bench_json
    tmp = None
    if not path:
        if not os.access(args.bench, os.X_OK):
            print("nncl: %s not found (make bench), or pass --bench-json FILE" % args.bench)
            return None, None
        fd, tmp = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        cmd = [args.bench, "--only", "gemm" if args.gemm else "training", "--json", tmp]
        if not args.gemm:
            cmd += ["--models", args.models]
        if args.gemm:
            cmd += ["--sizes", args.sizes, "--repeats", str(args.repeats)]
        if args.bench_quick:
            cmd.append("--quick")
        if args.devices:
            cmd += ["--devices", args.devices]
        print("running: " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            print("nncl: the bench failed (status %d)" % r.returncode)
            os.unlink(tmp)
            return None, None
        path = tmp
    with open(path) as f:
        j = json.load(f)
    if tmp:
        os.unlink(tmp)
    figs, names = {}, {}
    if args.gemm:
        # {(item, device): {"nncl": GFLOP/s, "clblast": ..., "<own kernel>": ..., "chosen": name}}
        for row in j.get("gemm", []):
            if row.get("device") is None:
                continue
            f = {}
            for key, v in row.items():
                if not isinstance(v, dict) or v.get("median") is None:
                    continue
                note = v.get("note", "")
                if key == "nncl_gflops":
                    f["nncl"] = v["median"]
                    f["chosen"] = note.split(": ")[-1].split(" ")[0] if ": " in note else "?"
                elif key == "raw_gflops":
                    f["clblast"] = v["median"]
                elif key.startswith("own") and key.endswith("_gflops"):
                    f[note.split("own kernel ")[-1].split(",")[0]] = v["median"]
            if "nncl" in f:
                figs[(row["item"], row["device"])] = f
        for row in j.get("devices", []):
            if "name" in row:
                names[row["device"]] = row["name"]
        return figs, names
    for row in j.get("training", []):
        s = row.get("samples_s")
        if isinstance(s, dict) and s.get("median") is not None:
            figs[(row["item"], row["device"])] = s["median"]
    for row in j.get("devices", []):
        if "name" in row:
            names[row["device"]] = row["name"]
    return figs, names


def spread(values):
    """median and range of a list, as text and as a dict."""
    med = statistics.median(values)
    return {"median": med, "min": min(values), "max": max(values), "rounds": len(values)}


def quartiles(values):
    """median, middle half and range of a list, as a dict"""
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"median": q[1], "q1": q[0], "q3": q[2], "min": min(values), "max": max(values), "pairs": len(values)}


def gemm_main(args, torch, result):
    """Per round: torch.mm beside nncl_gemm in this process (or, without
    the library, torch.mm alone), then the bench's gemm section."""
    shapes = gemm_shapes(args)
    rounds = {"torch": {}, "nncl": {}, "bench": {}, "ratio": {}}
    nn = None
    try:
        nn = Nncl(args.lib, args.devices)
    except (OSError, RuntimeError) as e:
        print("nncl_gemm is not timed in this process (%s): ratios against the bench's figures instead" % e)
    for r in range(args.rounds):
        print("round %d/%d: torch.mm%s" % (r + 1, args.rounds, " and nncl_gemm alternating" if nn else ""), flush=True)
        for sh in shapes:
            item = gemm_item(*sh)
            if not nn:
                rounds["torch"].setdefault(item, []).append(measure_mm(torch, sh, args)[0])
                continue
            for dev in range(nn.devices):
                key = "%s d%d" % (item, dev)
                t, g, ratio = paired_mm(torch, nn, dev, sh, args)
                rounds["torch"].setdefault(item, []).append(t)
                rounds["nncl"].setdefault(key, []).append(g)
                rounds["ratio"].setdefault(key, []).extend(ratio)
        if args.no_bench:
            continue
        figs, names = nncl_figures(args)
        if figs is None:
            break
        for (item, dev), f in figs.items():
            t = rounds["torch"].get(item)
            if not t:
                continue
            key = "%s d%d" % (item, dev)
            d = rounds["bench"].setdefault(key, {})
            for k, v in f.items():
                d.setdefault(k, []).append(v)
            if not nn:
                rounds["nncl"].setdefault(key, []).append(f["nncl"])
                rounds["ratio"].setdefault(key, []).append(f["nncl"] / t[-1])
    if nn:
        nn.close()
    print("GFLOP/s, medians over rounds; nncl/torch: %s" % (
        "the median of the ratios of alternating pairs of repeats (middle half of them; all)" if nn else
        "the median of the per-round ratios (range)"))
    for sh in shapes:
        item = gemm_item(*sh)
        result["torch"][item] = spread(rounds["torch"][item])
    print("%-18s %-4s %8s %8s %8s %8s  %-16s %-26s %s" % ("shape", "dev", "torch.mm", "nncl", "bench", "CLBlast",
                                                         "chosen", "nncl/torch", "own kernels (bench)"))
    for sh in shapes:
        item = gemm_item(*sh)
        for key in sorted(k for k in rounds["ratio"] if k.startswith(item + " d")):
            d = rounds["bench"].get(key, {})
            ratio = quartiles(rounds["ratio"][key]) if nn else spread(rounds["ratio"][key])
            nums = {k: statistics.median(v) for k, v in d.items() if k != "chosen"}
            chosen = max(set(d["chosen"]), key=d["chosen"].count) if "chosen" in d else "-"
            nncl = statistics.median(rounds["nncl"][key])
            result["nncl"][key] = dict(nums, nncl=nncl, chosen=chosen, bench=nums.get("nncl"))
            result["ratio"][key] = ratio
            spread_text = ("(%.2f-%.2f; %.2f-%.2f)" % (ratio["q1"], ratio["q3"], ratio["min"], ratio["max"]) if nn
                           else "(%.2f-%.2f)" % (ratio["min"], ratio["max"]))
            own = "  ".join("%s %.1f" % (k, v) for k, v in nums.items() if k not in ("nncl", "clblast"))
            print("%-18s %-4s %8.1f %8.1f %8.1f %8.1f  %-16s %5.2fx %-20s %s"
                  % (item, key.split(" ")[-1], result["torch"][item]["median"], nncl, nums.get("nncl", float("nan")),
                     nums.get("clblast", float("nan")), chosen, ratio["median"], spread_text, own))
    result["paired"] = nn is not None
    return write(args, result)


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as e:
        print("PyTorch is not installed (%s): nothing to compare; pip install torch to enable." % e)
        return 0
    torch.set_num_threads(args.threads)
    where = "the CPU"
    if args.torch_device != "cpu":
        if not torch.cuda.is_available():
            print("PyTorch %s sees no CUDA device: nothing to compare on %s" % (torch.__version__, args.torch_device))
            return 0
        # fp32 products as fp32, as nncl computes them (TF32 would round the inputs to 10-bit mantissas)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        where = "%s (%s, TF32 off)" % (args.torch_device, torch.cuda.get_device_name())
    print("PyTorch %s on %s, %d threads (torch.get_num_threads() = %d); MLP, CNN, LSTM, MobileNet: batch %d, "
          "VGG, ResNet: "
          "batch %d, Adam lr 1e-3; GPTs: AdamW, clipping; synthetic data" % (torch.__version__, where, args.threads,
                                                                            torch.get_num_threads(), BATCH, CIFAR_BATCH))
    torch.manual_seed(0)
    result = {"torch_version": torch.__version__, "torch_device": where, "threads": args.threads, "batch": BATCH, "torch": {},
              "nncl": {}, "ratio": {}, "rounds": args.rounds}
    if args.gemm:
        return gemm_main(args, torch, result)
    if args.rounds > 1:
        return rounds_main(args, torch, result)
    for name, spec in models(torch, args.models.split(",")).items():
        med, lo, hi, steps = measure(torch, spec, args)
        result["torch"][name] = {"median": med, "min": lo, "max": hi, "steps_per_repeat": steps}
        if spec.tokens:
            result["torch"][name]["tokens_s"] = med * spec.tokens
        print("  torch %-9s %9.0f samples/s  (min %.0f, max %.0f; %d repeats of %d steps)%s"
              % (name, med, lo, hi, args.repeats, steps,
                 "  %.0f tokens/s" % (med * spec.tokens) if spec.tokens else ""), flush=True)
    if args.no_bench:
        return write(args, result)
    figs, names = nncl_figures(args)
    if figs is None:
        return write(args, result)
    print("nncl / PyTorch (same model, batch and optimizer):")
    for (model, dev), rate in sorted(figs.items(), key=lambda kv: (MODELS.index(kv[0][0]) if kv[0][0] in MODELS else 9,
                                                                     kv[0][1] is None, kv[0][1] or 0)):
        t = result["torch"].get(model)
        if not t:
            continue
        label = "all devices" if dev is None else "d%d %s" % (dev, names.get(dev, ""))
        ratio = rate / t["median"]
        key = "%s %s" % (model, "all" if dev is None else "d%d" % dev)
        result["nncl"][key] = rate
        result["ratio"][key] = ratio
        print("  %-9s %-44s %9.0f samples/s  %6.3fx PyTorch" % (model, label[:44], rate, ratio))
    return write(args, result)


def tinygrad_mlp(args):
    """tinygrad's MLP samples/s from bench/tinygrad_compare.py, or None."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tinygrad_compare.py")
    out = subprocess.run([sys.executable, script, "--json", "--repeats", str(args.repeats),
                          "--seconds", str(args.seconds)], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)["mlp"]
    print("  tinygrad: no figure (%s)" % (out.stdout.strip() or out.stderr.strip()[-200:]))
    return None


def rounds_main(args, torch, result):
    """Training in alternating rounds: per round PyTorch's samples/s, then
    the bench's (then tinygrad's MLP); ratios per round, median and range
    over rounds."""
    per = {"torch": {}, "nncl": {}, "ratio": {}, "tinygrad": [], "vs_tinygrad": {}}
    for r in range(args.rounds):
        print("round %d/%d: PyTorch" % (r + 1, args.rounds), flush=True)
        for name, spec in models(torch, args.models.split(",")).items():
            per["torch"].setdefault(name, []).append(measure(torch, spec, args)[0])
        figs, names = nncl_figures(args)
        if figs is None:
            break
        for (model, dev), rate in figs.items():
            if model not in per["torch"]:
                continue
            key = "%s %s" % (model, "all" if dev is None else "d%d" % dev)
            per["nncl"].setdefault(key, []).append(rate)
            per["ratio"].setdefault(key, []).append(rate / per["torch"][model][-1])
        if args.tinygrad:
            print("round %d/%d: tinygrad" % (r + 1, args.rounds), flush=True)
            tg = tinygrad_mlp(args)
            if tg:
                per["tinygrad"].append(tg)
                for (model, dev), rate in figs.items():
                    if model == "mlp":
                        key = "mlp %s" % ("all" if dev is None else "d%d" % dev)
                        per["vs_tinygrad"].setdefault(key, []).append(rate / tg)
    for name, v in per["torch"].items():
        result["torch"][name] = spread(v)
        print("  torch %-9s %9.0f samples/s (rounds: %s)" % (name, statistics.median(v),
                                                            ", ".join("%.0f" % x for x in v)))
    for key in sorted(per["ratio"]):
        result["nncl"][key] = spread(per["nncl"][key])
        result["ratio"][key] = spread(per["ratio"][key])
        print("  nncl  %-14s %9.0f samples/s  %6.3fx PyTorch (range %.3f-%.3f over %d rounds)"
              % (key, result["nncl"][key]["median"], result["ratio"][key]["median"], result["ratio"][key]["min"],
                 result["ratio"][key]["max"], len(per["ratio"][key])))
    if per["tinygrad"]:
        result["tinygrad"] = {"mlp": spread(per["tinygrad"])}
        result["vs_tinygrad"] = {}
        print("  tinygrad mlp %9.0f samples/s (rounds: %s)" % (statistics.median(per["tinygrad"]),
                                                           ", ".join("%.0f" % x for x in per["tinygrad"])))
        for key in sorted(per["vs_tinygrad"]):
            r = result["vs_tinygrad"][key] = spread(per["vs_tinygrad"][key])
            print("  nncl  %-10s %6.3fx tinygrad (range %.3f-%.3f over %d rounds)"
                  % (key, r["median"], r["min"], r["max"], r["rounds"]))
    return write(args, result)


def write(args, result):
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
