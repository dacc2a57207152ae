// C = act(A·B + bias), batched, register-blocked: one 128x128 output tile per
// 256-invocation workgroup, 8x8 outputs per invocation (rows ty*4.. and
// 64+ty*4.., columns tx*4.. and 64+tx*4..), K in slabs of 16 staged in
// workgroup memory as vec4 rows (As[k][m], Bs[k][n]); the next slab's
// quads are fetched into registers while the current one is multiplied.
// Every output is one f32 fma chain in ascending k, as in the 16x16 kernel,
// so f32 results are exact (and equal that kernel's bit for bit).
//
// Tile loads: MM_FAST_A = 1 (f32 / f16 / bf16, k contiguous, aligned quads
// along k: quad4 in the host prelude), 2 (m contiguous: quads along m), 0
// (any dtype and strides, one element at a time); MM_FAST_B likewise with 1 = n contiguous, 2 = k
// contiguous. Stores: MM_PAIR_OUT = 2 (f32, vec4 stores), 1 (f16/bf16, two
// elements per word: an invocation owns whole words), 0 (one at a time,
// 4-byte dtypes).
//
// MM_F32 (prepended by the host; true in the RLX_WG_MATMUL_TILED_F32 form):
// f32 operands and output, quad loads on both sides (the host checks), so
// the dtype checks and the general-layout paths are compiled out. On the
// H100 (2026-11-23) that form ran f32 4096^3 in 5.59 ms against 6.03 ms for
// the general one. Measured there and left out: double-buffered slabs with
// one barrier each (7.4-7.9 ms), an XOR-swizzled workgroup layout (no
// gain), tile rows walked in groups of 8 for L2 reuse (5.63 ms).

var<workgroup> As: array<vec4<f32>, 512>; // [16 k][32 quads of m]
var<workgroup> Bs: array<vec4<f32>, 512>; // [16 k][32 quads of n]

struct MmCtx {
  M: u32, N: u32, K: u32, m0: u32, n0: u32,
  ao: i32, bo: i32, co: i32,
  ars: i32, acs: i32, brs: i32, bcs: i32,
}

fn a_elem(c: MmCtx, m: u32, k: u32) -> f32 {
  if (m >= c.M || k >= c.K) { return 0.0; }
  return ld_f(v_dt(2u), v_off(2u), c.ao + i32(m) * c.ars + i32(k) * c.acs);
}
fn b_elem(c: MmCtx, k: u32, n: u32) -> f32 {
  if (k >= c.K || n >= c.N) { return 0.0; }
  return ld_f(v_dt(3u), v_off(3u), c.bo + i32(k) * c.brs + i32(n) * c.bcs);
}
fn quad(slot: u32, e: i32) -> vec4<f32> {
  if (MM_F32) { return bitcast<vec4<f32>>(A[(v_off(slot) >> 4u) + (bitcast<u32>(e) >> 2u)]); }
  return quad4(slot, bitcast<u32>(e));
}

// Tile loads in two halves, so the next slab's global loads can be in
// flight while the current slab's fmas run: fetch_* reads the quad of tile
// position q = lid + j * 256 into a register (fast layouts; zero otherwise),
// put_* writes it to workgroup memory (the general layout loads there
// element by element instead).
fn fetch_a(c: MmCtx, k0: u32, q: u32) -> vec4<f32> {
  let fast = pxu(MM_FAST_A);
  if (fast == 1u) { // quads along k
    let r = q / 4u; let kq = (q % 4u) * 4u;
    if (c.m0 + r < c.M && k0 + kq < c.K) { return quad(2u, c.ao + i32(c.m0 + r) * c.ars + i32(k0 + kq)); }
  } else if (MM_F32 || fast == 2u) { // quads along m
    let kk = q / 32u; let mq = (q % 32u) * 4u;
    if (c.m0 + mq < c.M && k0 + kk < c.K) { return quad(2u, c.ao + i32(c.m0 + mq) + i32(k0 + kk) * c.acs); }
  }
  return vec4<f32>(0.0);
}

fn put_a(c: MmCtx, k0: u32, q: u32, v: vec4<f32>) {
  let fast = pxu(MM_FAST_A);
  if (fast == 1u) {
    let r = q / 4u; let kq = (q % 4u) * 4u;
    for (var t = 0u; t < 4u; t = t + 1u) { As[(kq + t) * 32u + r / 4u][r % 4u] = v[t]; }
  } else if (MM_F32 || fast == 2u) {
    As[q] = v;
  } else {
    for (var t = 0u; t < 4u; t = t + 1u) {
      let e = q * 4u + t;
      let m = e % 128u; let kk = e / 128u;
      As[kk * 32u + m / 4u][m % 4u] = a_elem(c, c.m0 + m, k0 + kk);
    }
  }
}

