#!/usr/bin/python3
"""Oracle for tests/test_llm.c: tiny seeded Llama-family models (and GPT-2
and Gemma-2, see OTHER_CASES) in Debian's
torch (no transformers there: the forward is written here from the published
architectures), saved as Hugging Face checkpoint folders (config.json +
safetensors written by hand), with their reference logits.

Per case, OUTDIR/<case>/ holds config.json, the weights (model.safetensors,
or two shards and model.safetensors.index.json), input_ids.npy (i64 [B, T])
and logits.npy (f32 [B, T, V], computed in float64 from the weights as
stored, so a case with f16 / bf16 weights checks the conversion too).

usage: llm_torch.py OUTDIR
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

B, T = 2, 8
BASE = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
            rope_theta=10000.0, max_position_embeddings=64, hidden_act="silu",
            tie_word_embeddings=False)

CASES = {
    # GQA and Llama 3.1 RoPE scaling (an original context of 16 puts the
    # small head's frequencies in all three bands)
    "llama": dict(model_type="llama", architectures=["LlamaForCausalLM"],
                  rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                    high_freq_factor=4.0, original_max_position_embeddings=16)),
    # the same architecture stored as bf16 in two shards with an index
    "llama_bf16_sharded": dict(model_type="llama", architectures=["LlamaForCausalLM"],
                               rope_theta=500000.0, torch_dtype="bfloat16"),
    # q/k/v biases, tied embeddings, linear RoPE scaling, f16 weights
    "qwen2": dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                  tie_word_embeddings=True, rope_scaling=dict(type="linear", factor=2.0),
                  torch_dtype="float16"),
    # q_norm / k_norm per head, head_dim (32) != hidden / heads (16)
    "qwen3": dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=32,
                  attention_bias=False),
    # sliding-window attention narrower than the sequence
    "mistral": dict(model_type="mistral", architectures=["MistralForCausalLM"],
                    sliding_window=3),
    # mixture of experts: 4 experts, the top 2 per token (block_sparse_moe)
    "mixtral": dict(model_type="mixtral", architectures=["MixtralForCausalLM"],
                    num_local_experts=4, num_experts_per_tok=2),
}

SAFETENSORS_DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
TORCH_DTYPE = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def head_dim(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def make_weights(c, gen):
    """HF names -> float32 tensors (Linear weights [out, in])."""
    D, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    H, Hkv, hd = c["num_attention_heads"], c["num_key_value_heads"], head_dim(c)
    qwen2 = c["model_type"] == "qwen2"

    def rand(*shape, std=0.08):
        return torch.randn(*shape, generator=gen) * std

    def norm_weight(n):
        return 1.0 + rand(n, std=0.1)

    w = {"model.embed_tokens.weight": rand(V, D, std=0.5), "model.norm.weight": norm_weight(D)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm_weight(D)
        w[p + "post_attention_layernorm.weight"] = norm_weight(D)
        for name, rows in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd)):
            w[p + f"self_attn.{name}_proj.weight"] = rand(rows, D)
            if qwen2:
                w[p + f"self_attn.{name}_proj.bias"] = rand(rows, std=0.2)
        w[p + "self_attn.o_proj.weight"] = rand(D, H * hd)
        if c["model_type"] == "qwen3":
            w[p + "self_attn.q_norm.weight"] = norm_weight(hd)
            w[p + "self_attn.k_norm.weight"] = norm_weight(hd)
        if c.get("num_local_experts"):
            # router logits spread wide enough that no two experts tie
            w[p + "block_sparse_moe.gate.weight"] = rand(c["num_local_experts"], D, std=0.5)
            for j in range(c["num_local_experts"]):
                e = p + f"block_sparse_moe.experts.{j}."
                w[e + "w1.weight"] = rand(F, D)
                w[e + "w3.weight"] = rand(F, D)
                w[e + "w2.weight"] = rand(D, F)
            continue
        w[p + "mlp.gate_proj.weight"] = rand(F, D)
        w[p + "mlp.up_proj.weight"] = rand(F, D)
        w[p + "mlp.down_proj.weight"] = rand(D, F)
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = rand(V, D, std=0.2)
    return w


# ------------------------------------------------------------------ reference forward (float64)

def rope_frequencies(c):
    hd = head_dim(c)
    freq = c["rope_theta"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    rs = c.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return freq / rs["factor"]
    if kind == "llama3":
        old, factor = rs["original_max_position_embeddings"], rs["factor"]
        low, high = rs["low_freq_factor"], rs["high_freq_factor"]
        out = []
        for f in freq.tolist():
            wavelen = 2 * math.pi / f
            if wavelen < old / high:
                out.append(f)
            elif wavelen > old / low:
                out.append(f / factor)
            else:
                s = (old / wavelen - low) / (high - low)
                out.append((1 - s) * f / factor + s * f)
        return torch.tensor(out, dtype=torch.float64)
    return freq


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rotate(x, cos, sin):
    """x [B, H, T, hd]: the two halves of each head rotate together."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attention(q, k, v, window):
    """q [B, H, T, hd], k / v [B, Hkv, T, hd]; query head h reads kv head
    h // (H / Hkv). Causal; with a window, key j is seen by query i when
    i - window < j <= i."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    i = torch.arange(q.shape[2])[:, None]
    j = torch.arange(k.shape[2])[None, :]
    keep = j <= i
    if window:
        keep = keep & (j > i - window)
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def mlp(w, p, x):
    gate = torch.nn.functional.silu(x @ w[p + "mlp.gate_proj.weight"].T)
    return (gate * (x @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T


def moe(c, w, p, x):
    """Mixtral's sparse MoE block as HF writes it: softmax over every
    expert's router logit, the top k kept and renormalised, each token's
    output the weighted sum of its k experts' SiLU-gated MLPs."""
    p += "block_sparse_moe."
    logits = x @ w[p + "gate.weight"].T
    probs = torch.softmax(logits, dim=-1)
    top, experts = torch.topk(probs, c["num_experts_per_tok"], dim=-1)
    ranked = torch.sort(logits, dim=-1, descending=True).values
    k = c["num_experts_per_tok"]  # f32 rounding must not change the pick
    assert float((ranked[..., k - 1] - ranked[..., k]).min()) > 1e-3, "router near-tie"
    top = top / top.sum(-1, keepdim=True)
    out = torch.zeros_like(x)
    for j in range(c["num_local_experts"]):
        e = p + f"experts.{j}."
        y = (torch.nn.functional.silu(x @ w[e + "w1.weight"].T) * (x @ w[e + "w3.weight"].T)) \
            @ w[e + "w2.weight"].T
        weight = (top * (experts == j)).sum(-1, keepdim=True)  # 0 where j is not picked
        out = out + weight * y
    return out


