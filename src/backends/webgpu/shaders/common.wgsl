// Shared by every rlx WGSL kernel (the host prepends the arena binding with
// its word accessors lw/sw/sw_part, the record-layout constants, and
// `enable` lines; then this file; then the kernel). Elements are addressed by
// byte offsets into the bound arena window held in u32: negative (reversed)
// strides wrap and come out right. Conversions are integer code that matches
// the CPU reference bit for bit (round-to-nearest-even f16/bf16, saturating
// float->int), not the driver's conversions, which WGSL leaves loose.
//
// 64-bit integers are vec2<u32> (x = low word, y = high word).

@group(0) @binding(1) var<storage, read> P: array<u32>;
@group(0) @binding(2) var<storage, read_write> RUN: array<atomic<u32>, 8>;

fn pu(i: u32) -> u32 { return P[i]; }
fn pi(i: u32) -> i32 { return bitcast<i32>(P[i]); }
fn pf(i: u32) -> f32 { return bitcast<f32>(P[i]); }
fn px(i: u32) -> i32 { return pi(R_X + i); }
fn pxu(i: u32) -> u32 { return pu(R_X + i); }

fn vw(slot: u32, field: u32) -> u32 { return P[R_VIEW0 + slot * R_VIEW_WORDS + field]; }
fn v_off(slot: u32) -> u32 { return vw(slot, 0u); }
fn v_dt(slot: u32) -> u32 { return vw(slot, 1u); }
fn v_rank(slot: u32) -> i32 { return bitcast<i32>(vw(slot, 2u)); }
fn v_shape(slot: u32, d: u32) -> u32 { return vw(slot, 3u + d); }
fn v_stride(slot: u32, d: u32) -> i32 { return bitcast<i32>(vw(slot, 11u + d)); }

fn inf_f() -> f32 { return bitcast<f32>(P[R_INF]); }
fn nan_f() -> f32 { return bitcast<f32>(P[R_NAN]); }
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }

// Linear workgroup index over the 2-D grid the host sized.
fn group_linear(wid: vec3<u32>) -> u32 { return wid.y * P[R_GROUPS_X] + wid.x; }

fn is_intlike(dt: u32) -> bool { return dt >= DT_I8; }
fn dt_size(dt: u32) -> u32 {
  if (dt == DT_F16 || dt == DT_BF16) { return 2u; }
  if (dt == DT_F64 || dt == DT_I64) { return 8u; }
  if (dt == DT_I8 || dt == DT_U8 || dt == DT_BOOL) { return 1u; }
  return 4u;
}

// ------------------------------------------------------------ 64-bit ints

fn i64_from_i32(v: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0)); }
fn i64_neg(a: vec2<u32>) -> vec2<u32> {
  let lo = ~a.x + 1u;
  return vec2<u32>(lo, ~a.y + select(0u, 1u, lo == 0u));
}
fn i64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn i64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return i64_add(a, i64_neg(b)); }
// Full 32x32 -> 64 product.
fn mul32_wide(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0; let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  let lo = (p00 & 0xffffu) | (mid << 16u);
  let hi = p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
  return vec2<u32>(lo, hi);
}
fn i64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let w = mul32_wide(a.x, b.x);
  return vec2<u32>(w.x, w.y + a.x * b.y + a.y * b.x);
}
fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
  let ah = bitcast<i32>(a.y); let bh = bitcast<i32>(b.y);
  return ah < bh || (ah == bh && a.x < b.x);
}
fn i64_is_neg(a: vec2<u32>) -> bool { return bitcast<i32>(a.y) < 0; }
// Exact when it fits an i32 (callers check ranges first).
fn i64_low_i32(a: vec2<u32>) -> i32 { return bitcast<i32>(a.x); }
fn i64_fits_i32(a: vec2<u32>) -> bool { return a.y == select(0u, 0xffffffffu, bitcast<i32>(a.x) < 0); }
fn i64_to_f32(a: vec2<u32>) -> f32 {
  if (i64_fits_i32(a)) { return f32(bitcast<i32>(a.x)); }
  return f32(bitcast<i32>(a.y)) * 4294967296.0 + f32(a.x);
}
// Saturating truncation toward zero, NaN -> 0 (rlx_store_f64's rule).
fn f32_to_i64(v: f32) -> vec2<u32> {
  if (is_nan(v)) { return vec2<u32>(0u, 0u); }
  let a = abs(v);
  if (a < 2147483648.0) { return i64_from_i32(i32(v)); }
  if (v >= 9223372036854774784.0) { return vec2<u32>(0xfffffc00u, 0x7fffffffu); }
  if (v <= -9223372036854775808.0) { return vec2<u32>(0u, 0x80000000u); }
  let bits = bitcast<u32>(a);
  let e = (bits >> 23u) & 0xffu; // >= 158: a >= 2^31
  let m = (bits & 0x7fffffu) | 0x800000u;
  let sh = e - 150u; // a = m << sh, sh in [8, 40)
  var r: vec2<u32>;
  if (sh >= 32u) { r = vec2<u32>(0u, m << (sh - 32u)); }
  else { r = vec2<u32>(m << sh, m >> (32u - sh)); }
  return select(r, i64_neg(r), v < 0.0);
}

