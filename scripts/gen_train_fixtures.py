#!/usr/bin/python3
"""Writes the training fixtures tests/fixtures/train/{gpt,mlp,cnn}.bin (and
tests/fixtures/train/MANIFEST) in the style of llm.c's debug state: for a
small model, its batch, every initial param, the forward output, the loss,
every gradient, then the losses of three optimizer steps and every param
after the third. tests/test_train_fixtures.c trains the same models through
rlx_train_compile on each backend and compares all of it.

Run with Debian's python3 (torch 1.13 + numpy), on the CPU, in float32:
    /usr/bin/python3 scripts/gen_train_fixtures.py [--out tests/fixtures/train]
Deterministic: each model seeds its own torch generator, and the files are
written byte for byte the same on every run. The script also runs every
model in float64 and prints how far float32 lands from it (the noise floor
the C test's tolerances must sit above).

Models (weights are plain tensors in rlx's layouts, not nn.Module's):
  gpt  GPT-2 architecture, byte vocabulary V=256, L=2 blocks, H=2 heads,
       C=32, T=16, batch B=2 (the built-in GPT of tools/gpt_model.c):
       wte [V,C], wpe [T,C]; per block h.i.: ln_1.{weight,bias} (eps 1e-5),
       attn.c_attn.{weight [C,3C], bias [3C]} (q, k, v in that order along
       3C, heads of C/H consecutive columns), causal attention scaled by
       1/sqrt(C/H), attn.c_proj.{weight [C,C], bias}, ln_2.*,
       mlp.c_fc.{weight [C,4C], bias}, GELU (tanh approximation),
       mlp.c_proj.{weight [4C,C], bias}; ln_f.*; logits = x @ wte^T (tied);
       loss = mean cross-entropy of the logits against targets.
       Weights normal(0, 0.02) (c_proj: 0.02 / sqrt(2L)) as GPT-2; biases and
       LayerNorm params are perturbed from 0 / 1 (normal 0.02 / 1 + 0.1 *
       normal) so that their gradients are exercised by the forward too.
       AdamW (lr 1e-3, weight decay 0.01, betas 0.9 / 0.999, eps 1e-8) on
       every param (tied wte once).
  mlp  x [8,16] -> fc1 [16,32] + tanh -> fc2 [32,32] + relu -> fc3 [32,4];
       loss = mean squared error against y [8,4]. SGD (lr 0.05, momentum
       0.9, dampening 0, no nesterov, no weight decay).
  cnn  x [4,3,8,8] -> conv1 [4,3,3,3] stride 1 pad 1 + bias, relu -> max
       pool 2x2 stride 2 -> conv2 [8,4,3,3] stride 2 pad 1 + bias -> global
       average pool -> [4,8] -> fc [8,5] + bias; loss = mean cross-entropy
       against targets [4]. SGD (lr 0.1, momentum 0.9, no nesterov).
  Linear weights are [in, out] (y = x @ w + b), conv weights [OC, C, kh, kw].

File format (little-endian throughout):
  8 bytes   magic "RLXTRFX1"
  u32       number of records
  records, each:
    u32       name length n, then n bytes of ASCII name (no terminator)
    u32       dtype: 0 = f32, 1 = i32
    u32       rank r (0 for a scalar), then r x i64 dims
    data      numel x 4 bytes, C order
Record names:
  cfg.<key>         i32 scalars: the model's sizes (gpt: layers, heads,
                    channels, context, vocab, batch)
  hyper.<key>       f32 scalars: lr, weight_decay, beta1, beta2, eps
                    (AdamW); lr, momentum, dampening, weight_decay,
                    nesterov (SGD)
  input.<name>      the batch, under the graph input's name (gpt: ids and
                    targets, i32 [B,T]; mlp: x, y; cnn: x, targets i32 [4])
  param.<name>      every param before training, under the graph's param name
  output            the forward output at the initial params (gpt: logits
                    [B,T,V]; mlp: predictions [8,4]; cnn: logits [4,5])
  loss              f32 scalar, the loss at the initial params
  grad.<name>       d loss / d param at the initial params
  losses            f32 [3]: the loss of each of three steps (forward before
                    that step's update; losses[0] == loss)
  final.<name>      every param after the third update
MANIFEST lists each model's file and its optimizer.
"""
import argparse
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

MAGIC = b"RLXTRFX1"
DTYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.int32): 1}
STEPS = 3


# ---------------------------------------------------------------- file

