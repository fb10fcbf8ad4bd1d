#!/usr/bin/env python3
"""pytorch_compare.py - the same training steps as nncl's bench in PyTorch on
the host CPU: the Fashion-MNIST MLP (784-128-10) and the bench's CNN (conv
1->16 3x3 pad 1 + ReLU + maxpool 2, conv 16->32 3x3 pad 1 + ReLU + maxpool 2,
dense 1568->128 + ReLU, dense 128->10), Adam lr 1e-3, batch 100, synthetic
data of the same shapes, with the thread count set (torch.set_num_threads).
It prints samples/s (median of repeats, with min-max), then nncl's figures
and nncl's ratio to PyTorch: from --bench-json FILE (written by
`bench --json FILE`), or by running the bench itself
(build/bench/bench --only training; --bench-quick for its quick mode).

When PyTorch is not installed it says so and exits 0.

  python3 bench/pytorch_compare.py [--threads N] [--repeats N] [--seconds S]
          [--bench-json FILE | --bench PATH] [--bench-quick] [--devices SEL]
          [--no-bench] [--json FILE]
"""
import argparse
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
    p.add_argument("--json", help="write the comparison as JSON to this file")
    return p.parse_args()


def models(torch):
    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    cnn = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    return {"mlp": (mlp, (1, 784)), "cnn": (cnn, (1, 1, 28, 28))}


def measure(torch, model, sample_shape, args):
    """samples/s of training steps: warm-up, then repeats of a calibrated
    number of steps; returns (median, min, max, steps per repeat)."""
    gen = torch.Generator().manual_seed(1)
    n_batches = 10
    shape = (n_batches * BATCH,) + sample_shape[1:]
    x = torch.rand(shape, generator=gen)
    y = torch.randint(0, 10, (n_batches * BATCH,), generator=gen)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    state = {"k": 0}

    def step():
        b = state["k"] % n_batches
        state["k"] += 1
        xb = x[b * BATCH:(b + 1) * BATCH]
        yb = y[b * BATCH:(b + 1) * BATCH]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for _ in range(10):
        step()
    t0 = time.perf_counter()
    for _ in range(5):
        step()
    one = (time.perf_counter() - t0) / 5
    steps = max(3, int(args.seconds / max(one, 1e-6)) + 1)
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(steps * BATCH / (time.perf_counter() - t0))
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
        cmd = [args.bench, "--only", "training", "--json", tmp]
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
    for row in j.get("training", []):
        s = row.get("samples_s")
        if isinstance(s, dict) and s.get("median") is not None:
            figs[(row["item"], row["device"])] = s["median"]
    for row in j.get("devices", []):
        if "name" in row:
            names[row["device"]] = row["name"]
    return figs, names


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as e:
        print("PyTorch is not installed (%s): nothing to compare; pip install torch to enable." % e)
        return 0
    torch.set_num_threads(args.threads)
    print("PyTorch %s on the CPU, %d threads (torch.get_num_threads() = %d), batch %d, Adam lr 1e-3, "
          "synthetic data" % (torch.__version__, args.threads, torch.get_num_threads(), BATCH))
    torch.manual_seed(0)
    result = {"torch_version": torch.__version__, "threads": args.threads, "batch": BATCH, "torch": {},
              "nncl": {}, "ratio": {}}
    for name, (model, shape) in models(torch).items():
        med, lo, hi, steps = measure(torch, model, shape, args)
        result["torch"][name] = {"median": med, "min": lo, "max": hi, "steps_per_repeat": steps}
        print("  torch %-3s %9.0f samples/s  (min %.0f, max %.0f; %d repeats of %d steps)"
              % (name, med, lo, hi, args.repeats, steps), flush=True)
    if args.no_bench:
        return write(args, result)
    figs, names = nncl_figures(args)
    if figs is None:
        return write(args, result)
    print("nncl / PyTorch (same model, batch and optimizer):")
    for (model, dev), rate in sorted(figs.items(), key=lambda kv: (kv[0][0] != "mlp", kv[0][1] is None,
                                                                     kv[0][1] or 0)):
        t = result["torch"].get(model)
        if not t:
            continue
        label = "all devices" if dev is None else "d%d %s" % (dev, names.get(dev, ""))
        ratio = rate / t["median"]
        key = "%s %s" % (model, "all" if dev is None else "d%d" % dev)
        result["nncl"][key] = rate
        result["ratio"][key] = ratio
        print("  %-3s %-44s %9.0f samples/s  %6.3fx PyTorch" % (model, label[:44], rate, ratio))
    return write(args, result)


def write(args, result):
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
