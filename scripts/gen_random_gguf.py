#!/usr/bin/python3
"""A Llama-shaped GGUF file with random but valid weights, for benchmarks
(rlx bench, llama.cpp) where the values do not matter but the layout, the
types and the sizes do.

Quantized tensors are written directly as blocks: random codes (every bit
pattern of a code, a sub-block scale or a min is valid) and sane f16 block
scales, chosen so that a weight has a standard deviation near
1 / sqrt(in_features) (activations stay bounded through the layers), each
block's scale jittered by a random factor in [0.5, 1.5). No float weights
and no quantization pass, so an 8B file is mostly random bytes: numpy,
several worker processes, each tensor chunk written in place (pwrite) at
its offset in the file.

Block layouts (GGML's, as gguf-py and ggml document them), bytes per block:
  q8_0  34 = f16 d, 32 x int8                 w = d q
  q4_0  18 = f16 d, 16 bytes of nibbles       w = d (q - 8)
  q4_k 144 = f16 d, f16 dmin, 12 bytes of 6-bit scales / mins, 128 of nibbles
                                              w = d sc q - dmin m
  q6_k 210 = 128 low nibbles, 64 high 2-bit pairs, 16 x int8 scales, f16 d
                                              w = d sc (q - 32)
Types: f32, f16, q8_0, q4_0, q4_k (every matrix q4_k), q4_k_m (llama.cpp's
Q4_K_M mix: q4_k, with q6_k for output.weight and for attn_v / ffn_down
of the layers its rule gives more bits: the first and last eighth of the
layers and every third one between). Norms stay f32.

Vocab: byte-level BPE ("gpt2" model, "llama-bpe" pre-tokenizer): the 256
byte tokens (GPT-2's byte-to-unicode mapping), then merges of two byte
tokens and of a pair and a byte (letters and space first) up to the vocab
size less 256 (or 16 for small vocabs) special tokens: <|begin_of_text|>
(BOS), <|end_of_text|> (EOS), <|reserved_special_token_N|>.

usage: gen_random_gguf.py --preset tiny|1b|8b --type TYPE -o OUT.gguf
                          [--seed N] [--jobs N] [--layers N]
"""
import argparse
import multiprocessing
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GGUF_PY = os.path.join(os.path.dirname(HERE), "third_party", "llama.cpp", "gguf-py")
if not os.path.isdir(GGUF_PY):
    sys.exit("gen_random_gguf.py: third_party/llama.cpp/gguf-py is missing "
             "(run scripts/setup_llama.sh)")
sys.path.insert(0, GGUF_PY)

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

PRESETS = {
    # K of every matrix a multiple of 256 (the k-quants' block)
    "tiny": dict(hidden=256, ffn=768, layers=2, heads=4, kv_heads=2, vocab=512, ctx=2048),
    # Llama 3.2 1B's shapes (output.weight not tied)
    "1b": dict(hidden=2048, ffn=8192, layers=16, heads=32, kv_heads=8, vocab=128256, ctx=8192),
    # Llama 3 8B's shapes
    "8b": dict(hidden=4096, ffn=14336, layers=32, heads=32, kv_heads=8, vocab=128256, ctx=8192),
}
PRESETS["llama3-8b"] = PRESETS["8b"]
PRESETS["1b-ish"] = PRESETS["1b"]

# bytes and values per block; where the f16 scales sit
BLOCK = {Q.Q8_0: (34, 32), Q.Q4_0: (18, 32), Q.Q4_K: (144, 256), Q.Q6_K: (210, 256)}
FILE_TYPE = {
    "f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
    "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "q4_k": gguf.LlamaFileType.MOSTLY_Q4_K_S, "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M,
}
MATRIX_TYPE = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_k": Q.Q4_K,
               "q4_k_m": Q.Q4_K}
CHUNK_BYTES = 64 << 20  # one worker task