// ------------------------------------------------------------ float formats

// Integer form; f16_to_f32 (host prelude) uses shader-f16 when enabled.
fn f16_to_f32_int(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0x1fu) { return bitcast<f32>(sign | 0x7f800000u | (m << 13u)); }
  if (e == 0u) {
    let v = f32(m) * 5.9604644775390625e-8; // 2^-24, exact
    return select(v, -v, sign != 0u);
  }
  return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

fn f32_to_f16(f: f32) -> u32 {
  let u = bitcast<u32>(f);
  let sign = (u >> 16u) & 0x8000u;
  let a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) { return sign | 0x7c00u | select(0u, 0x200u, a > 0x7f800000u); }
  if (a >= 0x477ff000u) { return sign | 0x7c00u; }
  if (a < 0x38800000u) { // f16 subnormal or zero: units of 2^-24, ties to even
    let e = a >> 23u;
    if (e < 102u) { return sign; }
    let full = (a & 0x7fffffu) | 0x800000u;
    let shift = 126u - e;
    var q = full >> shift;
    let rem = full & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u) != 0u)) { q = q + 1u; }
    return sign | q;
  }
  var r = a + 0xfffu + ((a >> 13u) & 1u);
  r = r - 0x38000000u;
  return sign | (r >> 13u);
}

fn bf16_to_f32(h: u32) -> f32 { return bitcast<f32>((h & 0xffffu) << 16u); }
fn f32_to_bf16(f: f32) -> u32 {
  var u = bitcast<u32>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return ((u >> 16u) | 0x40u) & 0xffffu; }
  u = u + 0x7fffu + ((u >> 16u) & 1u);
  return u >> 16u;
}

// f64 bits -> f32, round to nearest even, in integer math.
fn f64_to_f32(b: vec2<u32>) -> f32 {
  let sign = b.y & 0x80000000u;
  let e = i32((b.y >> 20u) & 0x7ffu);
  let mhi = b.y & 0xfffffu;
  if (e == 0x7ff) { return bitcast<f32>(sign | 0x7f800000u | select(0u, 0x400000u, (mhi | b.x) != 0u)); }
  if (e == 0) { return bitcast<f32>(sign); }
  let ef = e - 1023 + 127;
  if (ef >= 255) { return bitcast<f32>(sign | 0x7f800000u); }
  // 53-bit significand as (hi 21 bits, lo 32 bits); drop `shift` low bits.
  var hi = mhi | 0x100000u;
  var lo = b.x;
  var shift = 29u;
  var expbits = u32(max(ef, 0)) << 23u;
  if (ef <= 0) {
    let s = 29 + 1 - ef;
    if (s > 54) { return bitcast<f32>(sign); }
    shift = u32(s);
    expbits = 0u;
  } else {
    hi = mhi; // implicit bit carried by the exponent field
  }
  var q: u32; var rem_hi: u32; var rem_lo: u32; var half_hi: u32; var half_lo: u32;
  if (shift >= 32u) {
    let s2 = shift - 32u;
    q = select(hi >> s2, 0u, s2 >= 32u);
    rem_hi = select(hi & ((1u << s2) - 1u), hi, s2 >= 32u);
    rem_lo = lo;
    half_hi = select(1u << (s2 - 1u), 0u, s2 == 0u);
    half_lo = select(0u, 0x80000000u, s2 == 0u);
  } else {
    q = (lo >> shift) | (hi << (32u - shift));
    rem_hi = 0u;
    rem_lo = lo & ((1u << shift) - 1u);
    half_hi = 0u;
    half_lo = 1u << (shift - 1u);
  }
  var r = expbits + q;
  let gt = rem_hi > half_hi || (rem_hi == half_hi && rem_lo > half_lo);
  let eq = rem_hi == half_hi && rem_lo == half_lo;
  if (gt || (eq && (q & 1u) != 0u)) { r = r + 1u; }
  return bitcast<f32>(sign | r);
}

