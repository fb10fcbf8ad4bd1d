# load_in_pytorch.py - a model trained by nncl, used from PyTorch: loads
# fashion_mnist_mlp.safetensors (written by examples/fashion_mnist_mlp) into
# the same network built with torch.nn, strictly (every name and shape must
# match), and measures its accuracy on the Fashion-MNIST test images.
#   python3 examples/load_in_pytorch.py [MODEL] [DATA_DIR]
# Needs torch and safetensors (pip install torch safetensors).
import gzip
import sys

import numpy as np
import torch
from safetensors.torch import load_file

path = sys.argv[1] if len(sys.argv) > 1 else "build/fashion_mnist_mlp.safetensors"
data = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"

model = torch.nn.Sequential()
model.add_module("fc1", torch.nn.Linear(784, 128))
model.add_module("relu", torch.nn.ReLU())
model.add_module("fc2", torch.nn.Linear(128, 10))
model.load_state_dict(load_file(path), strict=True)


def idx(name, skip):
    with gzip.open(f"{data}/{name}") as f:
        return np.frombuffer(f.read(), np.uint8)[skip:]


x = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255
y = idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
with torch.no_grad():
    accuracy = (model(torch.from_numpy(x)).argmax(1).numpy() == y).mean()
print(f"{path}: test accuracy {accuracy:.4f} in PyTorch")