def forward(c, w, ids):
    H, Hkv, hd, eps = c["num_attention_heads"], c["num_key_value_heads"], head_dim(c), c["rms_norm_eps"]
    angles = torch.arange(ids.shape[1], dtype=torch.float64)[:, None] * rope_frequencies(c)[None, :]
    cos, sin = torch.cos(angles), torch.sin(angles)
    h = w["model.embed_tokens.weight"][ids]
    Bn, Tn = ids.shape
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)

        def proj(name, heads):
            y = x @ w[p + f"self_attn.{name}_proj.weight"].T
            if p + f"self_attn.{name}_proj.bias" in w:
                y = y + w[p + f"self_attn.{name}_proj.bias"]
            y = y.view(Bn, Tn, heads, hd)
            if name != "v" and p + f"self_attn.{name}_norm.weight" in w:
                y = rms_norm(y, w[p + f"self_attn.{name}_norm.weight"], eps)
            return y.transpose(1, 2)

        q = rotate(proj("q", H), cos, sin)
        k = rotate(proj("k", Hkv), cos, sin)
        a = attention(q, k, proj("v", Hkv), c.get("sliding_window"))
        h = h + a.transpose(1, 2).reshape(Bn, Tn, H * hd) @ w[p + "self_attn.o_proj.weight"].T
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        h = h + (moe(c, w, p, x) if c.get("num_local_experts") else mlp(w, p, x))
    h = rms_norm(h, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
    return h @ head.T


# ------------------------------------------------------------------ GPT-2 and Gemma-2

GPT2_BASE = dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], vocab_size=256, n_embd=64,
                 n_layer=2, n_head=4, n_positions=32, n_ctx=32, n_inner=None,
                 activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True)
