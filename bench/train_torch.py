#!/usr/bin/env python3
"""PyTorch peers of the training rows of PERF.md, with peak memory.

Same workloads as ../shared/bench/peers_torch.py (GPT-2 124M train step B4
T1024 with fused AdamW lr 1e-4, labels = ids; causal SDPA forward + backward
B8 H16 S1024 D64), plus torch.cuda.max_memory_allocated for each step, which
peers_torch.py does not record. Prints one JSON line per row, the format of
bench/train_gpt2.c, so scripts/device_train.sh can put them side by side.

  python3 bench/train_torch.py [--compile] [--skip-gpt2] [--skip-attention]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--skip-gpt2", action="store_true")
    ap.add_argument("--skip-attention", action="store_true")
    a = ap.parse_args()
    dev = "cuda"
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}))
    if not a.skip_attention:
        attention_rows(dev)
    if not a.skip_gpt2:
        gpt2_rows(dev, a.compile)


if __name__ == "__main__":
    main()