fn fetch_b(c: MmCtx, k0: u32, q: u32) -> vec4<f32> {
  let fast = pxu(MM_FAST_B);
  if (fast == 1u) { // quads along n
    let kk = q / 32u; let nq = (q % 32u) * 4u;
    if (c.n0 + nq < c.N && k0 + kk < c.K) { return quad(3u, c.bo + i32(k0 + kk) * c.brs + i32(c.n0 + nq)); }
  } else if (MM_F32 || fast == 2u) { // quads along k
    let n = q / 4u; let kq = (q % 4u) * 4u;
    if (c.n0 + n < c.N && k0 + kq < c.K) { return quad(3u, c.bo + i32(k0 + kq) + i32(c.n0 + n) * c.bcs); }
  }
  return vec4<f32>(0.0);
}

fn put_b(c: MmCtx, k0: u32, q: u32, v: vec4<f32>) {
  let fast = pxu(MM_FAST_B);
  if (fast == 1u) {
    Bs[q] = v;
  } else if (MM_F32 || fast == 2u) {
    let n = q / 4u; let kq = (q % 4u) * 4u;
    for (var t = 0u; t < 4u; t = t + 1u) { Bs[(kq + t) * 32u + n / 4u][n % 4u] = v[t]; }
  } else {
    for (var t = 0u; t < 4u; t = t + 1u) {
      let e = q * 4u + t;
      let n = e % 128u; let kk = e / 128u;
      Bs[kk * 32u + n / 4u][n % 4u] = b_elem(c, k0 + kk, c.n0 + n);
    }
  }
}

fn epilogue(v: vec4<f32>, n: u32) -> vec4<f32> {
  var r = v;
  for (var t = 0u; t < 4u; t = t + 1u) {
    var x = r[t];
    if (px(MM_HAS_BIAS) != 0 && n + t < pxu(MM_N)) { x = x + ld_f(v_dt(4u), v_off(4u), i32(n + t)); }
    r[t] = activation(pxu(MM_ACT), x);
  }
  return r;
}

fn store4(c: MmCtx, m: u32, n: u32, v: vec4<f32>) {
  if (m >= c.M || n >= c.N) { return; }
  let e = c.co + i32(m) * px(MM_CRS) + i32(n);
  let mode = pxu(MM_PAIR_OUT);
  let dt = v_dt(0u); let off = v_off(0u);
  if (MM_F32 || (mode == 2u && n + 4u <= c.N)) { // MM_F32: N % 4 == 0
    A[(off >> 4u) + (bitcast<u32>(e) >> 2u)] = bitcast<vec4<u32>>(v);
  } else if (mode == 1u) { // N even: pairs are wholly in or out
    let w = (off >> 2u) + (bitcast<u32>(e) >> 1u);
    let bf = dt == DT_BF16;
    for (var t = 0u; t < 4u; t = t + 2u) {
      if (n + t < c.N) {
        let lo = select(f32_to_f16(v[t]), f32_to_bf16(v[t]), bf);
        let hi = select(f32_to_f16(v[t + 1u]), f32_to_bf16(v[t + 1u]), bf);
        sw(w + t / 2u, (lo & 0xffffu) | (hi << 16u));
      }
    }
  } else {
    for (var t = 0u; t < 4u; t = t + 1u) {
      if (n + t < c.N) { st_f(dt, off, e + i32(t), v[t]); }
    }
  }
}