# head_dim 32 != hidden / heads, query_pre_attn_scalar != head_dim, caps small
# enough to bend these tiny models' scores and logits, a window narrower
# than the sequence
GEMMA2_BASE = dict(model_type="gemma2", architectures=["Gemma2ForCausalLM"], vocab_size=256,
                   hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
                   rope_theta=10000.0, max_position_embeddings=64,
                   hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24,
                   attn_logit_softcapping=2.0, final_logit_softcapping=10.0, sliding_window=3,
                   tie_word_embeddings=True)

OTHER_CASES = {
    # HF GPT2LMHeadModel names ("transformer."), f32
    "gpt2": dict(GPT2_BASE),
    # GPT2Model names (no prefix, as openai-community/gpt2 ships), f16
    "gpt2_noprefix_f16": dict(GPT2_BASE, torch_dtype="float16"),
    "gemma2": dict(GEMMA2_BASE),
    # bf16: sqrt(72) rounds to 8.5 in the embedding's dtype, as HF multiplies
    "gemma2_bf16": dict(GEMMA2_BASE, hidden_size=72, torch_dtype="bfloat16"),
}


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_weights(c, gen, prefix="transformer."):
    """HF names -> float32 tensors; Conv1D weights [in, out]."""
    D, V, P = c["n_embd"], c["vocab_size"], c["n_positions"]
    F = c.get("n_inner") or 4 * D

    def rand(*shape, std=0.08):
        return torch.randn(*shape, generator=gen) * std

    w = {prefix + "wte.weight": rand(V, D, std=0.5), prefix + "wpe.weight": rand(P, D, std=0.3)}

    def norm(name):
        w[name + ".weight"] = 1.0 + rand(D, std=0.1)
        w[name + ".bias"] = rand(D, std=0.1)

    for i in range(c["n_layer"]):
        p = f"{prefix}h.{i}."
        norm(p + "ln_1")
        norm(p + "ln_2")
        for name, n_in, n_out in (("attn.c_attn", D, 3 * D), ("attn.c_proj", D, D),
                                  ("mlp.c_fc", D, F), ("mlp.c_proj", F, D)):
            w[p + name + ".weight"] = rand(n_in, n_out, std=0.15)
            w[p + name + ".bias"] = rand(n_out, std=0.1)
    norm(prefix + "ln_f")
    return w


def gpt2_forward(c, w, ids, prefix="transformer."):
    D, H, eps = c["n_embd"], c["n_head"], c["layer_norm_epsilon"]
    hd = D // H
    Bn, Tn = ids.shape

    def ln(x, name):
        return torch.nn.functional.layer_norm(x, (D,), w[name + ".weight"], w[name + ".bias"], eps)

    def conv1d(x, name):
        return x @ w[name + ".weight"] + w[name + ".bias"]

    h = w[prefix + "wte.weight"][ids] + w[prefix + "wpe.weight"][torch.arange(Tn)]
    for i in range(c["n_layer"]):
        p = f"{prefix}h.{i}."
        q, k, v = conv1d(ln(h, p + "ln_1"), p + "attn.c_attn").split(D, dim=-1)
        q, k, v = (t.view(Bn, Tn, H, hd).transpose(1, 2) for t in (q, k, v))
        a = attention(q, k, v, None).transpose(1, 2).reshape(Bn, Tn, D)
        h = h + conv1d(a, p + "attn.c_proj")
        m = gelu_tanh(conv1d(ln(h, p + "ln_2"), p + "mlp.c_fc"))
        h = h + conv1d(m, p + "mlp.c_proj")
    return ln(h, prefix + "ln_f") @ w[prefix + "wte.weight"].T


