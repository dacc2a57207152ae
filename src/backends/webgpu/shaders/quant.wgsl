// The block decoders of DequantMatMul and DequantGroupedMatMul, the one
// WGSL copy (wg_context.c prepends this file to dequant.wgsl and
// grouped_dequant.wgsl). They mirror src/ir/quant.h line by line (and the
// Vulkan backend's quant.glsl). WGSL has no byte loads: bytes are extracted
// from the arena's u32 words (ld_u8), since blocks start at any byte of a
// row (Q4_0 blocks are 18 bytes); f16 scale fields sit at even addresses.
//
// The unit is a run of 16 consecutive elements of one W row (k0 a multiple
// of 16): GGUF blocks hold whole runs and each K-quant scale covers 16 or 32
// elements, so a run shares its scales (dq_setup decodes them once, dq_elem
// each element); the separate-scale schemes (any group) look the scale up
// per element. Elements at k >= K are 0. Every product and sum is rounded
// to f32 in quant.h's order (separate statements).

// A "row" is a stored row of W (the grouped kernels number them across
// experts: e * rows + i) and dq_K its elements.
var<private> dq_w: u32;   // W's byte offset in the window (4-aligned: host checks)
var<private> dq_rb: u32;  // bytes per W row
var<private> dq_scheme: i32;
var<private> dq_group: u32;
var<private> dq_K: u32;
var<private> dq_gpr: u32; // groups per row
var<private> dq_xdt: u32;
var<private> dq_xoff: u32;
var<private> dq_scale_slot: u32; // slot of the scale view (aux: the next slot)
var<private> dq_aux_slot: u32;

// From the record's DequantMatMul words (DQ_*); x is in0 (slot 2), W in1
// (slot 3) in both ops, the scale at `scale_slot` (DequantMatMul: in2,
// slot 4; the grouped op: in3, slot 5) and aux after it.
fn dq_init(scale_slot: u32) {
  dq_w = v_off(3u);
  dq_rb = pxu(DQ_ROW_BYTES);
  dq_scheme = px(DQ_SCHEME);
  dq_group = pxu(DQ_GROUP);
  dq_K = pxu(DQ_K);
  dq_gpr = dq_K / dq_group;
  dq_xdt = v_dt(2u);
  dq_xoff = v_off(2u);
  dq_scale_slot = scale_slot;
  dq_aux_slot = scale_slot + 1u;
}

fn qs8(a: u32) -> i32 { return bitcast<i32>(ld_u8(a) << 24u) >> 24u; }
fn qf16(a: u32) -> f32 { return f16_to_f32(ld_u16(a)); }
fn qu32(a: u32) -> u32 {
  return ld_u8(a) | (ld_u8(a + 1u) << 8u) | (ld_u8(a + 2u) << 16u) | (ld_u8(a + 3u) << 24u);
}

// ------------------------------------------------------------ GGUF runs
// A run's shared part is decoded once (dq_setup), then each element on its
// own (dq_elem): no per-run arrays and no unrolled copies of every decoder
// (lavapipe's pipeline compile time grows with both).
struct DqRun {
  q: u32,   // first byte of the run's low bits
  h: u32,   // Q5_0 / Q5_1: qh itself; Q3_K, Q5_K, Q6_K: first byte of the high bits
  sh: u32,  // shift of the low bits
  hsh: u32, // shift of the high bit(s)
  a: f32,   // the scale (d, d * sc)
  b: f32,   // the offset (m, dmin * m)
  k0: u32,  // the run's first element in the row (own schemes)
  n: u32,   // the row (own schemes)
}

