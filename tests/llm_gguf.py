#!/usr/bin/python3
"""Oracle for tests/test_llm_gguf.c: the seeded tiny Llama, Qwen2, Qwen3 (and
GPT-2 and Gemma-2, see OTHER_CASES) of
tests/llm_torch.py written as GGUF files with llama.cpp's gguf-py writer,
the way its converter (convert_hf_to_gguf.py) writes them: GGUF tensor
names, "{arch}.*" metadata keys, Llama's q / k rows permuted so that RoPE
pairs are adjacent, Llama 3.1 rope scaling as a rope_freqs.weight tensor.

Per case and weight type (f32, f16, q8_0, q4_0, q4_k) OUTDIR/<case>_<type>/
holds model.gguf, input_ids.npy (i64 [B, T]) and logits.npy (f32
[B, T, V]): llm_torch.py's float64 forward on the weights as the file
stores them, dequantized with gguf-py's own dequantize (the q / k rows
permuted back), so a quantized case checks the loader and DequantMatMul
against the same weights, not the quantization error.

gguf-py has no Q4_K quantizer: q4_k blocks are made here (a plain
min / scale fit per 32 elements; any valid block serves, the reference
dequantizes them with gguf-py). Norms, biases and rope_freqs stay f32, as
the converter keeps 1-D tensors.

usage: llm_gguf.py OUTDIR    (exits 77 without third_party/llama.cpp)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GGUF_PY = os.path.join(os.path.dirname(HERE), "third_party", "llama.cpp", "gguf-py")
if not os.path.isdir(GGUF_PY):
    print("llm_gguf.py: third_party/llama.cpp/gguf-py is missing", file=sys.stderr)
    sys.exit(77)
sys.path.insert(0, GGUF_PY)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import quants  # noqa: E402

import llm_torch  # noqa: E402

# head_dim 64 and every K a multiple of 256 (q4_k's block)
SIZES = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=128)
CASES = {
    "llama": dict(llm_torch.CASES["llama"], **SIZES),
    "qwen2": dict(llm_torch.CASES["qwen2"], **SIZES, torch_dtype="float32"),
    # q_norm / k_norm; head_dim 128 != hidden / heads (attention.key_length)
    "qwen3": dict(llm_torch.CASES["qwen3"], **SIZES, head_dim=128),
    # Mixtral as llama.cpp's converter writes it: arch llama with
    # expert_count / expert_used_count, each layer's experts stacked into
    # ffn_gate_exps / ffn_up_exps / ffn_down_exps [E, out, in] (quantized
    # per row like any Linear weight), the router ffn_gate_inp kept f32
    "mixtral": dict(llm_torch.CASES["mixtral"], **SIZES),
}
# Cases added later keep their own seed, so the earlier ones keep theirs.
FIXED_SEEDS = {"mixtral": 2000}
TYPES = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_k": Q.Q4_K}

LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
MODEL_NAMES = {"model.embed_tokens.weight": "token_embd.weight",
               "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def gguf_name(hf):
    if hf in MODEL_NAMES:
        return MODEL_NAMES[hf]
    _, _, layer, rest = hf.split(".", 3)
    return f"blk.{layer}.{LAYER_NAMES[rest]}"


def permute(w, heads):
    """The converter's Llama q / k permutation: each head's two halves
    interleaved, so that RoPE pairs are adjacent rows."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, heads):
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quantize_q4_k(w):
    """Rows of w (K a multiple of 256) as Q4_K blocks: per 32 elements a
    6-bit scale and min against the block's f16 d / dmin."""
    rows, k = w.shape
    sub = w.reshape(rows, k // 256, 8, 32).astype(np.float32)
    lo = np.minimum(sub.min(-1), 0.0)
    scale = (sub.max(-1) - lo) / 15.0
    d = (scale.max(-1) / 63.0).astype(np.float16)
    dmin = ((-lo).max(-1) / 63.0).astype(np.float16)
    df, dminf = d.astype(np.float32)[..., None], dmin.astype(np.float32)[..., None]
    sc = np.clip(np.round(np.divide(scale, df, out=np.zeros_like(scale), where=df > 0)), 0, 63)
    mn = np.clip(np.round(np.divide(-lo, dminf, out=np.zeros_like(lo), where=dminf > 0)), 0, 63)
    step = (df * sc)[..., None]
    q = np.round(np.divide(sub + (dminf * mn)[..., None], step, out=np.zeros_like(sub),
                           where=step > 0))
    q = np.clip(q, 0, 15).astype(np.uint8)
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    packed = np.zeros((rows, k // 256, 12), np.uint8)
    packed[..., 0:4] = (sc[..., 0:4] & 63) | ((sc[..., 4:8] >> 4) << 6)
    packed[..., 4:8] = (mn[..., 0:4] & 63) | ((mn[..., 4:8] >> 4) << 6)
    packed[..., 8:12] = (sc[..., 4:8] & 15) | ((mn[..., 4:8] & 15) << 4)
    # code of element e: nibble (e / 32) % 2 of qs[32 (e / 64) + e % 32]
    pairs = q.reshape(rows, k // 256, 4, 2, 32)
    qs = (pairs[:, :, :, 0, :] | (pairs[:, :, :, 1, :] << 4)).reshape(rows, k // 256, 128)
    blocks = np.concatenate([d[..., None].view(np.uint8), dmin[..., None].view(np.uint8),
                             packed, qs], axis=-1)
    return blocks.reshape(rows, k // 256 * 144)


def store(w, qtype):
    """(the array to write, its ggml type, the f32 values a reader gets)"""
    if w.ndim == 1 or qtype == Q.F32:
        w = w.astype(np.float32)
        return w, Q.F32, w
    if qtype == Q.F16:
        h = w.astype(np.float16)
        return h, Q.F16, h.astype(np.float32)
    data = quantize_q4_k(w) if qtype == Q.Q4_K else quants.quantize(w.astype(np.float32), qtype)
    return data, qtype, quants.dequantize(data, qtype).reshape(w.shape)


def add_metadata(wr, c, arch):
    wr.add_context_length(c["max_position_embeddings"])
    wr.add_embedding_length(c["hidden_size"])
    wr.add_block_count(c["num_hidden_layers"])
    wr.add_feed_forward_length(c["intermediate_size"])
    wr.add_head_count(c["num_attention_heads"])
    wr.add_head_count_kv(c["num_key_value_heads"])
    wr.add_rope_freq_base(c["rope_theta"])
    wr.add_layer_norm_rms_eps(c["rms_norm_eps"])
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    # No tokenizer, but llama.cpp's loader needs the key (tests/test_llama_oracle.c
    # runs these files there): "none" with vocab_size dummy tokens.
    wr.add_tokenizer_model("none")
    wr.add_vocab_size(c["vocab_size"])
    rs = c.get("rope_scaling") or {}
    if rs.get("type", rs.get("rope_type")) == "linear":
        wr.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        wr.add_rope_scaling_factor(rs["factor"])
    if c.get("head_dim"):
        wr.add_key_length(c["head_dim"])
        wr.add_value_length(c["head_dim"])
    if arch == "llama":
        wr.add_rope_dimension_count(llm_torch.head_dim(c))


def rope_divisors(c):
    """rope_freqs.weight as the converter computes it (f32) for llama3."""
    rs = c.get("rope_scaling") or {}
    if rs.get("rope_type") != "llama3":
        return None
    base = c["rope_theta"]
    hd = llm_torch.head_dim(c)
    plain = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    scaled = llm_torch.rope_frequencies(c)
    return (plain.double() / scaled).float().numpy()


def store_experts(wr, c, weights, qtype, reference, wrong_style):
    """Each MoE layer's experts as llama.cpp's converter writes them: HF
    experts.J.{w1, w3, w2} stacked into blk.N.ffn_{gate, up, down}_exps
    [E, out, in] (quantized along in, per row), the router
    block_sparse_moe.gate as blk.N.ffn_gate_inp (f32). Removes them from
    weights; reference gets each expert's values as a reader sees them."""
    E = c["num_local_experts"]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}.block_sparse_moe."
        gate = weights.pop(p + "gate.weight").numpy().astype(np.float32)
        wr.add_tensor(f"blk.{i}.ffn_gate_inp.weight", gate)
        reference[p + "gate.weight"] = wrong_style[p + "gate.weight"] = \
            torch.from_numpy(gate.astype(np.float64))
        for hf, gg in (("w1", "gate"), ("w3", "up"), ("w2", "down")):
            names = [p + f"experts.{j}.{hf}.weight" for j in range(E)]
            stacked = np.stack([weights.pop(n).numpy() for n in names])  # [E, out, in]
            rows = stacked.reshape(-1, stacked.shape[-1])
            data, qt, seen = store(rows, qtype)
            if qt not in (Q.F32, Q.F16):
                data = data.reshape(E, stacked.shape[1], -1)
            else:
                data = data.reshape(stacked.shape)
            wr.add_tensor(f"blk.{i}.ffn_{gg}_exps.weight", data,
                          raw_dtype=qt if qt not in (Q.F32, Q.F16) else None)
            seen = np.array(seen, np.float64).reshape(stacked.shape)
            for j, n in enumerate(names):
                reference[n] = wrong_style[n] = torch.from_numpy(seen[j])


def write_model_gguf(path, c, weights, qname):
    """Writes the HF-named float32 weights of config c (llm_torch's
    make_weights: Llama, Qwen2, Qwen3, Mixtral) to path as llama.cpp's
    converter would, every 2-D weight in type qname (f32, f16, q8_0, q4_0,
    q4_k); returns (reference, wrong_style): HF name -> float64 tensor of
    the values a reader of the file gets, q / k rows permuted back for the
    former, left as stored (read with NeoX halves) for the latter. Usable
    by any oracle (llama.cpp's own CPU library reads the same file)."""
    arch = c["model_type"]
    if arch == "mixtral":
        arch = "llama"
    weights = dict(weights)
    wr = gguf.GGUFWriter(path, arch)
    add_metadata(wr, c, arch)
    reference, wrong_style = {}, {}
    if c.get("num_local_experts"):
        wr.add_expert_count(c["num_local_experts"])
        wr.add_expert_used_count(c["num_experts_per_tok"])
        store_experts(wr, c, weights, TYPES[qname], reference, wrong_style)
    heads = {"q_proj": c["num_attention_heads"], "k_proj": c["num_key_value_heads"]}
    for hf, t in weights.items():
        w = t.numpy()
        kind = hf.split(".")[-2]
        permuted = arch == "llama" and kind in heads and hf.endswith("weight")
        if permuted:
            w = permute(w, heads[kind])
        data, qtype, seen = store(w, TYPES[qname])
        wr.add_tensor(gguf_name(hf), data, raw_dtype=qtype if qtype not in (Q.F32, Q.F16) else None)
        wrong_style[hf] = torch.from_numpy(np.array(seen, np.float64))
        reference[hf] = torch.from_numpy(
            np.array(unpermute(seen, heads[kind]) if permuted else seen, np.float64))
    divisors = rope_divisors(c)
    if divisors is not None:
        wr.add_tensor("rope_freqs.weight", divisors)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return reference, wrong_style


def write_case(out, name, qname, c, seed):
    arch = "llama" if c["model_type"] == "mixtral" else c["model_type"]
    gen = torch.Generator().manual_seed(seed)
    weights = llm_torch.make_weights(c, gen)
    ids = torch.randint(0, c["vocab_size"], (llm_torch.B, llm_torch.T), generator=gen)
    d = os.path.join(out, f"{name}_{qname}")
    os.makedirs(d, exist_ok=True)
    reference, wrong_style = write_model_gguf(os.path.join(d, "model.gguf"), c, weights, qname)
    logits = llm_torch.forward(c, reference, ids)
    if arch == "llama" and not c.get("num_local_experts"):  # NeoX halves must be wrong
        wrong = llm_torch.forward(c, wrong_style, ids)
        gap = float((wrong - logits).abs().max() / logits.abs().max())
        assert gap > 1e-2, f"{name}_{qname}: the RoPE style does not matter ({gap})"
    np.save(os.path.join(d, "input_ids.npy"), ids.numpy().astype("<i8"))
    np.save(os.path.join(d, "logits.npy"), logits.numpy().astype("<f4"))


# ------------------------------------------------------------------ GPT-2 and Gemma-2

# every Linear's K a multiple of 256 (q4_k); GPT-2's F is 4 * n_embd as the
# converter writes it; Gemma's head_dim (128) != hidden / heads (64), so the
# score scale llama.cpp uses (1 / sqrt(head_dim), no key in the file) shows
OTHER_CASES = {
    "gpt2": dict(llm_torch.GPT2_BASE, n_embd=256, vocab_size=128, n_positions=64, n_ctx=64),
    "gemma2": dict(llm_torch.GEMMA2_BASE, hidden_size=256, intermediate_size=512, head_dim=128,
                   vocab_size=128, query_pre_attn_scalar=128),
}
OTHER_TYPES = ("f32", "f16", "q8_0", "q4_k")


def gpt2_tensors(c, w):
    """GGUF name -> array ([out, in] Linears: the converter transposes
    Conv1D's [in, out]) and back: GGUF name -> (HF name, transposed)."""
    out, back = {}, {}

    def put(gguf_name, hf, transpose=False):
        t = w[hf].numpy()
        out[gguf_name] = t.T.copy() if transpose else t
        back[gguf_name] = (hf, transpose)

    put("token_embd.weight", "transformer.wte.weight")
    put("position_embd.weight", "transformer.wpe.weight")
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        for hf, g, transpose in (("ln_1", "attn_norm", False), ("attn.c_attn", "attn_qkv", True),
                                 ("attn.c_proj", "attn_output", True), ("ln_2", "ffn_norm", False),
                                 ("mlp.c_fc", "ffn_up", True), ("mlp.c_proj", "ffn_down", True)):
            put(f"blk.{i}.{g}.weight", p + hf + ".weight", transpose)
            put(f"blk.{i}.{g}.bias", p + hf + ".bias")
    put("output_norm.weight", "transformer.ln_f.weight")
    put("output_norm.bias", "transformer.ln_f.bias")
    return out, back


GEMMA2_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gemma2_tensors(c, w):
    """As gpt2_tensors; the converter stores every norm weight as 1 + w."""
    out, back = {}, {}
    for hf, t in w.items():
        if hf == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif hf == "model.norm.weight":
            g = "output_norm.weight"
        else:
            _, _, layer, rest = hf.split(".", 3)
            g = f"blk.{layer}.{GEMMA2_NAMES[rest]}"
        t = t.numpy()
        out[g] = t + np.float32(1.0) if hf.endswith("norm.weight") else t
        back[g] = (hf, False)
    return out, back


def add_other_metadata(wr, c):
    gpt2 = c["model_type"] == "gpt2"
    D = c["n_embd"] if gpt2 else c["hidden_size"]
    wr.add_context_length(c["n_ctx"] if gpt2 else c["max_position_embeddings"])
    wr.add_embedding_length(D)
    wr.add_block_count(c["n_layer"] if gpt2 else c["num_hidden_layers"])
    wr.add_feed_forward_length(4 * D if gpt2 else c["intermediate_size"])
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    if gpt2:
        wr.add_head_count(c["n_head"])
        wr.add_layer_norm_eps(c["layer_norm_epsilon"])
        return
    wr.add_head_count(c["num_attention_heads"])
    wr.add_head_count_kv(c["num_key_value_heads"])
    wr.add_layer_norm_rms_eps(c["rms_norm_eps"])
    wr.add_key_length(c["head_dim"])
    wr.add_value_length(c["head_dim"])
    wr.add_attn_logit_softcapping(c["attn_logit_softcapping"])
    wr.add_final_logit_softcapping(c["final_logit_softcapping"])
    wr.add_sliding_window(c["sliding_window"])


def write_other_case(out, name, qname, c, seed):
    arch = c["model_type"]
    gen = torch.Generator().manual_seed(seed)
    weights = (llm_torch.gpt2_weights(c, gen) if arch == "gpt2"
               else llm_torch.gemma2_weights(c, gen))
    ids = torch.randint(0, c["vocab_size"], (llm_torch.B, llm_torch.T), generator=gen)
    d = os.path.join(out, f"{name}_{qname}")
    os.makedirs(d, exist_ok=True)
    wr = gguf.GGUFWriter(os.path.join(d, "model.gguf"), arch)
    add_other_metadata(wr, c)
    tensors, back = (gpt2_tensors if arch == "gpt2" else gemma2_tensors)(c, weights)
    seen = {}
    for g, w in tensors.items():
        data, qtype, values = store(w, TYPES[qname])
        wr.add_tensor(g, data, raw_dtype=qtype if qtype not in (Q.F32, Q.F16) else None)
        hf, transposed = back[g]
        values = np.array(values, np.float64)
        seen[hf] = torch.from_numpy(values.T.copy() if transposed else values)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    if arch == "gpt2":
        logits = llm_torch.gpt2_forward(c, seen, ids)
    else:  # the file's norms hold 1 + w; llama.cpp scales by sqrtf(hidden) in f32
        scale = float(np.float32(np.sqrt(np.float32(c["hidden_size"]))))
        logits = llm_torch.gemma2_forward(c, seen, ids, 0.0, scale)
        variants = llm_torch.gemma2_variants(c, seen, ids, 0.0, scale)
        variants["hidden / heads as query_pre_attn_scalar"] = llm_torch.gemma2_forward(
            dict(c, query_pre_attn_scalar=c["hidden_size"] // c["num_attention_heads"]), seen,
            ids, 0.0, scale)
        llm_torch.assert_matters(f"{name}_{qname}", logits, variants)
    np.save(os.path.join(d, "input_ids.npy"), ids.numpy().astype("<i8"))
    np.save(os.path.join(d, "logits.npy"), logits.numpy().astype("<f4"))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    numbered = sorted(n for n in CASES if n not in FIXED_SEEDS)
    for name, c in sorted(CASES.items()):
        c = dict(llm_torch.BASE, **c)
        seed = FIXED_SEEDS[name] if name in FIXED_SEEDS else 4321 + numbered.index(name)
        for qname in TYPES:
            write_case(sys.argv[1], name, qname, c, seed)
    for seed, (name, c) in enumerate(sorted(OTHER_CASES.items())):
        for qname in OTHER_TYPES:
            write_other_case(sys.argv[1], name, qname, c, 8765 + seed)


if __name__ == "__main__":
    main()