def gemma2_weights(c, gen):
    """HF names -> float32 tensors (Linear weights [out, in]; norm weights
    w around 0: the model applies 1 + w)."""
    D, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    H, Hkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]

    def rand(*shape, std=0.08):
        return torch.randn(*shape, generator=gen) * std

    w = {"model.embed_tokens.weight": rand(V, D, std=0.5), "model.norm.weight": rand(D, std=0.2)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            w[p + n + ".weight"] = rand(D, std=0.2)
        w[p + "self_attn.q_proj.weight"] = rand(H * hd, D, std=0.3)
        w[p + "self_attn.k_proj.weight"] = rand(Hkv * hd, D, std=0.3)
        w[p + "self_attn.v_proj.weight"] = rand(Hkv * hd, D)
        w[p + "self_attn.o_proj.weight"] = rand(D, H * hd)
        w[p + "mlp.gate_proj.weight"] = rand(F, D)
        w[p + "mlp.up_proj.weight"] = rand(F, D)
        w[p + "mlp.down_proj.weight"] = rand(D, F)
    return w


def gemma2_attention(q, k, v, scale, cap, window):
    """attention() with Gemma-2's score scale and softcap."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) * scale
    if cap:
        scores = cap * torch.tanh(scores / cap)
    i = torch.arange(q.shape[2])[:, None]
    j = torch.arange(k.shape[2])[None, :]
    keep = j <= i
    if window:
        keep = keep & (j > i - window)
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v


def gemma2_forward(c, w, ids, norm_shift=1.0, embed_scale=None, window_layers=None):
    """HF's Gemma2ForCausalLM in float64. norm_shift: what is added to the
    stored norm weights (1 for a checkpoint, 0 for a GGUF file that holds
    1 + w). embed_scale: HF's sqrt(hidden) in the checkpoint's dtype.
    window_layers: which layers slide (default: the even ones)."""
    H, Hkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps = c["rms_norm_eps"]
    Bn, Tn = ids.shape
    angles = torch.arange(Tn, dtype=torch.float64)[:, None] * rope_frequencies(c)[None, :]
    cos, sin = torch.cos(angles), torch.sin(angles)
    scale = c["query_pre_attn_scalar"] ** -0.5

    def norm(x, name):
        return rms_norm(x, w[name] + norm_shift, eps)

    h = w["model.embed_tokens.weight"][ids]
    h = h * (embed_scale if embed_scale is not None else math.sqrt(c["hidden_size"]))
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = norm(h, p + "input_layernorm.weight")

        def proj(name, heads):
            y = x @ w[p + f"self_attn.{name}_proj.weight"].T
            return y.view(Bn, Tn, heads, hd).transpose(1, 2)

        slides = i % 2 == 0 if window_layers is None else i in window_layers
        a = gemma2_attention(rotate(proj("q", H), cos, sin), rotate(proj("k", Hkv), cos, sin),
                             proj("v", Hkv), scale, c["attn_logit_softcapping"],
                             c["sliding_window"] if slides else None)
        a = a.transpose(1, 2).reshape(Bn, Tn, H * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = h + norm(a, p + "post_attention_layernorm.weight")
        x = norm(h, p + "pre_feedforward_layernorm.weight")
        m = gelu_tanh(x @ w[p + "mlp.gate_proj.weight"].T) * (x @ w[p + "mlp.up_proj.weight"].T)
        m = m @ w[p + "mlp.down_proj.weight"].T
        h = h + norm(m, p + "post_feedforward_layernorm.weight")
    logits = norm(h, "model.norm.weight") @ w["model.embed_tokens.weight"].T
    cap = c["final_logit_softcapping"]
    return cap * torch.tanh(logits / cap) if cap else logits


def gemma2_embed_scale(c):
    """sqrt(hidden) rounded to the checkpoint's dtype, as HF multiplies in it."""
    dtype = TORCH_DTYPE[c.get("torch_dtype", "float32")]
    return float(torch.tensor(c["hidden_size"] ** 0.5, dtype=dtype))


def gap(a, b):
    return float((a - b).abs().max() / b.abs().max())


def assert_matters(name, logits, variants, floor=1e-3):
    """Each variant (a feature left out) must move the logits well past the
    test's 1e-4 bound, so a builder that ignores the feature fails."""
    for what, other in variants.items():
        g = gap(other, logits)
        assert g > floor, f"{name}: leaving out {what} changes the logits by only {g:.3g}"


def gemma2_variants(c, w, ids, norm_shift, embed_scale):
    """The logits with one Gemma-2 feature left out at a time."""
    out = {}
    for key, value in (("attn_logit_softcapping", None), ("final_logit_softcapping", None),
                       ("query_pre_attn_scalar", c["head_dim"])):
        if c[key] == value:
            continue
        no = dict(c, **{key: value})
        out[key] = gemma2_forward(no, w, ids, norm_shift, embed_scale)
    out["the window"] = gemma2_forward(c, w, ids, norm_shift, embed_scale, window_layers=())
    out["the alternation"] = gemma2_forward(c, w, ids, norm_shift, embed_scale,
                                            window_layers=range(c["num_hidden_layers"]))
    out["the norms' + 1"] = gemma2_forward(c, w, ids, 1.0 - norm_shift, embed_scale)
    out["the embedding scale"] = gemma2_forward(c, w, ids, norm_shift, 1.0)
    return out


def write_other_case(out, name, c, seed):
    gen = torch.Generator().manual_seed(seed)
    dtype = TORCH_DTYPE[c.get("torch_dtype", "float32")]
    gpt2 = c["model_type"] == "gpt2"
    prefix = "" if "noprefix" in name else "transformer."
    weights = gpt2_weights(c, gen, prefix) if gpt2 else gemma2_weights(c, gen)
    stored = {n: t.to(dtype) for n, t in weights.items()}
    ids = torch.randint(0, c["vocab_size"], (B, T), generator=gen)
    w64 = {n: t.to(torch.float64) for n, t in stored.items()}
    if gpt2:
        logits = gpt2_forward(c, w64, ids, prefix)
    else:
        scale = gemma2_embed_scale(c)
        logits = gemma2_forward(c, w64, ids, 1.0, scale)
        variants = gemma2_variants(c, w64, ids, 1.0, scale)
        if scale != math.sqrt(c["hidden_size"]):  # the dtype's rounding must show
            variants = {"the embedding scale's rounding":
                        gemma2_forward(c, w64, ids, 1.0, math.sqrt(c["hidden_size"]))}
        exact = scale == math.sqrt(c["hidden_size"])
        assert_matters(name, logits, variants, 1e-3 if exact else 3e-4)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.remove(os.path.join(d, old))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    write_checkpoint(d, stored, 1)
    np.save(os.path.join(d, "input_ids.npy"), ids.numpy().astype("<i8"))
    np.save(os.path.join(d, "logits.npy"), logits.numpy().astype("<f4"))


# ------------------------------------------------------------------ safetensors writer

def raw_bytes(t):
    """Little-endian bytes of t (bf16 through its 16-bit pattern: numpy has
    no bfloat16)."""
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    return t.contiguous().numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        raw = raw_bytes(t)
        header[name] = {"dtype": SAFETENSORS_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_checkpoint(d, stored, shards):
    names = list(stored)
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), stored)
        return
    weight_map = {}
    per = (len(names) + shards - 1) // shards
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: stored[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(d, file), part)
        weight_map.update({n: file for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=1)


def write_case(out, name, extra, seed):
    c = dict(BASE, **extra)
    gen = torch.Generator().manual_seed(seed)
    dtype = TORCH_DTYPE[c.get("torch_dtype", "float32")]
    stored = {n: t.to(dtype) for n, t in make_weights(c, gen).items()}
    ids = torch.randint(0, c["vocab_size"], (B, T), generator=gen)
    logits = forward(c, {n: t.to(torch.float64) for n, t in stored.items()}, ids)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.remove(os.path.join(d, old))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    write_checkpoint(d, stored, 2 if "sharded" in name else 1)
    np.save(os.path.join(d, "input_ids.npy"), ids.numpy().astype("<i8"))
    np.save(os.path.join(d, "logits.npy"), logits.numpy().astype("<f4"))


# Cases added later keep their own seed, so the earlier ones keep theirs
# (mixtral's: no near-tie of the router's k-th and next expert).
FIXED_SEEDS = {"mixtral": 2003}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    numbered = sorted(n for n in CASES if n not in FIXED_SEEDS)
    for name, extra in sorted(CASES.items()):
        seed = FIXED_SEEDS.get(name, 1234 + numbered.index(name) if name in numbered else 0)
        write_case(sys.argv[1], name, extra, seed)
    for seed, (name, c) in enumerate(sorted(OTHER_CASES.items())):
        write_other_case(sys.argv[1], name, c, 5678 + seed)


if __name__ == "__main__":
    main()