fn f32_to_f64(f: f32) -> vec2<u32> {
  let u = bitcast<u32>(f);
  let sign = u & 0x80000000u;
  let e = (u >> 23u) & 0xffu;
  var m = u & 0x7fffffu;
  if (e == 255u) { return vec2<u32>(m << 29u, sign | 0x7ff00000u | (m >> 3u)); }
  if (e == 0u) {
    if (m == 0u) { return vec2<u32>(0u, sign); }
    var ee = -126;
    loop {
      if ((m & 0x800000u) != 0u) { break; }
      m = m << 1u;
      ee = ee - 1;
    }
    m = m & 0x7fffffu;
    return vec2<u32>(m << 29u, sign | (u32(ee + 1023) << 20u) | (m >> 3u));
  }
  return vec2<u32>(m << 29u, sign | ((e + 896u) << 20u) | (m >> 3u));
}

// f64 bits -> i64: truncation toward zero, saturating, NaN -> 0.
fn f64_to_i64(b: vec2<u32>) -> vec2<u32> {
  let e = i32((b.y >> 20u) & 0x7ffu);
  let neg = (b.y & 0x80000000u) != 0u;
  let mhi = b.y & 0xfffffu;
  if (e == 0x7ff && (mhi | b.x) != 0u) { return vec2<u32>(0u, 0u); }
  if (e < 1023) { return vec2<u32>(0u, 0u); }
  if (e >= 1023 + 63) { return select(vec2<u32>(0xfffffc00u, 0x7fffffffu), vec2<u32>(0u, 0x80000000u), neg); }
  let sh = e - 1023 - 52;
  let hi = mhi | 0x100000u;
  var r: vec2<u32>;
  if (sh >= 0) {
    let s = u32(sh);
    if (s >= 32u) { r = vec2<u32>(0u, b.x << (s - 32u)); }
    else if (s == 0u) { r = vec2<u32>(b.x, hi); }
    else { r = vec2<u32>(b.x << s, (hi << s) | (b.x >> (32u - s))); }
  } else {
    let s = u32(-sh);
    if (s >= 32u) { r = vec2<u32>(hi >> (s - 32u), 0u); }
    else { r = vec2<u32>((b.x >> s) | (hi << (32u - s)), hi >> s); }
  }
  return select(r, i64_neg(r), neg);
}

// x as it reads back after being stored as dtype dt (float dtypes).
fn round_to(dt: u32, x: f32) -> f32 {
  if (dt == DT_F16) { return f16_to_f32(f32_to_f16(x)); }
  if (dt == DT_BF16) { return bf16_to_f32(f32_to_bf16(x)); }
  return x;
}

// ------------------------------------------------------------ float keys

