// DequantMatMul's block decoders (included after common.glsl by dequant.comp
// and grouped_dequant.comp, the one GLSL copy): each scheme of
// src/ir/quant.h, line by line, on bytes read from the arena's 32-bit words.
// The unit is a run of 16 consecutive elements of one W row starting at k0
// (a multiple of 16): GGUF blocks hold whole runs (32 or 256 elements) and
// every K-quant scale covers 16 or 32 elements, so a run shares its scales
// (dq_setup decodes them once, dq_elem each element); the schemes with
// separate scales (any group size) look the scale up per element. Elements
// at k >= K are 0.
//
// Rounding as quant.h: every product and sum rounded to f32 in the order
// written; `precise` keeps the compiler from fusing them into an FMA.

// Set by the kernel's main() from the record. A "row" is a stored row of W
// (the grouped kernel numbers them across experts: e * rows + i) and dq_K
// its elements.
uint dq_w;     // W's byte offset (4-aligned: the host checks)
uint dq_rb;    // bytes per W row
int dq_scheme, dq_group, dq_K, dq_gpr; // dq_gpr: groups per row (K / group)

// Slots of the scale and aux views: in2 and in3 for DequantMatMul; the
// grouped kernel (idx at in2) defines them as in3 and in4 before including.
#ifndef DQ_SLOT_SCALE
#define DQ_SLOT_SCALE (RLXVK_SLOT_IN0 + 2)
#define DQ_SLOT_AUX (RLXVK_SLOT_IN0 + 3)
#endif
const int DQ_SCALE = DQ_SLOT_SCALE, DQ_AUX = DQ_SLOT_AUX;

void dq_init() {
  dq_w = v_off(RLXVK_SLOT_IN0 + 1);
  dq_rb = uint(PX(DQ_ROW_BYTES));
  dq_scheme = PX(DQ_SCHEME);
  dq_group = PX(DQ_GROUP);
  dq_K = PX(DQ_K);
  dq_gpr = dq_K / dq_group;
}

// Byte a of the arena (W rows are not word-aligned inside: Q4_0 blocks are 18 B).
uint qb(uint a) { return (a32[a >> 2] >> ((a & 3u) << 3)) & 0xffu; }
int qs8(uint a) { return int(qb(a) << 24) >> 24; }
// f16 field at an even byte address (every GGUF scale field is).
float qf16(uint a) { return unpackHalf2x16((a32[a >> 2] >> ((a & 2u) << 3)) & 0xffffu).x; }
uint qu32(uint a) { return qb(a) | qb(a + 1u) << 8 | qb(a + 2u) << 16 | qb(a + 3u) << 24; }

// ------------------------------------------------------------ GGUF runs
// A run's shared part, decoded once (dq_setup), then each element on its
// own (dq_elem): no per-run arrays, which a CPU implementation keeps in
// memory, and no unrolled copies of every decoder.
struct DqRun {
  uint q;   // first byte of the run's low bits (own schemes: the row)
  uint h;   // Q5_0 / Q5_1: qh itself; Q3_K, Q5_K, Q6_K: first byte of the high bits
  uint sh;  // shift of the low bits
  uint hsh; // shift of the high bit(s)
  float a;  // the scale (d, d * sc)
  float b;  // the offset (m, dmin * m)
  int k0;   // the run's first element in the row (own schemes)
  uint n;   // the row (own schemes)
};

