// DequantMatMul's block decoders (included by dequant.comp after
// common.glsl): each scheme of src/ir/quant.h, line by line, on bytes read
// from the arena's 32-bit words. The unit is a run of 16 consecutive
// elements of one W row starting at k0 (a multiple of 16): GGUF blocks hold
// whole runs (32 or 256 elements) and every K-quant scale covers 16 or 32
// elements, so a run shares its scales; the schemes with separate scales
// (any group size) decode element by element. Elements at k >= K are 0.
//
// Rounding as quant.h: every product and sum rounded to f32 in the order
// written; `precise` keeps the compiler from fusing them into an FMA.

// Set by the kernel's main() from the record.
uint dq_w;     // W's byte offset (4-aligned: the host checks)
uint dq_rb;    // bytes per W row
int dq_scheme, dq_group, dq_K, dq_gpr; // dq_gpr: groups per row (K / group)

const int DQ_SCALE = RLXVK_SLOT_IN0 + 2, DQ_AUX = RLXVK_SLOT_IN0 + 3;

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
// b: the block's first byte; e0: the run's first element inside the block.

void dq_q4_0(uint b, int e0, out float w[16]) {
  float d = qf16(b);
  uint sh = e0 == 0 ? 0u : 4u;
  [[dont_unroll]] for (int j = 0; j < 16; j++) w[j] = d * float(int((qb(b + 2u + uint(j)) >> sh) & 15u) - 8);
}

void dq_q4_1(uint b, int e0, out float w[16]) {
  float d = qf16(b), m = qf16(b + 2u);
  uint sh = e0 == 0 ? 0u : 4u;
  [[dont_unroll]] for (int j = 0; j < 16; j++) {
    precise float t = d * float((qb(b + 4u + uint(j)) >> sh) & 15u);
    precise float r = t + m;
    w[j] = r;
  }
}

// Q5_0 / Q5_1: fifth bit of element e is bit e of qh.
int dq_q5_code(uint qh, uint qs, int e0, int j) {
  uint sh = e0 == 0 ? 0u : 4u;
  return int(((qb(qs + uint(j)) >> sh) & 15u) | ((qh >> uint(e0 + j)) & 1u) << 4);
}

void dq_q5_0(uint b, int e0, out float w[16]) {
  float d = qf16(b);
  uint qh = qu32(b + 2u);
  [[dont_unroll]] for (int j = 0; j < 16; j++) w[j] = d * float(dq_q5_code(qh, b + 6u, e0, j) - 16);
}

void dq_q5_1(uint b, int e0, out float w[16]) {
  float d = qf16(b), m = qf16(b + 2u);
  uint qh = qu32(b + 4u);
  [[dont_unroll]] for (int j = 0; j < 16; j++) {
    precise float t = d * float(dq_q5_code(qh, b + 8u, e0, j));
    precise float r = t + m;
    w[j] = r;
  }
}

void dq_q8_0(uint b, int e0, out float w[16]) {
  float d = qf16(b);
  [[dont_unroll]] for (int j = 0; j < 16; j++) w[j] = float(qs8(b + 2u + uint(e0 + j))) * d;
}

// K-quants: e0 = 128 h + 32 s + 16 half.
void dq_q2_k(uint b, int e0, out float w[16]) {
  int h = e0 / 128, s = e0 % 128 / 32, hf = e0 % 32 / 16;
  float d = qf16(b + 80u), dmin = qf16(b + 82u);
  uint sc = qb(b + uint(8 * h + 2 * s + hf));
  precise float dl = d * float(sc & 15u);
  precise float ml = dmin * float(sc >> 4);
  uint q = b + 16u + uint(32 * h + 16 * hf);
  [[dont_unroll]] for (int j = 0; j < 16; j++) {
    precise float t = dl * float((qb(q + uint(j)) >> uint(2 * s)) & 3u);
    precise float r = t - ml;
    w[j] = r;
  }
}

// Q3_K's 6-bit scale i, minus 32.
int dq_q3k_scale(uint sc, int i) {
  int lo = int((qb(sc + uint(i % 8)) >> uint(4 * (i / 8))) & 15u);
  int hi = int((qb(sc + 8u + uint(i % 4)) >> uint(2 * (i / 4))) & 3u);
  return (lo | hi << 4) - 32;
}