fn store_row(c: MmCtx, m: u32, n0: u32, n1: u32, v0: vec4<f32>, v1: vec4<f32>) {
  if (m >= c.M) { return; }
  store4(c, m, n0, epilogue(v0, n0));
  store4(c, m, n1, epilogue(v1, n1));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  var c: MmCtx;
  c.M = pxu(MM_M); c.N = pxu(MM_N); c.K = pxu(MM_K);
  let tiles_m = (c.M + 127u) / 128u;
  let tiles_n = (c.N + 127u) / 128u;
  let g = group_linear(wid);
  let per_batch = tiles_m * tiles_n;
  let b = g / per_batch;
  if (b >= pxu(MM_BATCH)) { return; } // uniform per workgroup
  let t = g - b * per_batch;
  c.m0 = (t / tiles_n) * 128u;
  c.n0 = (t % tiles_n) * 128u;
  var rem = b;
  c.ao = 0; c.bo = 0; c.co = 0;
  for (var d = px(MM_BRANK) - 1; d >= 0; d = d - 1) {
    let n = pxu(MM_BSHAPE + u32(d));
    let idx = rem % n;
    rem = rem / n;
    c.ao = c.ao + i32(idx) * px(MM_ABS + u32(d));
    c.bo = c.bo + i32(idx) * px(MM_BBS + u32(d));
    c.co = c.co + i32(idx) * px(MM_CBS + u32(d));
  }
  c.ars = px(MM_ARS); c.acs = px(MM_ACS); c.brs = px(MM_BRS); c.bcs = px(MM_BCS);
  let lid = ids.lid;
  let tx = lid % 16u; let ty = lid / 16u;
  // 8x8 accumulators as named vec4s, never an array: an array indexed in a
  // loop may be placed in local memory (the array form ran 1.9 TFLOP/s on
  // the H100).
  var c00 = vec4<f32>(0.0); var c01 = c00; var c10 = c00; var c11 = c00;
  var c20 = c00; var c21 = c00; var c30 = c00; var c31 = c00;
  var c40 = c00; var c41 = c00; var c50 = c00; var c51 = c00;
  var c60 = c00; var c61 = c00; var c70 = c00; var c71 = c00;
  var ra0 = fetch_a(c, 0u, lid); var ra1 = fetch_a(c, 0u, lid + 256u);
  var rb0 = fetch_b(c, 0u, lid); var rb1 = fetch_b(c, 0u, lid + 256u);
  for (var k0 = 0u; k0 < c.K; k0 = k0 + 16u) {
    put_a(c, k0, lid, ra0); put_a(c, k0, lid + 256u, ra1);
    put_b(c, k0, lid, rb0); put_b(c, k0, lid + 256u, rb1);
    workgroupBarrier();
    if (k0 + 16u < c.K) { // next slab: loads overlap this slab's fmas
      ra0 = fetch_a(c, k0 + 16u, lid); ra1 = fetch_a(c, k0 + 16u, lid + 256u);
      rb0 = fetch_b(c, k0 + 16u, lid); rb1 = fetch_b(c, k0 + 16u, lid + 256u);
    }
    // Full slabs run a loop of constant trip count, which the driver unrolls
    // (shared loads scheduled ahead of the fmas); the K tail stops at K: no
    // padded terms (they could turn -0 into +0).
    let kn = min(16u, c.K - k0);
    if (kn == 16u) {
      for (var kk = 0u; kk < 16u; kk = kk + 1u) {
        let a0 = As[kk * 32u + ty];
        let a1 = As[kk * 32u + 16u + ty];
        let b0 = Bs[kk * 32u + tx];
        let b1 = Bs[kk * 32u + 16u + tx];
        c00 = fma(vec4<f32>(a0.x), b0, c00); c01 = fma(vec4<f32>(a0.x), b1, c01);
        c10 = fma(vec4<f32>(a0.y), b0, c10); c11 = fma(vec4<f32>(a0.y), b1, c11);
        c20 = fma(vec4<f32>(a0.z), b0, c20); c21 = fma(vec4<f32>(a0.z), b1, c21);
        c30 = fma(vec4<f32>(a0.w), b0, c30); c31 = fma(vec4<f32>(a0.w), b1, c31);
        c40 = fma(vec4<f32>(a1.x), b0, c40); c41 = fma(vec4<f32>(a1.x), b1, c41);
        c50 = fma(vec4<f32>(a1.y), b0, c50); c51 = fma(vec4<f32>(a1.y), b1, c51);
        c60 = fma(vec4<f32>(a1.z), b0, c60); c61 = fma(vec4<f32>(a1.z), b1, c61);
        c70 = fma(vec4<f32>(a1.w), b0, c70); c71 = fma(vec4<f32>(a1.w), b1, c71);
      }
    } else {
      for (var kk = 0u; kk < kn; kk = kk + 1u) {
        let a0 = As[kk * 32u + ty];
        let a1 = As[kk * 32u + 16u + ty];
        let b0 = Bs[kk * 32u + tx];
        let b1 = Bs[kk * 32u + 16u + tx];
        c00 = fma(vec4<f32>(a0.x), b0, c00); c01 = fma(vec4<f32>(a0.x), b1, c01);
        c10 = fma(vec4<f32>(a0.y), b0, c10); c11 = fma(vec4<f32>(a0.y), b1, c11);
        c20 = fma(vec4<f32>(a0.z), b0, c20); c21 = fma(vec4<f32>(a0.z), b1, c21);
        c30 = fma(vec4<f32>(a0.w), b0, c30); c31 = fma(vec4<f32>(a0.w), b1, c31);
        c40 = fma(vec4<f32>(a1.x), b0, c40); c41 = fma(vec4<f32>(a1.x), b1, c41);
        c50 = fma(vec4<f32>(a1.y), b0, c50); c51 = fma(vec4<f32>(a1.y), b1, c51);
        c60 = fma(vec4<f32>(a1.z), b0, c60); c61 = fma(vec4<f32>(a1.z), b1, c61);
        c70 = fma(vec4<f32>(a1.w), b0, c70); c71 = fma(vec4<f32>(a1.w), b1, c71);
      }
    }
    workgroupBarrier();
  }
  let m0 = c.m0 + ty * 4u;
  let m1 = c.m0 + 64u + ty * 4u;
  let n0 = c.n0 + tx * 4u;
  let n1 = c.n0 + 64u + tx * 4u;
  store_row(c, m0, n0, n1, c00, c01);
  store_row(c, m0 + 1u, n0, n1, c10, c11);
  store_row(c, m0 + 2u, n0, n1, c20, c21);
  store_row(c, m0 + 3u, n0, n1, c30, c31);
  store_row(c, m1, n0, n1, c40, c41);
  store_row(c, m1 + 1u, n0, n1, c50, c51);
  store_row(c, m1 + 2u, n0, n1, c60, c61);
  store_row(c, m1 + 3u, n0, n1, c70, c71);
}
