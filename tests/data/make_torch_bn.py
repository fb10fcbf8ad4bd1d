# make_torch_bn.py - writes torch_bn.safetensors: a small PyTorch CNN with
# batch norm (Conv2d 1->4 k3 p1, BatchNorm2d, ReLU, Flatten, Linear 144->3,
# as nncl_conv2d, nncl_batchnorm and nncl_linear build them), trained a few
# steps so that its running statistics moved and num_batches_tracked is 5,
# saved with safetensors.torch.save_file (num_batches_tracked as I64), plus a
# batch of inputs and the logits PyTorch computes in evaluation mode
# ("check.input", "check.logits"). test_trainer_io loads it into nncl and
# compares. Run once; needs torch and safetensors.
import torch
from safetensors.torch import save_file

torch.manual_seed(11)
model = torch.nn.Sequential()
model.add_module("conv1", torch.nn.Conv2d(1, 4, 3, padding=1))
model.add_module("bn1", torch.nn.BatchNorm2d(4))
model.add_module("act", torch.nn.ReLU())
model.add_module("flat", torch.nn.Flatten())
model.add_module("fc", torch.nn.Linear(144, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model.train()
for _ in range(5):
    x = torch.randn(8, 1, 6, 6) * 2 + 0.5
    y = torch.randint(0, 3, (8,))
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
model.eval()
x = torch.randn(5, 1, 6, 6)
with torch.no_grad():
    logits = model(x)
tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
assert tensors["bn1.num_batches_tracked"].dtype == torch.int64
tensors["check.input"] = x
tensors["check.logits"] = logits
save_file(tensors, "torch_bn.safetensors")
