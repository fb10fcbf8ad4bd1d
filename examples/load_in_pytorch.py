# load_in_pytorch.py - a model trained by nncl, used from PyTorch: loads
# fashion_mnist_mlp.safetensors (written by examples/fashion_mnist_mlp) into
# the same network built with torch.nn, strictly (every name and shape must
# match), prints the architecture, preprocessing and classes the file's
# metadata describes, and measures its accuracy on the Fashion-MNIST test
# images.
#   python3 examples/load_in_pytorch.py [MODEL] [DATA_DIR]
# Needs torch and numpy only (Debian 12: apt-get install python3-torch): the
# file is read here in a few lines rather than with the safetensors package.
import gzip
import json
import sys

import numpy as np
import torch

path = sys.argv[1] if len(sys.argv) > 1 else "build/fashion_mnist_mlp.safetensors"
data = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"


DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def load_safetensors(name):
    """The tensors (F32, or F16/BF16 with --save-dtype) and the __metadata__ of a file."""
    with open(name, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        blob = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for key, t in header.items():
        if t["dtype"] not in DTYPES:
            raise SystemExit(f"{name}: {key} is {t['dtype']}, this reader takes F32, F16 and BF16")
        a, b = t["data_offsets"]
        raw = bytearray(blob[a:b])  # little-endian, as on every machine torch runs on here
        tensors[key] = torch.frombuffer(raw, dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).clone()
    return tensors, meta


state, meta = load_safetensors(path)
print("architecture (nncl.graph):")
print("  " + meta.get("nncl.graph", "(none)").replace("\n", "\n  "))
print("input x * %s + %s; classes %s" % (meta.get("nncl.scale", "1"), meta.get("nncl.shift", "0"),
                                          json.loads(meta.get("nncl.classes", "[]"))))

model = torch.nn.Sequential()
model.add_module("fc1", torch.nn.Linear(784, 128))
model.add_module("relu", torch.nn.ReLU())
model.add_module("fc2", torch.nn.Linear(128, 10))
model.load_state_dict(state, strict=True)


def idx(name, skip):
    with gzip.open(f"{data}/{name}") as f:
        return np.frombuffer(f.read(), np.uint8)[skip:]


x = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) * np.float32(meta.get("nncl.scale", 1 / 255))
y = idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
with torch.no_grad():
    accuracy = (model(torch.from_numpy(x)).argmax(1).numpy() == y).mean()
print(f"{path}: test accuracy {accuracy:.4f} in PyTorch")