def more_bits(i, n):
    """llama.cpp's Q4_K_M rule for attn_v / ffn_down: q6_k for these layers."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_list(p, qtype):
    """(name, [rows, cols] (cols = in_features), ggml type) in file order."""
    h, f, hd = p["hidden"], p["ffn"], p["hidden"] // p["heads"]
    mat = MATRIX_TYPE[qtype]
    mix = qtype == "q4_k_m"
    out = [("token_embd.weight", [p["vocab"], h], mat)]
    for i in range(p["layers"]):
        hi = Q.Q6_K if mix and more_bits(i, p["layers"]) else mat
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", [h], Q.F32),
                (b + "attn_q.weight", [h, h], mat),
                (b + "attn_k.weight", [p["kv_heads"] * hd, h], mat),
                (b + "attn_v.weight", [p["kv_heads"] * hd, h], hi),
                (b + "attn_output.weight", [h, h], mat),
                (b + "ffn_norm.weight", [h], Q.F32),
                (b + "ffn_gate.weight", [f, h], mat),
                (b + "ffn_up.weight", [f, h], mat),
                (b + "ffn_down.weight", [h, f], hi)]
    out += [("output_norm.weight", [h], Q.F32),
            ("output.weight", [p["vocab"], h], Q.Q6_K if mix else mat)]
    return out


def row_bytes(cols, t):
    if t == Q.F32:
        return 4 * cols
    if t == Q.F16:
        return 2 * cols
    size, per = BLOCK[t]
    assert cols % per == 0, f"{cols} values per row is not a whole number of {t.name} blocks"
    return cols // per * size


def block_scales(rng, n, base):
    """n f16 scales: base times a factor in [0.5, 1.5), as raw bytes [n, 2]."""
    d = (base * (0.5 + rng.random(n, dtype=np.float32))).astype(np.float16)
    return d.view(np.uint8).reshape(n, 2)


def make_chunk(t, rows, cols, rng):
    """rows x cols weights of type t as the bytes the file holds."""
    std = 1.0 / np.sqrt(cols)
    if t in (Q.F32, Q.F16):
        # uniform with that standard deviation
        w = (rng.random((rows, cols), dtype=np.float32) - 0.5) * np.float32(std * np.sqrt(12.0))
        return (w if t == Q.F32 else w.astype(np.float16)).tobytes()
    size, per = BLOCK[t]
    n = rows * cols // per
    blocks = np.frombuffer(bytearray(rng.bytes(n * size)), np.uint8).reshape(n, size)
    if t == Q.Q8_0:  # int8 codes: standard deviation 73.9
        blocks[:, 0:2] = block_scales(rng, n, std / 73.9)
    elif t == Q.Q4_0:  # q - 8 in -8 .. 7: standard deviation 4.61
        blocks[:, 0:2] = block_scales(rng, n, std / 4.61)
    elif t == Q.Q4_K:
        # sc, m in 0 .. 63 (rms 36.4, mean 31.5), q in 0 .. 15 (std 4.61, mean 7.5):
        # dmin = 7.5 d centers the values on average
        d = 0.6 * std / (36.4 * 4.61)  # 0.6: the spread of the sub-block means
        blocks[:, 0:2] = block_scales(rng, n, d)
        blocks[:, 2:4] = block_scales(rng, n, 7.5 * d)
    elif t == Q.Q6_K:  # int8 sc (rms 73.9) times q - 32 in -32 .. 31 (std 18.5)
        blocks[:, 208:210] = block_scales(rng, n, std / (73.9 * 18.5))
    return blocks.tobytes()


def write_task(task):
    path, offset, t, rows, cols, seed = task
    data = make_chunk(t, rows, cols, np.random.default_rng(seed))
    fd = os.open(path, os.O_WRONLY)
    try:
        done = 0
        while done < len(data):
            done += os.pwrite(fd, memoryview(data)[done:], offset + done)
    finally:
        os.close(fd)
    return len(data)


def bytes_to_unicode():
    """GPT-2's byte-level BPE alphabet: printable bytes map to themselves,
    the others to code points from 256 up, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + \
        list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def make_vocab(n):
    """(tokens, types, merges, bos, eos) of a byte-level BPE vocab of n tokens."""
    n_special = 256 if n >= 4096 else 16
    assert n >= 256 + n_special, f"vocab {n} is smaller than the bytes and specials"
    u = bytes_to_unicode()
    first = [ord(" ")] + list(range(ord("a"), ord("z") + 1)) + \
        list(range(ord("A"), ord("Z") + 1)) + list(range(ord("0"), ord("9") + 1))
    order = first + [b for b in range(256) if b not in first]
    tokens = [u[b] for b in range(256)]
    merges = []
    seen = set(tokens)
    want = n - n_special
    pairs = ((u[a], u[b]) for a in order for b in order)
    triples = ((u[a] + u[b], u[c]) for a in order for b in order for c in order)
    for left, right in pairs if want > 256 else ():
        if len(tokens) >= want:
            break
        if left + right not in seen:
            tokens.append(left + right)
            seen.add(left + right)
            merges.append(f"{left} {right}")
    for left, right in triples if len(tokens) < want else ():
        if len(tokens) >= want:
            break
        if left + right not in seen:
            tokens.append(left + right)
            seen.add(left + right)
            merges.append(f"{left} {right}")
    types = [gguf.TokenType.NORMAL] * len(tokens)
    specials = ["<|begin_of_text|>", "<|end_of_text|>"] + \
        [f"<|reserved_special_token_{i}|>" for i in range(n_special - 2)]
    bos = len(tokens)
    tokens += specials
    types += [gguf.TokenType.CONTROL] * n_special
    return tokens, types, merges, bos, bos + 1


