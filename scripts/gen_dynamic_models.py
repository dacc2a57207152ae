#!/usr/bin/python3
"""Small GPT- and Llama-style models exported by torch.onnx.export with a
dynamic batch (B) and sequence (T) axis, plus torch's outputs at several
(B, T): the fixtures of tests/test_dynamic_onnx.c. Run with Debian's python
(/usr/bin/python3, torch 1.13):  /usr/bin/python3 scripts/gen_dynamic_models.py
Writes tests/data/dynamic/{gpt,llama}.onnx and {model}_ids_BxT.npy /
{model}_out_BxT.npy for each size."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "dynamic")
SIZES = [(1, 5), (2, 7), (3, 16)]
VOCAB, DIM, HEADS, MAXT = 64, 32, 4, 32


class GptBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.fc, self.out = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)
        self.register_buffer("tril", torch.tril(torch.ones(MAXT, MAXT)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(DIM, dim=2)
        hd = C // HEADS
        q = q.view(B, T, HEADS, hd).transpose(1, 2)
        k = k.view(B, T, HEADS, hd).transpose(1, 2)
        v = v.view(B, T, HEADS, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, DIM), nn.Embedding(MAXT, DIM)
        self.blocks = nn.ModuleList([GptBlock(), GptBlock()])
        self.ln_f = nn.LayerNorm(DIM)

    def forward(self, ids):
        B, T = ids.shape
        pos = torch.arange(0, T, dtype=torch.long, device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied lm head


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(DIM) + 0.1 * torch.randn(DIM))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.w


KV_HEADS, HD = 2, DIM // HEADS


def rope(x, cos, sin):
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(), RMSNorm()
        self.q = nn.Linear(DIM, HEADS * HD, bias=False)
        self.k = nn.Linear(DIM, KV_HEADS * HD, bias=False)
        self.v = nn.Linear(DIM, KV_HEADS * HD, bias=False)
        self.o = nn.Linear(DIM, DIM, bias=False)
        self.gate = nn.Linear(DIM, 48, bias=False)
        self.up = nn.Linear(DIM, 48, bias=False)
        self.down = nn.Linear(48, DIM, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        h = self.n1(x)
        q = self.q(h).view(B, T, HEADS, HD).transpose(1, 2)
        k = self.k(h).view(B, T, KV_HEADS, HD).transpose(1, 2)
        v = self.v(h).view(B, T, KV_HEADS, HD).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = HEADS // KV_HEADS
        k = k[:, :, None].expand(B, KV_HEADS, rep, T, HD).reshape(B, HEADS, T, HD)
        v = v[:, :, None].expand(B, KV_HEADS, rep, T, HD).reshape(B, HEADS, T, HD)
        att = (q @ k.transpose(-2, -1)) / HD ** 0.5 + mask
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, DIM)
        x = x + self.o(y)
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList([LlamaBlock(), LlamaBlock()])
        self.norm = RMSNorm()
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        self.register_buffer("inv_freq", inv)

    def forward(self, ids):
        B, T = ids.shape
        pos = torch.arange(T, device=ids.device).float()
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x, cos, sin, mask)
        return self.head(self.norm(x))


def export(name, model):
    model.eval()
    path = os.path.join(OUT, name + ".onnx")
    ids = torch.randint(0, VOCAB, (2, 6))
    torch.onnx.export(model, (ids,), path, input_names=["ids"], output_names=["logits"],
                      dynamic_axes={"ids": {0: "B", 1: "T"}, "logits": {0: "B", 1: "T"}},
                      opset_version=14, do_constant_folding=True)
    gen = torch.Generator().manual_seed(7)
    for b, t in SIZES:
        x = torch.randint(0, VOCAB, (b, t), generator=gen)
        with torch.no_grad():
            y = model(x)
        np.save(os.path.join(OUT, "%s_ids_%dx%d.npy" % (name, b, t)), x.numpy().astype(np.int64))
        np.save(os.path.join(OUT, "%s_out_%dx%d.npy" % (name, b, t)), y.numpy().astype(np.float32))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    export("gpt", Gpt())
    torch.manual_seed(1)
    export("llama", Llama())
    return 0


if __name__ == "__main__":
    sys.exit(main())