// Q3_K's 6-bit scale i, minus 32.
fn dq_q3k_scale(sc: u32, i: u32) -> i32 {
  let lo = (ld_u8(sc + i % 8u) >> (4u * (i / 8u))) & 15u;
  let hi = (ld_u8(sc + 8u + i % 4u) >> (2u * (i / 4u))) & 3u;
  return i32(lo | (hi << 4u)) - 32;
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block i (0..7).
fn dq_k4_scale_min(s: u32, i: u32) -> vec2<u32> {
  if (i < 4u) { return vec2<u32>(ld_u8(s + i) & 63u, ld_u8(s + i + 4u) & 63u); }
  let a = ld_u8(s + i + 4u);
  let lo = ld_u8(s + i - 4u);
  let hi = ld_u8(s + i);
  return vec2<u32>((a & 15u) | ((lo >> 2u) & 0x30u), (a >> 4u) | ((hi >> 2u) & 0x30u));
}

// The run of block b starting at element e0 (K-quants: e0 = 128 h + 32 s +
// 16 half, as quant.h walks them).
fn dq_setup_gguf(b: u32, e0: u32) -> DqRun {
  var r = DqRun(0u, 0u, select(4u, 0u, e0 % 32u == 0u), 0u, 0.0, 0.0, 0u, 0u);
  let h = e0 / 128u; let s = e0 % 128u / 32u; let hf = e0 % 32u / 16u;
  switch (dq_scheme) {
    case RLX_QUANT_Q4_0: { r.q = b + 2u; r.a = qf16(b); }
    case RLX_QUANT_Q4_1: { r.q = b + 4u; r.a = qf16(b); r.b = qf16(b + 2u); }
    case RLX_QUANT_Q5_0: { r.q = b + 6u; r.h = qu32(b + 2u); r.hsh = e0; r.a = qf16(b); }
    case RLX_QUANT_Q5_1: {
      r.q = b + 8u; r.h = qu32(b + 4u); r.hsh = e0; r.a = qf16(b); r.b = qf16(b + 2u);
    }
    case RLX_QUANT_Q8_0: { r.q = b + 2u + e0; r.a = qf16(b); }
    case RLX_QUANT_Q2_K: {
      let sc = ld_u8(b + 8u * h + 2u * s + hf);
      r.q = b + 16u + 32u * h + 16u * hf;
      r.sh = 2u * s;
      r.a = qf16(b + 80u) * f32(sc & 15u);
      r.b = qf16(b + 82u) * f32(sc >> 4u);
    }
    case RLX_QUANT_Q3_K: {
      r.q = b + 32u + 32u * h + 16u * hf;
      r.h = b + 16u * hf;
      r.sh = 2u * s;
      r.hsh = 4u * h + s;
      r.a = qf16(b + 108u) * f32(dq_q3k_scale(b + 96u, 8u * h + 2u * s + hf));
    }
    case RLX_QUANT_Q4_K, RLX_QUANT_Q5_K: {
      let i = e0 / 32u; let jj = e0 % 32u;
      let sm = dq_k4_scale_min(b + 4u, i);
      let qs = select(b + 48u, b + 16u, dq_scheme == RLX_QUANT_Q4_K);
      r.q = qs + 32u * (i / 2u) + jj;
      r.sh = 4u * (i % 2u);
      r.h = b + 16u + jj;
      r.hsh = i;
      r.a = qf16(b) * f32(sm.x);
      r.b = qf16(b + 2u) * f32(sm.y);
    }
    default: { // Q6_K
      r.q = b + 64u * h + 32u * (s % 2u) + 16u * hf;
      r.h = b + 128u + 32u * h + 16u * hf;
      r.sh = 4u * (s / 2u);
      r.hsh = 2u * s;
      r.a = qf16(b + 208u) * f32(qs8(b + 192u + 8u * h + 2u * s + hf));
    }
  }
  return r;
}

// Element j (0..15) of a GGUF run.
fn dq_elem_gguf(r: DqRun, j: u32) -> f32 {
  let lo = ld_u8(r.q + j);
  switch (dq_scheme) {
    case RLX_QUANT_Q4_0: { return r.a * f32(i32((lo >> r.sh) & 15u) - 8); }
    case RLX_QUANT_Q5_0: {
      return r.a * f32(i32(((lo >> r.sh) & 15u) | (((r.h >> (r.hsh + j)) & 1u) << 4u)) - 16);
    }
    case RLX_QUANT_Q8_0: { return f32(bitcast<i32>(lo << 24u) >> 24u) * r.a; }
    case RLX_QUANT_Q3_K: {
      let v = i32((lo >> r.sh) & 3u) - select(4, 0, ((ld_u8(r.h + j) >> r.hsh) & 1u) != 0u);
      return r.a * f32(v);
    }
    case RLX_QUANT_Q6_K: {
      let q = ((lo >> r.sh) & 15u) | (((ld_u8(r.h + j) >> r.hsh) & 3u) << 4u);
      return r.a * f32(i32(q) - 32);
    }
    default: {}
  }
  // the schemes computing t = a * code, then t + b or t - b
  var code = (lo >> r.sh) & 15u; // Q4_1, Q4_K
  if (dq_scheme == RLX_QUANT_Q2_K) { code = (lo >> r.sh) & 3u; }
  if (dq_scheme == RLX_QUANT_Q5_1) { code = code | (((r.h >> (r.hsh + j)) & 1u) << 4u); }
  if (dq_scheme == RLX_QUANT_Q5_K) { code = code | (((ld_u8(r.h + j) >> r.hsh) & 1u) << 4u); }
  let t = r.a * f32(code);
  if (dq_scheme == RLX_QUANT_Q4_1 || dq_scheme == RLX_QUANT_Q5_1) { return t + r.b; }
  return t - r.b;
}

// ------------------------------------------------------------ own schemes

// float8 code -> value, exact (base/scalar_math.h's decoder): E4M3FN
// (bias 7, no inf, 0x7f NaN) or E5M2 (bias 15, IEEE-like inf / NaN).
fn dq_f8(code: u32, e5m2: bool) -> f32 {
  let mb = select(3u, 2u, e5m2);
  let bias = select(7, 15, e5m2);
  let mag = code & 0x7fu;
  let e = i32(mag >> mb);
  let m = mag & ((1u << mb) - 1u);
  let neg = (code & 0x80u) != 0u;
  if (!e5m2 && mag == 0x7fu) { return nan_f(); }
  if (e5m2 && e == 31) {
    if (m != 0u) { return nan_f(); }
    return select(inf_f(), -inf_f(), neg);
  }
  var v: f32;
  if (e == 0) { v = ldexp(f32(m), 1 - bias - i32(mb)); }
  else { v = ldexp(f32(m + (1u << mb)), e - bias - i32(mb)); }
  return select(v, -v, neg);
}

// E2M1 code (NVFP4 element) -> value.
fn dq_e2m1(c: u32) -> f32 {
  var mag = array<f32, 8>(0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0);
  let v = mag[c & 7u];
  return select(v, -v, (c & 8u) != 0u);
}

struct DqScale { scale: f32, zero: i32 }

// Group g of row n: its effective scale (NVFP4: the E4M3 code's value
// times the global scale, rounded to f32) and zero point.
fn dq_scale(n: u32, g: u32) -> DqScale {
  let at = i32(n * dq_gpr + g);
  var r = DqScale(1.0, 0);
  if (px(DQ_HAS_SCALE) == 0) { return r; }
  let sv = ld_f(v_dt(dq_scale_slot), v_off(dq_scale_slot), at);
  if (dq_scheme == RLX_QUANT_NVFP4) {
    var global = 1.0;
    if (px(DQ_HAS_AUX) != 0) { global = ld_f(v_dt(dq_aux_slot), v_off(dq_aux_slot), 0); }
    r.scale = dq_f8(u32(sv), false) * global;
    return r;
  }
  r.scale = sv;
  if (px(DQ_HAS_AUX) != 0) { r.zero = i32(ld_f(v_dt(dq_aux_slot), v_off(dq_aux_slot), at)); }
  return r;
}

// Element k (< K) of row n, a separate-scale scheme.
fn dq_own(n: u32, k: u32, s: DqScale) -> f32 {
  let row = dq_w + n * dq_rb;
  switch (dq_scheme) {
    case RLX_QUANT_INT8_SYM: { return f32(qs8(row + k)) * s.scale; }
    case RLX_QUANT_INT8_ASYM: { return f32(i32(ld_u8(row + k)) - s.zero) * s.scale; }
    case RLX_QUANT_FP8_E4M3: { return dq_f8(ld_u8(row + k), false) * s.scale; }
    case RLX_QUANT_FP8_E5M2: { return dq_f8(ld_u8(row + k), true) * s.scale; }
    default: {}
  }
  let nib = (ld_u8(row + k / 2u) >> (4u * (k & 1u))) & 15u;
  if (dq_scheme == RLX_QUANT_INT4_SYM) { return f32(i32(nib ^ 8u) - 8) * s.scale; }
  if (dq_scheme == RLX_QUANT_INT4_ASYM) { return f32(i32(nib) - s.zero) * s.scale; }
  return dq_e2m1(nib) * s.scale; // NVFP4
}

// ------------------------------------------------------------ one run

// The run of W row n starting at k0 (a multiple of 16).
fn dq_setup(n: u32, k0: u32) -> DqRun {
  if (dq_scheme <= RLX_QUANT_Q6_K) {
    // the block geometry comes from rlx_quant_table through the record
    let blk = pxu(DQ_BLOCK);
    return dq_setup_gguf(dq_w + n * dq_rb + k0 / blk * pxu(DQ_BLOCK_BYTES), k0 % blk);
  }
  return DqRun(0u, 0u, 0u, 0u, 0.0, 0.0, k0, n);
}

// Element k0 + j of the run (0 past K); the separate-scale schemes look
// their group's scale up per element.
fn dq_elem(r: DqRun, j: u32) -> f32 {
  if (dq_scheme <= RLX_QUANT_Q6_K) { return dq_elem_gguf(r, j); }
  let k = r.k0 + j;
  if (k >= dq_K) { return 0.0; }
  return dq_own(r.n, k, dq_scale(r.n, k / dq_group));
}
