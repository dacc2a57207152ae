"""Reference runs for tests/train_cli.sh: a tiny MLP exported to ONNX, its
inputs and targets as .npy, and PyTorch's own training of the same model
(the losses before each update, the params after the last one).

    train_cli_torch.py OUT_DIR CASE

CASE is one of the cases below; OUT_DIR receives model.onnx, x.npy,
target.npy, losses.txt (one loss per step) and want/NAME.npy for every
trained param (the frozen ones are left out).
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

# name: (loss, optimizer, optimizer kwargs beyond PyTorch's defaults, frozen params, steps)
CASES = {
    "ce_adamw": ("cross_entropy", "adamw", {"lr": 0.01}, [], 6),
    "mse_sgd": ("mse", "sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.001}, ["fc1.bias"], 6),
    "ce_adam": ("cross_entropy", "adam", {"lr": 0.02, "weight_decay": 0.01}, [], 5),
}


class MLP(torch.nn.Module):
    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, d_hidden)
        self.fc2 = torch.nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def make_optimizer(kind, params, kwargs):
    if kind == "sgd":
        return torch.optim.SGD(params, **kwargs)
    if kind == "adam":
        return torch.optim.Adam(params, **kwargs)
    return torch.optim.AdamW(params, **kwargs)


def main():
    out, case = sys.argv[1], sys.argv[2]
    loss_kind, opt_kind, kwargs, frozen, steps = CASES[case]
    torch.manual_seed(1234)
    n, d_in, d_hidden, d_out = 8, 5, 7, 4 if loss_kind == "cross_entropy" else 3
    model = MLP(d_in, d_hidden, d_out)
    x = torch.randn(n, d_in)
    if loss_kind == "cross_entropy":
        target = torch.randint(0, d_out, (n,))
    else:
        target = torch.randn(n, d_out)
    os.makedirs(os.path.join(out, "want"), exist_ok=True)
    torch.onnx.export(model, (x,), os.path.join(out, "model.onnx"), input_names=["x"],
                      output_names=["y"], opset_version=13, do_constant_folding=False)
    np.save(os.path.join(out, "x.npy"), x.numpy())
    np.save(os.path.join(out, "target.npy"), target.numpy())

    for name, p in model.named_parameters():
        p.requires_grad_(name not in frozen)
    trained = [p for name, p in model.named_parameters() if name not in frozen]
    opt = make_optimizer(opt_kind, trained, kwargs)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        y = model(x)
        loss = F.cross_entropy(y, target) if loss_kind == "cross_entropy" else F.mse_loss(y, target)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    with open(os.path.join(out, "losses.txt"), "w") as f:
        f.write("".join("%.9g\n" % v for v in losses))
    for name, p in model.named_parameters():
        if name not in frozen:
            np.save(os.path.join(out, "want", name + ".npy"), p.detach().numpy())


if __name__ == "__main__":
    main()