// Order-preserving u32 key of a float; NaN above everything.
fn fkey(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0xffffffffu; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
fn funkey(k: u32) -> f32 {
  if (k == 0xffffffffu) { return nan_f(); }
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

// ------------------------------------------------------------ raw access

fn ld_u8(b: u32) -> u32 { return (lw(b >> 2u) >> ((b & 3u) * 8u)) & 0xffu; }
fn ld_u16(b: u32) -> u32 { return (lw(b >> 2u) >> ((b & 2u) * 8u)) & 0xffffu; }
fn ld_u32(b: u32) -> u32 { return lw(b >> 2u); }
fn ld_u64(b: u32) -> vec2<u32> { return vec2<u32>(lw(b >> 2u), lw((b >> 2u) + 1u)); }
fn st_u8(b: u32, v: u32) { let sh = (b & 3u) * 8u; sw_part(b >> 2u, 0xffu << sh, (v & 0xffu) << sh); }
fn st_u16(b: u32, v: u32) { let sh = (b & 2u) * 8u; sw_part(b >> 2u, 0xffffu << sh, (v & 0xffffu) << sh); }
fn st_u32(b: u32, v: u32) { sw(b >> 2u, v); }
fn st_u64(b: u32, v: vec2<u32>) { sw(b >> 2u, v.x); sw((b >> 2u) + 1u, v.y); }

fn addr(off: u32, idx: i32, dt: u32) -> u32 { return off + bitcast<u32>(idx) * dt_size(dt); }

// Raw bits of an element (up to 64), for same-dtype copies.
fn ld_bits(dt: u32, off: u32, idx: i32) -> vec2<u32> {
  let b = addr(off, idx, dt);
  let es = dt_size(dt);
  if (es == 1u) { return vec2<u32>(ld_u8(b), 0u); }
  if (es == 2u) { return vec2<u32>(ld_u16(b), 0u); }
  if (es == 4u) { return vec2<u32>(ld_u32(b), 0u); }
  return ld_u64(b);
}
fn st_bits(dt: u32, off: u32, idx: i32, v: vec2<u32>) {
  let b = addr(off, idx, dt);
  let es = dt_size(dt);
  if (es == 1u) { st_u8(b, v.x); }
  else if (es == 2u) { st_u16(b, v.x); }
  else if (es == 4u) { st_u32(b, v.x); }
  else { st_u64(b, v); }
}

// ------------------------------------------------------------ typed access

fn ld_f(dt: u32, off: u32, idx: i32) -> f32 {
  let b = addr(off, idx, dt);
  switch (dt) {
    case DT_F32: { return bitcast<f32>(ld_u32(b)); }
    case DT_F16: { return f16_to_f32(ld_u16(b)); }
    case DT_BF16: { return bf16_to_f32(ld_u16(b)); }
    case DT_F64: { return f64_to_f32(ld_u64(b)); }
    case DT_I8: { return f32(bitcast<i32>(ld_u8(b) << 24u) >> 24u); }
    case DT_U8: { return f32(ld_u8(b)); }
    case DT_I32: { return f32(bitcast<i32>(ld_u32(b))); }
    case DT_I64: { return i64_to_f32(ld_u64(b)); }
    case DT_BOOL: { return select(0.0, 1.0, ld_u8(b) != 0u); }
    default: { return 0.0; }
  }
}

fn ld_i(dt: u32, off: u32, idx: i32) -> vec2<u32> {
  let b = addr(off, idx, dt);
  switch (dt) {
    case DT_I8: { return i64_from_i32(bitcast<i32>(ld_u8(b) << 24u) >> 24u); }
    case DT_U8: { return vec2<u32>(ld_u8(b), 0u); }
    case DT_BOOL: { return vec2<u32>(select(0u, 1u, ld_u8(b) != 0u), 0u); }
    case DT_I32: { return i64_from_i32(bitcast<i32>(ld_u32(b))); }
    case DT_I64: { return ld_u64(b); }
    case DT_F64: { return f64_to_i64(ld_u64(b)); }
    default: { return f32_to_i64(ld_f(dt, off, idx)); }
  }
}

fn sat_i32(v: f32, lo: f32, hi: f32) -> i32 {
  if (is_nan(v)) { return 0; }
  if (v <= lo) { return i32(lo); }
  if (v >= hi) { return i32(hi); }
  return i32(v);
}

fn st_f(dt: u32, off: u32, idx: i32, v: f32) {
  let b = addr(off, idx, dt);
  switch (dt) {
    case DT_F32: { st_u32(b, bitcast<u32>(v)); }
    case DT_F16: { st_u16(b, f32_to_f16(v)); }
    case DT_BF16: { st_u16(b, f32_to_bf16(v)); }
    case DT_F64: { st_u64(b, f32_to_f64(v)); }
    case DT_I8: { st_u8(b, bitcast<u32>(sat_i32(v, -128.0, 127.0))); }
    case DT_U8: { st_u8(b, bitcast<u32>(sat_i32(v, 0.0, 255.0))); }
    case DT_I32: {
      var r: i32;
      if (is_nan(v)) { r = 0; }
      else if (v <= -2147483648.0) { r = i32(-2147483647) - 1; }
      else if (v >= 2147483647.0) { r = 2147483647; }
      else { r = i32(v); }
      st_u32(b, bitcast<u32>(r));
    }
    case DT_I64: { st_u64(b, f32_to_i64(v)); }
    case DT_BOOL: { st_u8(b, select(0u, 1u, v != 0.0 || is_nan(v))); }
    default: { }
  }
}

fn st_i(dt: u32, off: u32, idx: i32, v: vec2<u32>) {
  let b = addr(off, idx, dt);
  switch (dt) {
    case DT_I8, DT_U8: { st_u8(b, v.x); }
    case DT_BOOL: { st_u8(b, select(0u, 1u, (v.x | v.y) != 0u)); }
    case DT_I32: { st_u32(b, v.x); }
    case DT_I64: { st_u64(b, v); }
    default: { st_f(dt, off, idx, i64_to_f32(v)); }
  }
}

// The reference's copy_element: same dtype -> bits; int <-> int exactly;
// f64 -> int exactly; otherwise through f32.
fn copy_elem(odt: u32, ooff: u32, oi: i32, idt: u32, ioff: u32, ii: i32) {
  if (odt == idt) { st_bits(odt, ooff, oi, ld_bits(idt, ioff, ii)); }
  else if (is_intlike(odt) && (is_intlike(idt) || idt == DT_F64)) { st_i(odt, ooff, oi, ld_i(idt, ioff, ii)); }
  else if (odt == DT_F64 && is_intlike(idt)) { st_f(odt, ooff, oi, i64_to_f32(ld_i(idt, ioff, ii))); }
  else { st_f(odt, ooff, oi, ld_f(idt, ioff, ii)); }
}

// ------------------------------------------------------------ views

// Element offset, in view `slot`'s strides, of linear index i of a dense walk
// over view `shape_slot`'s shape.
fn view_elem(shape_slot: u32, slot: u32, i_in: u32) -> i32 {
  var i = i_in;
  var off = 0;
  let rank = v_rank(shape_slot);
  for (var d = rank - 1; d >= 0; d = d - 1) {
    let n = v_shape(shape_slot, u32(d));
    let q = i / n;
    off = off + i32(i - q * n) * v_stride(slot, u32(d));
    i = q;
  }
  return off;
}

// First run-time error (an index out of range), for the host to report.
fn report_bad_index(value: vec2<u32>, len: u32) {
  if (atomicAdd(&RUN[RUN_ERR], 1u) == 0u) {
    atomicStore(&RUN[RUN_ERR_STEP], P[R_STEP]);
    atomicStore(&RUN[RUN_ERR_LO], value.x);
    atomicStore(&RUN[RUN_ERR_HI], value.y);
    atomicStore(&RUN[RUN_ERR_LEN], len);
  }
}

// Resolves a possibly negative index into [0, len); -1 (and a report) if outside.
fn resolve_index(raw: vec2<u32>, len: u32) -> i32 {
  var v = raw;
  if (i64_is_neg(v)) { v = i64_add(v, vec2<u32>(len, 0u)); }
  if (v.y != 0u || v.x >= len) { report_bad_index(raw, len); return -1; }
  return i32(v.x);
}

// ------------------------------------------------------------ math

// erf with |relative error| < 1.2e-7 (the erfc Chebyshev fit of Numerical Recipes).
fn erf_f(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277)))))))));
  let e = 1.0 - r;
  return select(-e, e, x >= 0.0);
}

