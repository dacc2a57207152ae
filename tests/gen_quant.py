"""Reference data for tests/test_quant.c (DequantMatMul's schemes).

    /usr/bin/python3 tests/gen_quant.py OUT_DIR

GGUF types: random blocks (random bytes, every f16 scale field replaced by a
finite value, a few of them subnormal) dequantized by gguf-py, the numpy
reference that ships with llama.cpp (third_party/llama.cpp/gguf-py).
Own schemes (Int8Block, Int4Block, FP8, NVFP4): random f32 weights
quantized by the numpy definitions below, written independently of the C
quantizer (src/ir/quant.c) from the rules stated in include/rlx.h; the test
requires both to agree bit for bit. Every case also gets x and
y = x @ dequant(W).T in float64.

Files per case NAME: NAME.w.npy (u8 [N, row_bytes]), NAME.wdq.npy (f32
[N, K]), NAME.x.npy (f32 [M, K]), NAME.y.npy (f64 [M, N]); own schemes add
NAME.src.npy (the f32 weights), NAME.scale.npy, NAME.zero.npy (ASYM),
NAME.global.npy (NVFP4). cases.txt lists "NAME SCHEME GROUP" lines.
Exit 77 (ctest's skip) when numpy or gguf-py is missing."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "third_party", "llama.cpp", "gguf-py"))
try:
    import numpy as np
    from gguf import quants
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
except ImportError as e:  # reported by the C test as a SKIP
    print(f"SKIP: {e}")
    sys.exit(77)

f32 = np.float32

# byte offsets of the f16 fields of each GGUF block (layouts: src/ir/quant.h)
GGUF = {
    "q4_0": (T.Q4_0, [0]), "q4_1": (T.Q4_1, [0, 2]), "q5_0": (T.Q5_0, [0]),
    "q5_1": (T.Q5_1, [0, 2]), "q8_0": (T.Q8_0, [0]), "q2_k": (T.Q2_K, [80, 82]),
    "q3_k": (T.Q3_K, [108]), "q4_k": (T.Q4_K, [0, 2]), "q5_k": (T.Q5_K, [0, 2]),
    "q6_k": (T.Q6_K, [208]),
}


def save(out, name, part, arr):
    np.save(os.path.join(out, f"{name}.{part}.npy"), arr)


def finite_f16(rng, n):
    """Scales of either sign, mostly 1e-3..1e-1, one in 8 subnormal (below 6.1e-5)."""
    mag = rng.uniform(1e-3, 1e-1, n)
    tiny = rng.random(n) < 0.125
    mag[tiny] = rng.uniform(1e-7, 6e-5, tiny.sum())
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float16)


def gguf_case(out, rng, name, qtype, fields, cases):
    block, bbytes = GGML_QUANT_SIZES[qtype]
    N, M, K = 5, 3, block * (2 if block == 256 else 4)
    nb = N * K // block
    blocks = rng.integers(0, 256, (nb, bbytes), dtype=np.uint8)
    for off in fields:
        blocks[:, off:off + 2] = finite_f16(rng, nb).view(np.uint8).reshape(nb, 2)
    w = blocks.reshape(N, K // block * bbytes)
    wdq = quants.dequantize(w, qtype).astype(f32)
    emit(out, rng, name, w, wdq, M)
    cases.append(f"{name} {name} 0")


def emit(out, rng, name, w, wdq, M):
    x = rng.uniform(-1, 1, (M, wdq.shape[1])).astype(f32)
    save(out, name, "w", w)
    save(out, name, "wdq", wdq)
    save(out, name, "x", x)
    save(out, name, "y", x.astype(np.float64) @ wdq.astype(np.float64).T)


# ---------------------------------------------------------------- own schemes

def f8_values(e_bits, m_bits, bias, max_code):
    """Values of the non-negative codes 0..max_code, ascending."""
    codes = np.arange(max_code + 1)
    e, m = codes >> m_bits, codes & ((1 << m_bits) - 1)
    sub = m * 2.0 ** (1 - bias - m_bits)
    norm = (m + (1 << m_bits)) * 2.0 ** (e - bias - m_bits)
    return np.where(e == 0, sub, norm)


E4M3 = f8_values(4, 3, 7, 0x7E)
E5M2 = f8_values(5, 2, 15, 0x7B)
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def nearest_code(table, a):
    """Index of the table value nearest to a >= 0, ties to the even index;
    beyond the table: its last index (saturation)."""
    hi = np.clip(np.searchsorted(table, a), 1, len(table) - 1)
    lo = hi - 1
    dl, dh = a - table[lo], table[hi] - a
    pick = np.where((dh < dl) | ((dh == dl) & (hi % 2 == 0)), hi, lo)
    return np.where(a >= table[-1], len(table) - 1, pick)


def f8_encode(table, v):
    """Round to nearest even, saturating; the sign bit kept for -0 and
    negatives that round to zero (as an IEEE-style encoder does)."""
    code = nearest_code(table, np.abs(v).astype(np.float64))
    return (code | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)


def f8_decode(table, codes):
    v = table[np.minimum(codes & 0x7F, len(table) - 1)]
    return np.where(codes & 0x80, -v, v).astype(f32)


def quant_int(w, g, bits, asym):
    N, K = w.shape
    wg = w.reshape(N, K // g, g)
    if asym:
        levels = f32(255 if bits == 8 else 15)
        lo = np.minimum(wg.min(axis=2), f32(0))
        hi = np.maximum(wg.max(axis=2), f32(0))
        s = ((hi - lo) / levels).astype(f32)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(s > 0, np.clip(np.rint(-lo / s), 0, levels), 0).astype(f32)
            q = np.where(s[..., None] > 0, np.rint(wg / s[..., None]), 0).astype(f32)
        q = np.clip(q + z[..., None], 0, levels)
        deq = (q - z[..., None]) * s[..., None]
        return q.astype(np.int64), s, z.astype(np.uint8), deq
    qmax = f32(127 if bits == 8 else 7)
    s = (np.abs(wg).max(axis=2) / qmax).astype(f32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s[..., None] > 0, np.rint(wg / s[..., None]), 0).astype(f32)
    q = np.clip(q, -127 if bits == 8 else -8, qmax)
    q = q + f32(0)  # rint gives -0 for small negatives; the stored code is the integer 0
    return q.astype(np.int64), s, None, (q * s[..., None]).astype(f32)


def quant_fp8(w, g, table, top):
    N, K = w.shape
    wg = w.reshape(N, K // g, g)
    s = (np.abs(wg).max(axis=2) / f32(top)).astype(f32)
    with np.errstate(divide="ignore", invalid="ignore"):
        codes = np.where(s[..., None] > 0, f8_encode(table, (wg / s[..., None]).astype(f32)), 0)
    codes = codes.astype(np.uint8)
    return codes, s, (f8_decode(table, codes) * s[..., None]).astype(f32)


def quant_nvfp4(w):
    N, K = w.shape
    wg = w.reshape(N, K // 16, 16)
    glob = (np.abs(w).max() / f32(448 * 6)).astype(f32)
    want = (np.abs(wg).max(axis=2) / f32(6) / glob).astype(f32)
    sc = f8_encode(E4M3, want)
    s = (f8_decode(E4M3, sc) * glob).astype(f32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(s[..., None] > 0, wg / s[..., None], 0).astype(f32)
    code = nearest_code(E2M1, np.abs(v).astype(np.float64))
    code = code | np.where((v < 0) & (code != 0), 8, 0)
    deq = (np.where(code & 8, -E2M1[code & 7], E2M1[code & 7]).astype(f32) * s[..., None])
    return code.astype(np.uint8), sc, glob, deq.astype(f32)


def pack_nibbles(codes):
    c = (codes.reshape(codes.shape[0], -1) & 15).astype(np.uint8)
    return c[:, 0::2] | (c[:, 1::2] << 4)


def own_case(out, rng, name, scheme, g, K, cases):
    N, M = 5, 3
    w = rng.normal(0, 0.5, (N, K)).astype(f32)
    w[1, :g] = 0  # an all-zero group: scale 0, codes 0
    extra = {}
    if scheme.startswith("int"):
        bits, asym = (8 if scheme.startswith("int8") else 4), scheme.endswith("asym")
        q, s, z, deq = quant_int(w, g, bits, asym)
        q = q.reshape(N, K)
        codes = (q & 0xFF).astype(np.uint8) if bits == 8 else pack_nibbles(q)
        extra["scale"] = s
        if asym:
            extra["zero"] = z
    elif scheme.startswith("fp8"):
        table, top = (E4M3, 448) if scheme == "fp8_e4m3" else (E5M2, 57344)
        codes, s, deq = quant_fp8(w, g, table, top)
        codes = codes.reshape(N, K)
        extra["scale"] = s
    else:
        q, sc, glob, deq = quant_nvfp4(w)
        codes = pack_nibbles(q)
        extra["scale"] = sc
        extra["global"] = np.array([glob], dtype=f32)
    save(out, name, "src", w)
    for part, arr in extra.items():
        save(out, name, part, arr)
    emit(out, rng, name, codes, deq.reshape(N, K).astype(f32), M)
    cases.append(f"{name} {scheme} {g}")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261125)
    cases = []
    for name, (qtype, fields) in GGUF.items():
        gguf_case(out, rng, name, qtype, fields, cases)
    for name, scheme, g, K in [
        ("int8_sym_g32", "int8_sym", 32, 128), ("int8_asym_g16", "int8_asym", 16, 96),
        ("int4_sym_g32", "int4_sym", 32, 128), ("int4_asym_g64", "int4_asym", 64, 128),
        ("fp8_e4m3_row", "fp8_e4m3", 96, 96), ("fp8_e5m2_g32", "fp8_e5m2", 32, 64),
        ("nvfp4", "nvfp4", 16, 128),
    ]:
        own_case(out, rng, name, scheme, g, K, cases)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(cases) + "\n")


if __name__ == "__main__":
    main()
