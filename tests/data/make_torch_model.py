# make_torch_model.py - writes torch_mlp.safetensors: a small PyTorch model
# (Linear 6->8, tanh, Linear 8->3, as nncl_linear builds them) saved with
# safetensors.torch.save_file, plus a batch of inputs and the logits PyTorch
# computes for them ("check.input", "check.logits"). test_trainer_io loads
# the model into nncl and compares its logits. Run once; needs torch and
# safetensors.
import torch
from safetensors.torch import save_file

torch.manual_seed(7)
model = torch.nn.Sequential()
model.add_module("fc1", torch.nn.Linear(6, 8))
model.add_module("act", torch.nn.Tanh())
model.add_module("fc2", torch.nn.Linear(8, 3))
x = torch.randn(5, 6)
with torch.no_grad():
    logits = model(x)
tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
tensors["check.input"] = x
tensors["check.logits"] = logits
save_file(tensors, "torch_mlp.safetensors")
