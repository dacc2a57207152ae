#!/usr/bin/env python3
"""PyTorch peer of bench/conv_cuda.c: the same conv2d cases (3x3, stride 1,
pad 1, B32 C256 -> 256, 56x56; exact f32 with TF32 off, TF32, bf16; NCHW and
channels_last; plain and with bias + ReLU), timed with CUDA events: 5 warm-up
runs (plus RLX_BENCH_WARMUP_MS of them), median of 30. One JSON line per case,
then, with --rlx FILE (conv_cuda's JSON lines), a table of rlx / PyTorch.

  python3 bench/conv_torch.py [--benchmark] [--rlx conv_cuda.jsonl]

--benchmark sets torch.backends.cudnn.benchmark (PyTorch then times the
algorithms, as rlx does at compile time); the default is PyTorch's default.
"""
import argparse
import json
import os
import time

import torch
import torch.nn.functional as F

B, C, OC, H, W = 32, 256, 256, 56, 56
WARMUP, ITERS = 5, 30

# (name as in conv_cuda.c, dtype, tf32, channels_last, bias_relu)
CASES = [
    ("conv3x3 f32 nchw", torch.float32, False, False, False),
    ("conv3x3 f32-tf32 nchw", torch.float32, True, False, False),
    ("conv3x3 bf16 nchw", torch.bfloat16, False, False, False),
    ("conv3x3 f32 nhwc", torch.float32, False, True, False),
    ("conv3x3 f32-tf32 nhwc", torch.float32, True, True, False),
    ("conv3x3 bf16 nhwc", torch.bfloat16, False, True, False),
    ("conv3x3+bias+relu f32 nchw", torch.float32, False, False, True),
    ("conv3x3+bias+relu bf16 nhwc", torch.bfloat16, False, True, True),
]


def time_case(dtype, tf32, channels_last, bias_relu):
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    dev = "cuda"
    x = torch.randn(B, C, H, W, device=dev, dtype=dtype)
    w = torch.randn(OC, C, 3, 3, device=dev, dtype=dtype) / (C * 9) ** 0.5
    b = torch.randn(OC, device=dev, dtype=dtype) if bias_relu else None
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
        w = w.contiguous(memory_format=torch.channels_last)

    def step():
        y = F.conv2d(x, w, b, stride=1, padding=1)
        return F.relu(y) if bias_relu else y

    with torch.no_grad():
        for _ in range(WARMUP):
            step()
        until = time.time() + float(os.environ.get("RLX_BENCH_WARMUP_MS", "0")) / 1e3
        while time.time() < until:
            step()
        times = []
        for _ in range(ITERS):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
    times.sort()
    return times[ITERS // 2], times[ITERS // 10], times[ITERS * 9 // 10]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--benchmark", action="store_true")
    ap.add_argument("--rlx", help="conv_cuda JSON lines to compare with")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = args.benchmark
    flops = 2.0 * B * OC * H * W * C * 9
    rows = {}
    for name, dtype, tf32, cl, br in CASES:
        med, p10, p90 = time_case(dtype, tf32, cl, br)
        rows[name] = med
        print(json.dumps({"name": name, "device": "torch", "ms": round(med, 4),
                          "p10_ms": round(p10, 4), "p90_ms": round(p90, 4),
                          "tflops": round(flops / (med * 1e-3) / 1e12, 2),
                          "cudnn_benchmark": args.benchmark,
                          "torch": torch.__version__,
                          "cudnn": torch.backends.cudnn.version()}), flush=True)
    if args.rlx:
        print("\n| case | rlx ms | PyTorch ms | PyTorch / rlx |\n|---|---|---|---|")
        with open(args.rlx) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("name") in rows and "ms" in r:
                    t = rows[r["name"]]
                    print(f"| {r['name']} ({r.get('device', '?')}) | {r['ms']:.3f} | {t:.3f} | {t / r['ms']:.2f}x |")


if __name__ == "__main__":
    main()
