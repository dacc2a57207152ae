#!/usr/bin/env python3
"""PyTorch peers of the training rows of PERF.md, with peak memory.

Same workloads as ../shared/bench/peers_torch.py (GPT-2 124M train step B4
T1024 with fused AdamW lr 1e-4, labels = ids; causal SDPA forward + backward
B8 H16 S1024 D64), plus torch.cuda.max_memory_allocated for each step, which
peers_torch.py does not record. Prints one JSON line per row, the format of
bench/train_gpt2.c, so scripts/device_train.sh can put them side by side.

ResNet-50 rows (bench/train_resnet50.c's peer): torchvision's resnet50()
in train() (BatchNorm on batch statistics), B32 3x224x224, random labels
over 1000 classes, cross-entropy, SGD lr 0.1 momentum 0.9 weight decay
1e-4 (foreach), the same batch every step; f32 (TF32 off), TF32 and bf16
autocast, each NCHW and channels_last; cudnn.benchmark on (what ResNet
training scripts set). Without torchvision the same architecture is built
here (torchvision's module and param names, Bottleneck v1.5).

  python3 bench/train_torch.py [--compile] [--skip-gpt2] [--skip-attention]
                               [--skip-resnet50]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def bench(fn, warm, iters):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0]


def gpt2_rows(dev, compile_too):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024)
    ids = torch.randint(0, 50257, (4, 1024), device=dev)
    modes = [("eager", False)] + ([("compile", True)] if compile_too else [])
    for dt in (torch.float32, torch.bfloat16):
        for label, use_compile in modes:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            model = GPT2LMHeadModel(cfg).to(dev, dtype=dt).train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
            fwd = torch.compile(model) if use_compile else model

            def step():
                opt.zero_grad(set_to_none=True)
                loss = fwd(ids, labels=ids).loss
                loss.backward()
                opt.step()

            torch.cuda.reset_peak_memory_stats()
            ms, best = bench(step, warm=3, iters=5)
            peak = torch.cuda.max_memory_allocated()
            name = str(dt).split(".")[-1]
            print(json.dumps({"name": f"torch gpt2-124M train-step {label} {name} B4 T1024",
                              "ms": round(ms, 3), "min_ms": round(best, 3),
                              "max_memory_allocated": peak}), flush=True)
            del model, opt, fwd
            torch.cuda.empty_cache()


def attention_rows(dev):
    for dt in (torch.float32, torch.bfloat16):
        q, k, v = (torch.randn(8, 16, 1024, 64, device=dev, dtype=dt, requires_grad=True)
                   for _ in range(3))
        g = torch.randn(8, 16, 1024, 64, device=dev, dtype=dt)

        def fwd_bwd():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return torch.autograd.grad(o, (q, k, v), g)

        ms, best = bench(fwd_bwd, warm=5, iters=20)
        name = str(dt).split(".")[-1]
        print(json.dumps({"name": f"torch sdpa causal fwd+bwd {name} B8 H16 S1024 D64",
                          "ms": round(ms, 4), "min_ms": round(best, 4)}), flush=True)


class Bottleneck(torch.nn.Module):
    """torchvision's Bottleneck (v1.5: the stride on the 3x3 conv)."""

    def __init__(self, inp, planes, stride, downsample):
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(inp, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if downsample:
            self.downsample = nn.Sequential(nn.Conv2d(inp, planes * 4, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        h = self.relu(self.bn1(self.conv1(x)))
        h = self.relu(self.bn2(self.conv2(h)))
        return self.relu(self.bn3(self.conv3(h)) + identity)


class ResNet50(torch.nn.Module):
    """torchvision.models.resnet50() where torchvision is not installed."""

    def __init__(self, classes=1000):
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inp = 64
        for i, (blocks, planes) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(inp, planes, 2 if b == 0 and i > 0 else 1, b == 0))
                inp = planes * 4
            setattr(self, f"layer{i + 1}", nn.Sequential(*layer))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50_model():
    try:
        import torchvision
        return torchvision.models.resnet50(), "torchvision"
    except ImportError:
        return ResNet50(), "local"


def resnet50_rows(dev, batch=32, image=224):
    torch.backends.cudnn.benchmark = True
    gen = torch.Generator(device=dev).manual_seed(0)
    x0 = torch.randn(batch, 3, image, image, device=dev, generator=gen)
    labels = torch.randint(0, 1000, (batch,), device=dev, generator=gen)
    for precision in ("f32", "tf32", "bf16"):
        for channels_last in (False, True):
            tf32 = precision == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            model, source = resnet50_model()
            fmt = torch.channels_last if channels_last else torch.contiguous_format
            model = model.to(dev, memory_format=fmt).train()
            x = x0.contiguous(memory_format=fmt)
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
            losses = []

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
                    loss = F.cross_entropy(model(x), labels)
                loss.backward()
                opt.step()
                losses.append(loss.item())  # read back, as rlx's step reads its loss

            torch.cuda.reset_peak_memory_stats()
            ms, best = bench(step, warm=3, iters=10)
            peak = torch.cuda.max_memory_allocated()
            layout = " channels_last" if channels_last else ""
            print(json.dumps({"name": f"torch resnet50 train-step eager {precision}{layout} "
                                      f"B{batch} {image}x{image}",
                              "ms": round(ms, 3), "min_ms": round(best, 3),
                              "loss_first": round(losses[0], 5), "loss_last": round(losses[-1], 5),
                              "max_memory_allocated": peak, "model": source,
                              "cudnn_benchmark": True}), flush=True)
            del model, opt, x
            torch.cuda.empty_cache()
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--skip-gpt2", action="store_true")
    ap.add_argument("--skip-attention", action="store_true")
    ap.add_argument("--skip-resnet50", action="store_true")
    a = ap.parse_args()
    dev = "cuda"
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}))
    if not a.skip_attention:
        attention_rows(dev)
    if not a.skip_gpt2:
        gpt2_rows(dev, a.compile)
    if not a.skip_resnet50:
        resnet50_rows(dev)


if __name__ == "__main__":
    main()