// tanh without cancellation near 0 or overflow for large |x|.
fn tanh_f(x: f32) -> f32 {
  let a = abs(x);
  if (a > 15.0) { return sign(x); }
  if (a < 0.01) { let x2 = x * x; return x * (1.0 - x2 * (1.0 / 3.0 - x2 * (2.0 / 15.0))); }
  let e = exp(-2.0 * a);
  let t = (1.0 - e) / (1.0 + e);
  return select(t, -t, x < 0.0);
}

// exp accurate to a few ulp: drivers may use exp2(x * log2e), whose error
// grows with |x|. Reduce by ln2 in two parts, then a polynomial.
fn exp_f(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x > 88.72284) { return inf_f(); }
  if (x < -103.97208) { return 0.0; }
  let k = round(x * 1.4426950408889634);
  let r = (x - k * 0.693145751953125) - k * 1.428606765330187e-06;
  let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.16666667 + r * (0.041666668 + r * (0.008333334 +
          r * (0.0013888889 + r * 0.0001984127))))));
  // 2^k in two exact factors so that k down to -150 and up to 128 stay normal.
  let k1 = i32(k) / 2;
  let k2 = i32(k) - k1;
  return p * bitcast<f32>(u32(k1 + 127) << 23u) * bitcast<f32>(u32(k2 + 127) << 23u);
}

