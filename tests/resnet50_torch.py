#!/usr/bin/env python3
"""bench/train_resnet50.c's training step against PyTorch, both in f64.

The bench builds ResNet-50 (BatchNorm on batch statistics, cross-entropy,
SGD momentum 0.9 weight decay 1e-4) with --dtype f64 on the CPU and dumps
its initial params, its batch, every step's loss and the last step's
gradients (--dump). PyTorch's ResNet-50 (bench/train_torch.py's copy of
torchvision's, the same param names and order) starts from the same params
and trains on the same batch. Two steps, so the second step's gradients
also check the first update (momentum buffer, weight decay). In f64 the
two agree to rounding: a wrong statistic (unbiased variance, per-image
mean), a wrong gradient rule or update shows as a difference many orders
above the bounds. B4 32x32 keeps the CPU reference's f64 run short.

  tests/resnet50_torch.py TRAIN_RESNET50_BINARY
Exits 77 (skipped) without torch / numpy.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:
    print("skipped: no torch / numpy")
    sys.exit(77)

BATCH, IMAGE, STEPS, LR = 4, 32, 2, 0.1
LOSS_TOL, GRAD_TOL = 1e-6, 3e-6  # the losses are read back as f32


def torch_model():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "bench", "train_torch.py")
    spec = importlib.util.spec_from_file_location("train_torch", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ResNet50().double().train()


def run_rlx(binary, out):
    cmd = [binary, "--device", "cpu", "--dtype", "f64", "--batch", str(BATCH), "--image",
           str(IMAGE), "--steps", str(STEPS), "--warmup", "0", "--lr", str(LR), "--dump", out]
    subprocess.run(cmd, check=True)
    losses = [float(v) for v in open(os.path.join(out, "losses.txt")).read().split()]
    params = np.fromfile(os.path.join(out, "params.bin"), dtype=np.float32)
    batch = np.fromfile(os.path.join(out, "batch.bin"), dtype=np.uint8)
    grads = np.fromfile(os.path.join(out, "grads.bin"), dtype=np.float64)
    n_x = BATCH * 3 * IMAGE * IMAGE
    images = batch[:4 * n_x].view(np.float32).reshape(BATCH, 3, IMAGE, IMAGE)
    labels = batch[4 * n_x:].view(np.int32).astype(np.int64)
    return losses, params, images, labels, grads


def load_params(model, flat):
    off = 0
    with torch.no_grad():
        for _, p in model.named_parameters():
            k = p.numel()
            p.copy_(torch.from_numpy(flat[off:off + k].astype(np.float64)).view(p.shape))
            off += k
    assert off == flat.size, f"rlx dumped {flat.size} param values, the model has {off}"


def train_torch(model, images, labels):
    x, y = torch.from_numpy(images.astype(np.float64)), torch.from_numpy(labels)
    # rlx keeps the optimizer's constants in f32 (its hyper tensor and attributes);
    # after a large first step on four images a 1e-8 change in lr shows at 1e-5
    f32 = lambda v: float(np.float32(v))
    opt = torch.optim.SGD(model.parameters(), lr=f32(LR), momentum=f32(0.9),
                          weight_decay=f32(1e-4))
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def compare(model, rlx_losses, torch_losses, grads):
    failures = 0
    for i, (a, b) in enumerate(zip(rlx_losses, torch_losses)):
        err = abs(a - b) / abs(b)
        print(f"step {i} loss rlx {a:.9g} torch {b:.9g} rel {err:.2e}")
        failures += not err <= LOSS_TOL
    off, worst = 0, (0.0, "")
    for name, p in model.named_parameters():
        k = p.numel()
        mine, ref = grads[off:off + k], p.grad.numpy().ravel()
        off += k
        err = np.abs(mine - ref).max() / max(np.abs(ref).max(), 1e-30)
        worst = max(worst, (err, name))
        if not err <= GRAD_TOL:
            print(f"FAIL grad {name}: max error {err:.2e} of max |grad| {np.abs(ref).max():.3g}")
            failures += 1
    print(f"step {STEPS - 1} gradients of {sum(1 for _ in model.parameters())} params: "
          f"worst {worst[0]:.2e} ({worst[1]})")
    return failures


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as out:
        rlx_losses, params, images, labels, grads = run_rlx(sys.argv[1], out)
    model = torch_model()
    load_params(model, params)
    torch_losses = train_torch(model, images, labels)
    failures = compare(model, rlx_losses, torch_losses, grads)
    print("FAIL" if failures else "PASS", f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
