"""PyTorch baselines for the vision rows (issue 14, item 6): ResNet-50 forward
at batch B, 224x224, on the GPU, eager, in exact f32 (TF32 off), TF32, bf16
autocast and the model cast to bf16 (bf16_model: weights and activations
bf16 throughout, what rlx's --precision bf16 computes), each in NCHW and
channels_last. Median of CUDA-event times.

  python3 bench/peers_vision.py [--batch 32] [--json OUT.json]

Uses torchvision's resnet50 when importable (weights random: timing only),
else the same architecture from scripts/gen_vision_models.py."""
import argparse
import json
import os
import sys

import torch


def resnet50():
    try:
        import torchvision
        return torchvision.models.resnet50(), "torchvision"
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
        import gen_vision_models as g
        return g.define_models(torch)["resnet50"]("full"), "gen_vision_models.py"


def median_ms(fn, warm=10, iters=30):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("PyTorch has no CUDA device here: not timed")
        return
    torch.manual_seed(0)
    model, source = resnet50()
    model = model.cuda().eval()
    torch.backends.cudnn.benchmark = True  # PyTorch at its usual best
    x = torch.randn(args.batch, 3, 224, 224, device="cuda")
    rows = []
    for layout in ("nchw", "channels_last"):
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        m = model.to(memory_format=fmt)
        xi = x.contiguous(memory_format=fmt)
        for mode in ("f32", "tf32", "bf16", "bf16_model"):
            tf32 = mode == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            mm, xm = (m, xi) if mode != "bf16_model" else (m.bfloat16(), xi.bfloat16())

            def run():
                with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=mode == "bf16"):
                    mm(xm)
            ms = median_ms(run)
            if mode == "bf16_model":
                m = m.float()
            rows.append({"name": "resnet50 B%d 224 %s %s" % (args.batch, mode, layout),
                         "mode": mode, "layout": layout, "ms": ms})
            print("torch %-40s %8.3f ms" % (rows[-1]["name"], ms), flush=True)
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "model": source, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