void dq_q3_k(uint b, int e0, out float w[16]) {
  int h = e0 / 128, s = e0 % 128 / 32, hf = e0 % 32 / 16;
  float d = qf16(b + 108u);
  precise float dl = d * float(dq_q3k_scale(b + 96u, 8 * h + 2 * s + hf));
  uint q = b + 32u + uint(32 * h + 16 * hf), hm = b + uint(16 * hf);
  uint bit = uint(4 * h + s);
  [[dont_unroll]] for (int j = 0; j < 16; j++) {
    int v = int((qb(q + uint(j)) >> uint(2 * s)) & 3u) - (((qb(hm + uint(j)) >> bit) & 1u) != 0u ? 0 : 4);
    w[j] = dl * float(v);
  }
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block i (0..7).
ivec2 dq_k4_scale_min(uint s, int i) {
  if (i < 4) return ivec2(int(qb(s + uint(i)) & 63u), int(qb(s + uint(i + 4)) & 63u));
  uint a = qb(s + uint(i + 4)), lo = qb(s + uint(i - 4)), hi = qb(s + uint(i));
  return ivec2(int((a & 15u) | ((lo >> 2) & 0x30u)), int((a >> 4) | ((hi >> 2) & 0x30u)));
}

// qh == 0u: Q4_K (no fifth bit).
void dq_k4_k5(uint b, uint qh, uint qs, int e0, out float w[16]) {
  int i = e0 / 32, jj = e0 % 32;
  float d = qf16(b), dmin = qf16(b + 2u);
  ivec2 sm = dq_k4_scale_min(b + 4u, i);
  precise float ds = d * float(sm.x);
  precise float dm = dmin * float(sm.y);
  uint q = qs + uint(32 * (i / 2) + jj), sh = uint(4 * (i % 2));
  [[dont_unroll]] for (int j = 0; j < 16; j++) {
    uint code = (qb(q + uint(j)) >> sh) & 15u;
    if (qh != 0u) code |= ((qb(qh + uint(jj + j)) >> uint(i)) & 1u) << 4;
    precise float t = ds * float(code);
    precise float r = t - dm;
    w[j] = r;
  }
}

void dq_q6_k(uint b, int e0, out float w[16]) {
  int h = e0 / 128, s = e0 % 128 / 32, hf = e0 % 32 / 16;
  float d = qf16(b + 208u);
  precise float ds = d * float(qs8(b + 192u + uint(8 * h + 2 * s + hf)));
  uint lo = b + uint(64 * h + 32 * (s % 2) + 16 * hf), hi = b + 128u + uint(32 * h + 16 * hf);
  [[dont_unroll]] for (int j = 0; j < 16; j++) {
    int q = int((qb(lo + uint(j)) >> uint(4 * (s / 2))) & 15u) |
            int((qb(hi + uint(j)) >> uint(2 * s)) & 3u) << 4;
    w[j] = ds * float(q - 32);
  }
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

// Elements k0 .. k0 + 15 of W row n (k0 a multiple of 16), 0 past K.
void dq_run(uint n, int k0, out float w[16]) {
  if (dq_scheme <= RLX_QUANT_Q6_K) {
    // the block geometry comes from rlx_quant_table through the record
    int blk = PX(DQ_BLOCK), bb = PX(DQ_BLOCK_BYTES);
    uint b = dq_w + n * dq_rb + uint(k0 / blk * bb);
    int e0 = k0 % blk;
    switch (dq_scheme) {
      case RLX_QUANT_Q4_0: dq_q4_0(b, e0, w); return;
      case RLX_QUANT_Q4_1: dq_q4_1(b, e0, w); return;
      case RLX_QUANT_Q5_0: dq_q5_0(b, e0, w); return;
      case RLX_QUANT_Q5_1: dq_q5_1(b, e0, w); return;
      case RLX_QUANT_Q8_0: dq_q8_0(b, e0, w); return;
      case RLX_QUANT_Q2_K: dq_q2_k(b, e0, w); return;
      case RLX_QUANT_Q3_K: dq_q3_k(b, e0, w); return;
      case RLX_QUANT_Q4_K: dq_k4_k5(b, 0u, b + 16u, e0, w); return;
      case RLX_QUANT_Q5_K: dq_k4_k5(b, b + 16u, b + 48u, e0, w); return;
      default: dq_q6_k(b, e0, w); return;
    }
  }
  int g = -1, zero = 0;
  float scale = 0.0;
  [[dont_unroll]] for (int j = 0; j < 16; j++) {
    int k = k0 + j;
    w[j] = 0.0;
    if (k >= dq_K) continue;
    if (k / dq_group != g) {
      g = k / dq_group;
      scale = dq_scale(n, g, zero);
    }
    w[j] = dq_own(n, k, scale, zero);
  }
}