def write_fixture(path, records):
    """records: list of (name, numpy array) written in that order."""
    out = [MAGIC, struct.pack("<I", len(records))]
    for name, arr in records:
        arr = np.ascontiguousarray(arr)
        code = DTYPE_CODES[arr.dtype]
        raw = name.encode("ascii")
        out.append(struct.pack("<I", len(raw)) + raw)
        out.append(struct.pack("<II", code, arr.ndim))
        out.append(struct.pack("<%dq" % arr.ndim, *arr.shape))
        out.append(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    with open(path, "wb") as f:
        f.write(b"".join(out))


def f32(x):
    return np.asarray(x.detach().cpu().numpy() if torch.is_tensor(x) else x, np.float32)


def i32(x):
    return np.asarray(x.cpu().numpy() if torch.is_tensor(x) else x, np.int32)


# ---------------------------------------------------------------- models

GPT_CFG = dict(layers=2, heads=2, channels=32, context=16, vocab=256, batch=2)


def gpt_init(gen):
    L, C, T, V = (GPT_CFG[k] for k in ("layers", "channels", "context", "vocab"))

    def normal(shape, std):
        return torch.randn(*shape, generator=gen) * std

    proj_std = 0.02 / math.sqrt(2 * L)
    params = {"wte": normal((V, C), 0.02), "wpe": normal((T, C), 0.02)}
    for i in range(L):
        p = "h.%d." % i
        params[p + "ln_1.weight"] = 1 + normal((C,), 0.1)
        params[p + "ln_1.bias"] = normal((C,), 0.02)
        params[p + "attn.c_attn.weight"] = normal((C, 3 * C), 0.02)
        params[p + "attn.c_attn.bias"] = normal((3 * C,), 0.02)
        params[p + "attn.c_proj.weight"] = normal((C, C), proj_std)
        params[p + "attn.c_proj.bias"] = normal((C,), 0.02)
        params[p + "ln_2.weight"] = 1 + normal((C,), 0.1)
        params[p + "ln_2.bias"] = normal((C,), 0.02)
        params[p + "mlp.c_fc.weight"] = normal((C, 4 * C), 0.02)
        params[p + "mlp.c_fc.bias"] = normal((4 * C,), 0.02)
        params[p + "mlp.c_proj.weight"] = normal((4 * C, C), proj_std)
        params[p + "mlp.c_proj.bias"] = normal((C,), 0.02)
    params["ln_f.weight"] = 1 + normal((C,), 0.1)
    params["ln_f.bias"] = normal((C,), 0.02)
    return params


def gpt_batch(gen):
    B, T, V = GPT_CFG["batch"], GPT_CFG["context"], GPT_CFG["vocab"]
    seq = torch.randint(0, V, (B, T + 1), generator=gen)
    return {"ids": seq[:, :T].to(torch.int32), "targets": seq[:, 1:].to(torch.int32)}


def gpt_forward(p, batch):
    L, H, C = GPT_CFG["layers"], GPT_CFG["heads"], GPT_CFG["channels"]
    ids = batch["ids"].long()
    B, T = ids.shape
    D = C // H
    x = p["wte"][ids] + p["wpe"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(L):
        q = "h.%d." % i
        h = F.layer_norm(x, (C,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], 1e-5)
        qkv = h @ p[q + "attn.c_attn.weight"] + p[q + "attn.c_attn.bias"]
        qh, kh, vh = (t.reshape(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=-1))
        s = (qh @ kh.transpose(-1, -2)) / math.sqrt(D)
        s = s.masked_fill(~causal, float("-inf"))
        a = (s.softmax(-1) @ vh).transpose(1, 2).reshape(B, T, C)
        x = x + a @ p[q + "attn.c_proj.weight"] + p[q + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], 1e-5)
        h = F.gelu(h @ p[q + "mlp.c_fc.weight"] + p[q + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ p[q + "mlp.c_proj.weight"] + p[q + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    logits = x @ p["wte"].t()
    loss = F.cross_entropy(logits.reshape(B * T, -1), batch["targets"].long().reshape(-1))
    return logits, loss


def mlp_init(gen):
    def layer(n_in, n_out):
        bound = 1 / math.sqrt(n_in)  # nn.Linear's uniform init
        w = (torch.rand(n_in, n_out, generator=gen) * 2 - 1) * bound
        b = (torch.rand(n_out, generator=gen) * 2 - 1) * bound
        return w, b

    params = {}
    for name, (n_in, n_out) in (("fc1", (16, 32)), ("fc2", (32, 32)), ("fc3", (32, 4))):
        params[name + ".weight"], params[name + ".bias"] = layer(n_in, n_out)
    return params


def mlp_batch(gen):
    return {"x": torch.randn(8, 16, generator=gen), "y": torch.randn(8, 4, generator=gen)}


def mlp_forward(p, batch):
    h = torch.tanh(batch["x"] @ p["fc1.weight"] + p["fc1.bias"])
    h = torch.relu(h @ p["fc2.weight"] + p["fc2.bias"])
    out = h @ p["fc3.weight"] + p["fc3.bias"]
    return out, F.mse_loss(out, batch["y"])


def cnn_init(gen):
    def uniform(shape, fan_in):
        return (torch.rand(*shape, generator=gen) * 2 - 1) / math.sqrt(fan_in)

    return {"conv1.weight": uniform((4, 3, 3, 3), 27), "conv1.bias": uniform((4,), 27),
            "conv2.weight": uniform((8, 4, 3, 3), 36), "conv2.bias": uniform((8,), 36),
            "fc.weight": uniform((8, 5), 8), "fc.bias": uniform((5,), 8)}


def cnn_batch(gen):
    return {"x": torch.randn(4, 3, 8, 8, generator=gen),
            "targets": torch.randint(0, 5, (4,), generator=gen).to(torch.int32)}


def cnn_forward(p, batch):
    h = F.relu(F.conv2d(batch["x"], p["conv1.weight"], p["conv1.bias"], stride=1, padding=1))
    h = F.max_pool2d(h, 2, 2)
    h = F.conv2d(h, p["conv2.weight"], p["conv2.bias"], stride=2, padding=1)
    h = h.mean(dim=(2, 3))
    out = h @ p["fc.weight"] + p["fc.bias"]
    return out, F.cross_entropy(out, batch["targets"].long())


ADAMW = dict(kind="adamw", lr=1e-3, weight_decay=0.01, beta1=0.9, beta2=0.999, eps=1e-8)
MODELS = {
    "gpt": dict(seed=1515, init=gpt_init, batch=gpt_batch, forward=gpt_forward, cfg=GPT_CFG,
                opt=ADAMW),
    "mlp": dict(seed=1516, init=mlp_init, batch=mlp_batch, forward=mlp_forward, cfg={},
                opt=dict(kind="sgd", lr=0.05, momentum=0.9, dampening=0.0, weight_decay=0.0,
                         nesterov=0.0)),
    "cnn": dict(seed=1517, init=cnn_init, batch=cnn_batch, forward=cnn_forward, cfg={},
                opt=dict(kind="sgd", lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0,
                         nesterov=0.0)),
}


# ---------------------------------------------------------------- training

def make_optimizer(opt, params):
    if opt["kind"] == "adamw":
        return torch.optim.AdamW(params, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]),
                                 eps=opt["eps"], weight_decay=opt["weight_decay"])
    return torch.optim.SGD(params, lr=opt["lr"], momentum=opt["momentum"],
                           dampening=opt["dampening"], weight_decay=opt["weight_decay"],
                           nesterov=bool(opt["nesterov"]))


def train(model, dtype):
    """Runs the model's forward, backward and STEPS updates in dtype; returns
    the batch, the initial params, the first forward's output, loss and grads,
    the STEPS losses and the final params (all as float32 / int32 numpy)."""
    gen = torch.Generator().manual_seed(model["seed"])
    init = model["init"](gen)
    batch = model["batch"](gen)
    params = {k: v.to(dtype).clone().requires_grad_(True) for k, v in init.items()}
    run_batch = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in batch.items()}
    opt = make_optimizer(model["opt"], list(params.values()))
    losses, first = [], None
    for step in range(STEPS):
        opt.zero_grad()
        out, loss = model["forward"](params, run_batch)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            first = (out.detach().clone(), loss.detach().clone(),
                     {k: v.grad.detach().clone() for k, v in params.items()})
        opt.step()
    return batch, init, first, losses, {k: v.detach() for k, v in params.items()}


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    den = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / (den if den > 0 else 1e-300))


