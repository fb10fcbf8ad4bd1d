# make_torch_rnn.py - writes torch_rnn.safetensors and torch_rnn_state.safetensors
# for tests/test_rnn.c: PyTorch's nn.LSTM and nn.GRU (batch_first, 2 layers)
# on a batch of 7 steps, in float64 from float32 values. Per KIND (lstm, gru):
#     KIND.x [B, T, F], KIND.t [B, T, H]     the batch and the target
#     KIND.param.NAME                        p [T, F] (added to every sample's
#                                            x) and the state dict as rnn.NAME
#     KIND.out0 [B, T, H]                    rnn(x): the state dict alone
#     KIND.out [B, T, H], KIND.last [B, H]   rnn(x + p), every step and the last
#     KIND.loss                              mse(rnn(x + p), t)
#     KIND.grad.NAME                         that loss's gradient of each
#                                            parameter (p's: the input
#                                            gradient summed over the batch)
# torch_rnn_state.safetensors holds the two modules' state dicts as
# torch.save would name them in a model with members lstm and gru.
# Run once (needs torch): python3 make_torch_rnn.py
import json
import struct

import torch

torch.manual_seed(11)
B, T, F, H, L = 3, 7, 5, 6, 2
tensors, state = {}, {}


def put(d, name, t):
    d[name] = t.detach().to(torch.float32).contiguous()


def case(kind, cls):
    rnn = cls(F, H, num_layers=L, batch_first=True)
    for v in rnn.parameters():  # wider than PyTorch's U(-1/sqrt(H), ..) so the gates leave their linear range
        torch.nn.init.uniform_(v, -0.7, 0.7)
    x = torch.randn(B, T, F)
    t = torch.randn(B, T, H) * 0.5
    p = torch.randn(T, F) * 0.3
    put(tensors, kind + ".x", x)
    put(tensors, kind + ".t", t)
    put(tensors, kind + ".param.p", p)
    for k, v in rnn.state_dict().items():
        put(tensors, kind + ".param.rnn." + k, v)
        put(state, kind + "." + k, v)
    rnn = rnn.double()
    pd = p.double().requires_grad_(True)
    with torch.no_grad():
        put(tensors, kind + ".out0", rnn(x.double())[0])
    out = rnn(x.double() + pd)[0]
    loss = torch.mean((out - t.double()) ** 2)
    loss.backward()
    put(tensors, kind + ".out", out)
    put(tensors, kind + ".last", out[:, -1, :])
    put(tensors, kind + ".loss", loss.reshape(1))
    put(tensors, kind + ".grad.p", pd.grad)
    for k, v in rnn.named_parameters():
        put(tensors, kind + ".grad.rnn." + k, v.grad)


case("lstm", torch.nn.LSTM)
case("gru", torch.nn.GRU)


def write(path, d):
    """safetensors by hand (F32, little-endian): no dependency beyond torch"""
    header, blobs, off = {}, [], 0
    for k in sorted(d):
        b = d[k].numpy().astype("<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(d[k].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"torch": torch.__version__}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    print(path, len(d), "tensors,", off, "bytes of data")


write("torch_rnn.safetensors", tensors)
write("torch_rnn_state.safetensors", state)