fn log_f(x: f32) -> f32 {
  if (is_nan(x) || x < 0.0) { return nan_f(); }
  if (x == 0.0) { return -inf_f(); }
  if (is_inf(x)) { return x; }
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log(m) by atanh series.
  var bits = bitcast<u32>(x);
  var e = 0;
  if ((bits >> 23u) == 0u) { bits = bitcast<u32>(x * 8388608.0); e = -23; } // subnormal
  e = e + i32((bits >> 23u) & 0xffu) - 127;
  var m = bitcast<f32>((bits & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356) { m = m * 0.5; e = e + 1; }
  let s = (m - 1.0) / (m + 1.0);
  let s2 = s * s;
  let lm = 2.0 * s * (1.0 + s2 * (0.33333334 + s2 * (0.2 + s2 * (0.14285715 + s2 * (0.11111111 + s2 * 0.09090909)))));
  return lm + f32(e) * 0.693145751953125 + f32(e) * 1.428606765330187e-06;
}

// sin / cos with Cody-Waite reduction by pi/2 (built-ins may be approximate).
fn sincos_f(x: f32) -> vec2<f32> {
  if (is_nan(x) || is_inf(x)) { return vec2<f32>(nan_f(), nan_f()); }
  let k = round(x * 0.63661977236758134);
  var r = fma(-k, 1.5703125, x);
  r = fma(-k, 4.837512969970703125e-4, r);
  r = fma(-k, 7.549790126404332e-08, r);
  r = fma(-k, -1.7151245100058819e-15, r);
  let r2 = r * r;
  let sr = r + r * r2 * (-1.6666667163e-1 + r2 * (8.3333337680e-3 + r2 * (-1.9841270114e-4 + r2 * 2.7557314297e-6)));
  let cr = 1.0 + r2 * (-0.5 + r2 * (4.1666667908e-2 + r2 * (-1.3888889225e-3 + r2 * (2.4801587642e-5 + r2 * -2.7557314297e-7))));
  let q = i32(k) & 3;
  if (q == 0) { return vec2<f32>(sr, cr); }
  if (q == 1) { return vec2<f32>(cr, -sr); }
  if (q == 2) { return vec2<f32>(-sr, -cr); }
  return vec2<f32>(-cr, sr);
}

fn sqrt_f(x: f32) -> f32 {
  if (is_nan(x) || x < 0.0) { return nan_f(); }
  if (x == 0.0 || is_inf(x)) { return x; }
  // One Newton step on the built-in (which may be approximate), in f32.
  let s = sqrt(x);
  return 0.5 * (s + x / s);
}

fn activation(act: u32, x: f32) -> f32 {
  switch (act) {
    case RLX_ACT_NONE: { return x; }
    case RLX_ACT_RELU: { return select(x, 0.0, x < 0.0); }
    case RLX_ACT_SIGMOID: { return 1.0 / (1.0 + exp_f(-x)); }
    case RLX_ACT_TANH: { return tanh_f(x); }
    case RLX_ACT_EXP: { return exp_f(x); }
    case RLX_ACT_LOG: { return log_f(x); }
    case RLX_ACT_SQRT: { return sqrt_f(x); }
    case RLX_ACT_RSQRT: {
      if (is_nan(x) || x < 0.0) { return nan_f(); }
      if (x == 0.0) { return inf_f(); }
      return 1.0 / sqrt_f(x);
    }
    case RLX_ACT_NEG: { return -x; }
    case RLX_ACT_ABS: { return abs(x); }
    case RLX_ACT_GELU: { return 0.5 * x * (1.0 + erf_f(x * 0.70710678118654752)); }
    case RLX_ACT_GELU_APPROX: {
      let k = 0.79788456080286535588;
      return 0.5 * x * (1.0 + tanh_f(k * (x + 0.044715 * x * x * x)));
    }
    case RLX_ACT_SILU: { return x / (1.0 + exp_f(-x)); }
    case RLX_ACT_ROUND: { if (is_nan(x) || is_inf(x)) { return x; } return round(x); }
    case RLX_ACT_SIN: { return sincos_f(x).x; }
    case RLX_ACT_COS: { return sincos_f(x).y; }
    case RLX_ACT_TAN: { let sc = sincos_f(x); return sc.x / sc.y; }
    case RLX_ACT_ATAN: { if (is_nan(x)) { return x; } return atan(x); }
    default: { return nan_f(); }
  }
}

fn pow_f(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (is_nan(a) || is_nan(b)) { return nan_f(); }
  if (a == 1.0) { return 1.0; }
  if (a == 0.0) { return select(inf_f(), 0.0, b > 0.0); }
  var r = exp_f(b * log_f(abs(a)));
  if (a < 0.0) {
    if (floor(b) != b) { return nan_f(); }
    if (abs(b) < 16777216.0 && (i32(abs(b)) & 1) != 0) { r = -r; }
  }
  return r;
}

fn binary_f(op: u32, a: f32, b: f32) -> f32 {
  switch (op) {
    case RLX_BIN_ADD: { return a + b; }
    case RLX_BIN_SUB: { return a - b; }
    case RLX_BIN_MUL: { return a * b; }
    case RLX_BIN_DIV: { return a / b; }
    case RLX_BIN_MAX: { if (is_nan(a) || is_nan(b)) { return nan_f(); } return select(b, a, a > b); }
    case RLX_BIN_MIN: { if (is_nan(a) || is_nan(b)) { return nan_f(); } return select(b, a, a < b); }
    case RLX_BIN_POW: { return pow_f(a, b); }
    default: { return nan_f(); }
  }
}

// ------------------------------------------------------------ attention

// Score of key j for query row i of (b, h): scale, softcap, then the mask
// (-inf where masked). Shared by the one-row and the flash kernels.
fn masked_score(dot: f32, b: u32, h: u32, i: u32, j: u32) -> f32 {
  var sc = dot * pf(R_X + AT_SCALE);
  let cap = pf(R_X + AT_SOFTCAP);
  if (cap > 0.0) { sc = cap * tanh_f(sc / cap); }
  let last_visible = i32(i) + px(AT_SK) - px(AT_SQ);
  let mask = px(AT_MASK);
  if (mask == MASK_CAUSAL) {
    if (i32(j) > last_visible) { return -inf_f(); }
  } else if (mask == MASK_SLIDING) {
    if (i32(j) > last_visible || i32(j) <= last_visible - px(AT_WINDOW)) { return -inf_f(); }
  } else if (mask == MASK_CUSTOM || mask == MASK_BIAS) {
    let m_at = i32(b) * px(AT_M + 0u) + i32(h) * px(AT_M + 1u) + i32(i) * px(AT_M + 2u) + i32(j) * px(AT_M + 3u);
    let mv = ld_f(v_dt(5u), v_off(5u), m_at);
    if (mask == MASK_CUSTOM) {
      if (!(mv > 0.5)) { return -inf_f(); }
    } else {
      sc = sc + mv;
    }
  }
  return sc;
}