def records_of(model, result):
    batch, init, (out, loss, grads), losses, final = result
    rec = [("cfg." + k, np.int32(v)) for k, v in model["cfg"].items()]
    rec += [("hyper." + k, np.float32(v)) for k, v in model["opt"].items() if k != "kind"]
    for k, v in batch.items():
        rec.append(("input." + k, f32(v) if v.is_floating_point() else i32(v)))
    rec += [("param." + k, f32(v)) for k, v in init.items()]
    rec += [("output", f32(out)), ("loss", np.float32(loss.item()))]
    rec += [("grad." + k, f32(v)) for k, v in grads.items()]
    rec.append(("losses", np.asarray(losses, np.float32)))
    rec += [("final." + k, f32(v)) for k, v in final.items()]
    return [(name, np.asarray(arr)) for name, arr in rec]


def noise_floor(r32, r64):
    """Worst relative L2 between the float32 and float64 runs, per quantity."""
    g32, g64 = r32[2][2], r64[2][2]
    return {"output": rel_l2(r32[2][0], r64[2][0]),
            "loss": rel_l2(r32[2][1], r64[2][1]),
            "grads": max(rel_l2(g32[k], g64[k]) for k in g32),
            "losses": rel_l2(r32[3], r64[3]),
            "final": max(rel_l2(r32[4][k], r64[4][k]) for k in r32[4])}


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "train"))
    args = ap.parse_args()
    torch.set_num_threads(1)  # same summation order on every machine
    root = os.path.normpath(args.out)
    os.makedirs(root, exist_ok=True)
    manifest = ["# model file optimizer: training fixtures written by",
                "# scripts/gen_train_fixtures.py (format in that script and README.md)."]
    for name, model in MODELS.items():
        r32 = train(model, torch.float32)
        r64 = train(model, torch.float64)
        path = os.path.join(root, name + ".bin")
        write_fixture(path, records_of(model, r32))
        manifest.append("%s %s.bin %s" % (name, name, model["opt"]["kind"]))
        floor = ", ".join("%s %.2g" % kv for kv in noise_floor(r32, r64).items())
        print("%s: %d bytes, losses %s; f32 vs f64 rel L2: %s"
              % (name, os.path.getsize(path), " ".join("%.6f" % l for l in r32[3]), floor))
    with open(os.path.join(root, "MANIFEST"), "w") as f:
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