// Q3_K's 6-bit scale i, minus 32.
int dq_q3k_scale(uint sc, int i) {
  int lo = int((qb(sc + uint(i % 8)) >> uint(4 * (i / 8))) & 15u);
  int hi = int((qb(sc + 8u + uint(i % 4)) >> uint(2 * (i / 4))) & 3u);
  return (lo | hi << 4) - 32;
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block i (0..7).
ivec2 dq_k4_scale_min(uint s, int i) {
  if (i < 4) return ivec2(int(qb(s + uint(i)) & 63u), int(qb(s + uint(i + 4)) & 63u));
  uint a = qb(s + uint(i + 4)), lo = qb(s + uint(i - 4)), hi = qb(s + uint(i));
  return ivec2(int((a & 15u) | ((lo >> 2) & 0x30u)), int((a >> 4) | ((hi >> 2) & 0x30u)));
}

// The run of block b starting at element e0 (K-quants: e0 = 128 h + 32 s +
// 16 half, as quant.h walks them).
DqRun dq_setup_gguf(uint b, int e0) {
  DqRun r = DqRun(0u, 0u, e0 % 32 == 0 ? 0u : 4u, 0u, 0.0, 0.0, 0, 0u);
  int h = e0 / 128, s = e0 % 128 / 32, hf = e0 % 32 / 16;
  switch (dq_scheme) {
    case RLX_QUANT_Q4_0: r.q = b + 2u; r.a = qf16(b); break;
    case RLX_QUANT_Q4_1: r.q = b + 4u; r.a = qf16(b); r.b = qf16(b + 2u); break;
    case RLX_QUANT_Q5_0: r.q = b + 6u; r.h = qu32(b + 2u); r.hsh = uint(e0); r.a = qf16(b); break;
    case RLX_QUANT_Q5_1:
      r.q = b + 8u; r.h = qu32(b + 4u); r.hsh = uint(e0); r.a = qf16(b); r.b = qf16(b + 2u);
      break;
    case RLX_QUANT_Q8_0: r.q = b + 2u + uint(e0); r.a = qf16(b); break;
    case RLX_QUANT_Q2_K: {
      uint sc = qb(b + uint(8 * h + 2 * s + hf));
      r.q = b + 16u + uint(32 * h + 16 * hf);
      r.sh = uint(2 * s);
      precise float dl = qf16(b + 80u) * float(sc & 15u);
      precise float ml = qf16(b + 82u) * float(sc >> 4);
      r.a = dl;
      r.b = ml;
      break;
    }
    case RLX_QUANT_Q3_K:
      r.q = b + 32u + uint(32 * h + 16 * hf);
      r.h = b + uint(16 * hf);
      r.sh = uint(2 * s);
      r.hsh = uint(4 * h + s);
      r.a = qf16(b + 108u) * float(dq_q3k_scale(b + 96u, 8 * h + 2 * s + hf));
      break;
    case RLX_QUANT_Q4_K:
    case RLX_QUANT_Q5_K: {
      int i = e0 / 32, jj = e0 % 32;
      ivec2 sm = dq_k4_scale_min(b + 4u, i);
      uint qs = dq_scheme == RLX_QUANT_Q4_K ? b + 16u : b + 48u;
      r.q = qs + uint(32 * (i / 2) + jj);
      r.sh = uint(4 * (i % 2));
      r.h = b + 16u + uint(jj);
      r.hsh = uint(i);
      precise float ds = qf16(b) * float(sm.x);
      precise float dm = qf16(b + 2u) * float(sm.y);
      r.a = ds;
      r.b = dm;
      break;
    }
    default: // Q6_K
      r.q = b + uint(64 * h + 32 * (s % 2) + 16 * hf);
      r.h = b + 128u + uint(32 * h + 16 * hf);
      r.sh = uint(4 * (s / 2));
      r.hsh = uint(2 * s);
      r.a = qf16(b + 208u) * float(qs8(b + 192u + uint(8 * h + 2 * s + hf)));
      break;
  }
  return r;
}

// Element j (0..15) of a GGUF run.
float dq_elem_gguf(DqRun r, uint j) {
  uint lo = qb(r.q + j);
  switch (dq_scheme) {
    case RLX_QUANT_Q4_0: return r.a * float(int((lo >> r.sh) & 15u) - 8);
    case RLX_QUANT_Q5_0:
      return r.a * float(int(((lo >> r.sh) & 15u) | ((r.h >> (r.hsh + j)) & 1u) << 4) - 16);
    case RLX_QUANT_Q8_0: return float(int(lo << 24) >> 24) * r.a;
    case RLX_QUANT_Q3_K: {
      int v = int((lo >> r.sh) & 3u) - (((qb(r.h + j) >> r.hsh) & 1u) != 0u ? 0 : 4);
      return r.a * float(v);
    }
    case RLX_QUANT_Q6_K: {
      uint q = ((lo >> r.sh) & 15u) | ((qb(r.h + j) >> r.hsh) & 3u) << 4;
      return r.a * float(int(q) - 32);
    }
  }
  uint code; // the schemes computing t = a * code, then t + b or t - b
  if (dq_scheme == RLX_QUANT_Q2_K) code = (lo >> r.sh) & 3u;
  else if (dq_scheme == RLX_QUANT_Q5_1) code = ((lo >> r.sh) & 15u) | ((r.h >> (r.hsh + j)) & 1u) << 4;
  else if (dq_scheme == RLX_QUANT_Q5_K) code = ((lo >> r.sh) & 15u) | ((qb(r.h + j) >> r.hsh) & 1u) << 4;
  else code = (lo >> r.sh) & 15u; // Q4_1, Q4_K
  precise float t = r.a * float(code);
  precise float w = dq_scheme == RLX_QUANT_Q4_1 || dq_scheme == RLX_QUANT_Q5_1 ? t + r.b : t - r.b;
  return w;
}

// ------------------------------------------------------------ own schemes

// E2M1 code -> value (NVFP4 elements).
float dq_e2m1(uint c) {
  const float mag[8] = float[8](0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0);
  return (c & 8u) != 0u ? -mag[c & 7u] : mag[c & 7u];
}

// Group g of row n: its effective scale (NVFP4: E4M3 code times the global
// scale, rounded to f32) and zero point.
float dq_scale(uint n, int g, out int zero) {
  int at = int(n) * dq_gpr + g;
  zero = 0;
  if (PX(DQ_HAS_SCALE) == 0) return 1.0;
  float sv = ld_f(v_dt(DQ_SCALE), v_off(DQ_SCALE), at);
  if (dq_scheme == RLX_QUANT_NVFP4) {
    float global = PX(DQ_HAS_AUX) != 0 ? ld_f(v_dt(DQ_AUX), v_off(DQ_AUX), 0) : 1.0;
    precise float s = f8_to_f32(RLX_F8E4M3FN, uint(sv)) * global;
    return s;
  }
  if (PX(DQ_HAS_AUX) != 0) zero = int(ld_f(v_dt(DQ_AUX), v_off(DQ_AUX), at));
  return sv;
}

// Element k of row n (k < K) for the separate-scale schemes.
float dq_own(uint n, int k, float scale, int zero) {
  uint row = dq_w + n * dq_rb;
  switch (dq_scheme) {
    case RLX_QUANT_INT8_SYM: return float(qs8(row + uint(k))) * scale;
    case RLX_QUANT_INT8_ASYM: return float(int(qb(row + uint(k))) - zero) * scale;
    case RLX_QUANT_FP8_E4M3: return f8_to_f32(RLX_F8E4M3FN, qb(row + uint(k))) * scale;
    case RLX_QUANT_FP8_E5M2: return f8_to_f32(RLX_F8E5M2, qb(row + uint(k))) * scale;
  }
  uint nib = (qb(row + uint(k / 2)) >> uint(4 * (k & 1))) & 15u;
  if (dq_scheme == RLX_QUANT_INT4_SYM) return float(int(nib ^ 8u) - 8) * scale;
  if (dq_scheme == RLX_QUANT_INT4_ASYM) return float(int(nib) - zero) * scale;
  return dq_e2m1(nib) * scale; // NVFP4
}

// ------------------------------------------------------------ one run

// The run of W row n starting at k0 (a multiple of 16).
DqRun dq_setup(uint n, int k0) {
  if (dq_scheme <= RLX_QUANT_Q6_K) {
    // the block geometry comes from rlx_quant_table through the record
    int blk = PX(DQ_BLOCK);
    return dq_setup_gguf(dq_w + n * dq_rb + uint(k0 / blk * PX(DQ_BLOCK_BYTES)), k0 % blk);
  }
  return DqRun(0u, 0u, 0u, 0u, 0.0, 0.0, k0, n);
}

// Element k0 + j of the run (0 past K). The separate-scale schemes look
// their group's scale up per element (a cached load).
float dq_elem(DqRun r, uint j) {
  if (dq_scheme <= RLX_QUANT_Q6_K) return dq_elem_gguf(r, j);
  int k = r.k0 + int(j), zero;
  if (k >= dq_K) return 0.0;
  float scale = dq_scale(r.n, k / dq_group, zero);
  return dq_own(r.n, k, scale, zero);
}