def add_metadata(wr, p, qtype, name):
    hd = p["hidden"] // p["heads"]
    wr.add_name(name)
    wr.add_file_type(FILE_TYPE[qtype])
    wr.add_context_length(p["ctx"])
    wr.add_embedding_length(p["hidden"])
    wr.add_block_count(p["layers"])
    wr.add_feed_forward_length(p["ffn"])
    wr.add_head_count(p["heads"])
    wr.add_head_count_kv(p["kv_heads"])
    wr.add_rope_dimension_count(hd)
    wr.add_rope_freq_base(500000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(p["vocab"])
    tokens, types, merges, bos, eos = make_vocab(p["vocab"])
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("llama-bpe")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    wr.add_bos_token_id(bos)
    wr.add_eos_token_id(eos)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", required=True, choices=sorted(PRESETS))
    ap.add_argument("--type", required=True, choices=sorted(FILE_TYPE))
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--layers", type=int, help="override the preset's layer count")
    a = ap.parse_args()
    p = dict(PRESETS[a.preset])
    if a.layers:
        p["layers"] = a.layers
    start = time.time()
    tensors = tensor_list(p, a.type)
    wr = gguf.GGUFWriter(a.output, "llama")
    add_metadata(wr, p, a.type, f"random {a.preset} {a.type}")
    for name, shape, t in tensors:
        rb = row_bytes(shape[-1], t)
        nbytes = rb * (shape[0] if len(shape) == 2 else 1)
        if t in (Q.F32, Q.F16):
            wr.add_tensor_info(name, shape, np.float32 if t == Q.F32 else np.float16, nbytes)
        else:  # gguf-py takes a quantized tensor's shape in bytes
            wr.add_tensor_info(name, [shape[0], rb], np.uint8, nbytes, raw_dtype=t)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_ti_data_to_file()
    wr.fout[0].flush()
    align = wr.data_alignment
    data_start = -(-wr.fout[0].tell() // align) * align
    wr.close()
    # the tensors' offsets as write_ti_data_to_file computed them: each padded to align
    tasks, offset = [], 0
    for i, (name, shape, t) in enumerate(tensors):
        rows = shape[0] if len(shape) == 2 else 1
        rb = row_bytes(shape[-1], t)
        if len(shape) == 1:  # norms: ones, as a trained model's start
            tasks.append((a.output, data_start + offset, "ones", 1, shape[0], 0))
        else:
            step = max(1, CHUNK_BYTES // rb)
            for c, r0 in enumerate(range(0, rows, step)):
                n = min(step, rows - r0)
                seed = [a.seed, i, c]
                tasks.append((a.output, data_start + offset + r0 * rb, t, n, shape[-1], seed))
        offset += -(-rows * rb // align) * align
    with open(a.output, "r+b") as f:
        f.truncate(data_start + offset)
    with open(a.output, "r+b") as f:  # the norms (small)
        for path, off, t, rows, cols, _ in tasks:
            if t == "ones":
                f.seek(off)
                f.write(np.ones(cols, np.float32).tobytes())
    work = [x for x in tasks if x[2] != "ones"]
    written = 0
    if a.jobs > 1:
        with multiprocessing.Pool(a.jobs) as pool:
            for n in pool.imap_unordered(write_task, work):
                written += n
    else:
        for x in work:
            written += write_task(x)
    size = data_start + offset
    print(f"gen_random_gguf: {a.output}: {a.preset} {a.type}, {len(tensors)} tensors, "
          f"{size / 2**30:.2f} GiB in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
