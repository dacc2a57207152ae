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
// MM_F32 (prepended by the host) is true in the RLX_WG_MATMUL_TILED_F32
// form, whose entry point is main_f32 below (f32 operands and output, quad
// loads on both sides: the host checks); `main` serves every other case.
// H100, f32 4096^3, median wall ms (2026-11-23): main_f32 3.58 / 3.58 /
// 3.58 (rlx Vulkan 3.80 / 3.87 in the same call). An earlier call, two runs
// each (Vulkan 3.79-3.82 there): `main` in the f32 form 5.82 / 5.90; the
// parts of main_f32 alone: hoisted addresses, clamped edges and the K tail
// out of the loop 3.78 / 4.03; that with static double buffers 4.15 / 4.17
// (both with a 16-step loop); the slab written out with one buffer 4.28 /
// 4.28; all of them 3.68 / 3.72. Dawn's use_vulkan_memory_model toggle
// (Tint then drops the Coherent decoration of the arena) gained nothing in
// the final form (3.59 / 3.58). The driver reports 169 registers for
// main_f32 (Vulkan's matmul_f32.comp 165, `main` 128).
// Measured before and left out: double buffers indexed by a dynamic buffer
// number (7.4-7.9 ms), 32-deep slabs (8.7), an XOR-swizzled workgroup
// layout (6.16), tile rows walked in groups of 8 for L2 reuse (5.63).

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
  } else if (fast == 2u) {
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
  } else if (fast == 2u) {
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

// The workgroup's tile origin and batch offsets; M = 0 marks a workgroup
// past the last batch (the grid is rounded up to whole rows of groups).
fn tile_ctx(wid: vec3<u32>) -> MmCtx {
  var c: MmCtx;
  c.M = pxu(MM_M); c.N = pxu(MM_N); c.K = pxu(MM_K);
  let tiles_m = (c.M + 127u) / 128u;
  let tiles_n = (c.N + 127u) / 128u;
  let g = group_linear(wid);
  let per_batch = tiles_m * tiles_n;
  let b = g / per_batch;
  if (b >= pxu(MM_BATCH)) { c.M = 0u; return c; }
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
  return c;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let c = tile_ctx(wid);
  if (c.M == 0u) { return; } // uniform per workgroup
  let lid = ids.lid;
  let tx = lid % 16u; let ty = lid / 16u;
  // 8x8 accumulators as named vec4s (Acc, below), never an array: an array
  // indexed in a loop may be placed in local memory (the array form ran 1.9
  // TFLOP/s on the H100).
  let z = vec4<f32>(0.0);
  var acc = Acc(z, z, z, z, z, z, z, z, z, z, z, z, z, z, z, z);
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
        acc = mac(acc, As[kk * 32u + ty], As[kk * 32u + 16u + ty], Bs[kk * 32u + tx], Bs[kk * 32u + 16u + tx]);
      }
    } else {
      for (var kk = 0u; kk < kn; kk = kk + 1u) {
        acc = mac(acc, As[kk * 32u + ty], As[kk * 32u + 16u + ty], Bs[kk * 32u + tx], Bs[kk * 32u + 16u + tx]);
      }
    }
    workgroupBarrier();
  }
  store_acc(c, acc, tx, ty);
}

// ------------------------------------------------------------ f32 form
// main_f32 (RLX_WG_MATMUL_TILED_F32): the same tiles and fma order, with
// every address computed once. Each invocation loads quads q = lid and
// lid + 256 of a slab; their arena indices at k = 0 are computed before the
// k loop and move by a fixed step per slab. Rows (or quads of m / n) past
// the edge of the matrix are clamped to the last one instead of tested:
// they feed only outputs that are never stored, and every load stays inside
// the view. Full 16-deep slabs run with no K test; the K tail (K % 16)
// takes one checked slab after the loop, so every output is still one fma
// chain in ascending k.

var<workgroup> As1: array<vec4<f32>, 512>; // the second buffer pair
var<workgroup> Bs1: array<vec4<f32>, 512>;

fn ld_quad(i: u32) -> vec4<f32> { return bitcast<vec4<f32>>(A[i]); }

// Arena index of element offset e (a multiple of 4) of view `slot`, as a
// quad index; wraps like the byte offsets do.
fn quad_index(slot: u32, e: i32) -> u32 { return (v_off(slot) >> 4u) + bitcast<u32>(e >> 2); }

fn a_quad0(c: MmCtx, fast: u32, q: u32) -> u32 {
  if (fast == 1u) { // quads along k: row q / 4, k quad q % 4
    let m = min(c.m0 + q / 4u, c.M - 1u);
    return quad_index(2u, c.ao + i32(m) * c.ars + i32((q % 4u) * 4u));
  }
  let m = min(c.m0 + (q % 32u) * 4u, c.M - 4u); // quads along m (M % 4 == 0)
  return quad_index(2u, c.ao + i32(m) + i32(q / 32u) * c.acs);
}
fn a_quad_step(c: MmCtx, fast: u32) -> u32 {
  return select(bitcast<u32>(c.acs * 4), 4u, fast == 1u); // 16 k, in quads
}
fn b_quad0(c: MmCtx, fast: u32, q: u32) -> u32 {
  if (fast == 1u) { // quads along n: k row q / 32 (N % 4 == 0)
    let n = min(c.n0 + (q % 32u) * 4u, c.N - 4u);
    return quad_index(3u, c.bo + i32(q / 32u) * c.brs + i32(n));
  }
  let n = min(c.n0 + q / 4u, c.N - 1u); // quads along k: column q / 4
  return quad_index(3u, c.bo + i32((q % 4u) * 4u) + i32(n) * c.bcs);
}
fn b_quad_step(c: MmCtx, fast: u32) -> u32 {
  return select(4u, bitcast<u32>(c.brs * 4), fast == 1u);
}

// Slab quad q into a buffer: [k][quad of m] (or n); quads along k are
// spread over four k rows.
fn put_a_in(dst: ptr<workgroup, array<vec4<f32>, 512>>, fast: u32, q: u32, v: vec4<f32>) {
  if (fast == 1u) {
    let r = q / 4u; let at = (q % 4u) * 128u + r / 4u; let j = r % 4u;
    (*dst)[at][j] = v.x; (*dst)[at + 32u][j] = v.y;
    (*dst)[at + 64u][j] = v.z; (*dst)[at + 96u][j] = v.w;
  } else {
    (*dst)[q] = v;
  }
}
fn put_b_in(dst: ptr<workgroup, array<vec4<f32>, 512>>, fast: u32, q: u32, v: vec4<f32>) {
  if (fast == 1u) {
    (*dst)[q] = v;
  } else {
    let n = q / 4u; let at = (q % 4u) * 128u + n / 4u; let j = n % 4u;
    (*dst)[at][j] = v.x; (*dst)[at + 32u][j] = v.y;
    (*dst)[at + 64u][j] = v.z; (*dst)[at + 96u][j] = v.w;
  }
}

// A slab's four quads of this invocation into a buffer pair.
fn put_slab(da: ptr<workgroup, array<vec4<f32>, 512>>, db: ptr<workgroup, array<vec4<f32>, 512>>,
            fa: u32, fb: u32, lid: u32, a0: vec4<f32>, a1: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>) {
  put_a_in(da, fa, lid, a0); put_a_in(da, fa, lid + 256u, a1);
  put_b_in(db, fb, lid, b0); put_b_in(db, fb, lid + 256u, b1);
}

// WGSL has no unroll hint (the GLSL kernel's [[unroll]] becomes a SPIR-V
// loop control), so the 16 k steps of a full slab are written out. The 8x8
// accumulators travel as one struct value with named members: no array
// indexing, so nothing forces them into memory (an array form ran 1.9
// TFLOP/s on the H100).
struct Acc {
  c00: vec4<f32>, c01: vec4<f32>, c10: vec4<f32>, c11: vec4<f32>,
  c20: vec4<f32>, c21: vec4<f32>, c30: vec4<f32>, c31: vec4<f32>,
  c40: vec4<f32>, c41: vec4<f32>, c50: vec4<f32>, c51: vec4<f32>,
  c60: vec4<f32>, c61: vec4<f32>, c70: vec4<f32>, c71: vec4<f32>,
}

// One k step: rows a0 (4 of m) and a1 (4 more), columns b0 and b1.
fn mac(acc: Acc, a0: vec4<f32>, a1: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>) -> Acc {
  var r = acc;
  r.c00 = fma(vec4<f32>(a0.x), b0, r.c00); r.c01 = fma(vec4<f32>(a0.x), b1, r.c01);
  r.c10 = fma(vec4<f32>(a0.y), b0, r.c10); r.c11 = fma(vec4<f32>(a0.y), b1, r.c11);
  r.c20 = fma(vec4<f32>(a0.z), b0, r.c20); r.c21 = fma(vec4<f32>(a0.z), b1, r.c21);
  r.c30 = fma(vec4<f32>(a0.w), b0, r.c30); r.c31 = fma(vec4<f32>(a0.w), b1, r.c31);
  r.c40 = fma(vec4<f32>(a1.x), b0, r.c40); r.c41 = fma(vec4<f32>(a1.x), b1, r.c41);
  r.c50 = fma(vec4<f32>(a1.y), b0, r.c50); r.c51 = fma(vec4<f32>(a1.y), b1, r.c51);
  r.c60 = fma(vec4<f32>(a1.z), b0, r.c60); r.c61 = fma(vec4<f32>(a1.z), b1, r.c61);
  r.c70 = fma(vec4<f32>(a1.w), b0, r.c70); r.c71 = fma(vec4<f32>(a1.w), b1, r.c71);
  return r;
}

// The 16 k steps of the slab in (sa, sb).
fn mac_slab(acc: Acc, sa: ptr<workgroup, array<vec4<f32>, 512>>, sb: ptr<workgroup, array<vec4<f32>, 512>>,
            tx: u32, ty: u32) -> Acc {
  let a = ty; let b = tx;
  var r = mac(acc, (*sa)[a], (*sa)[a + 16u], (*sb)[b], (*sb)[b + 16u]);
  r = mac(r, (*sa)[a + 32u], (*sa)[a + 48u], (*sb)[b + 32u], (*sb)[b + 48u]);
  r = mac(r, (*sa)[a + 64u], (*sa)[a + 80u], (*sb)[b + 64u], (*sb)[b + 80u]);
  r = mac(r, (*sa)[a + 96u], (*sa)[a + 112u], (*sb)[b + 96u], (*sb)[b + 112u]);
  r = mac(r, (*sa)[a + 128u], (*sa)[a + 144u], (*sb)[b + 128u], (*sb)[b + 144u]);
  r = mac(r, (*sa)[a + 160u], (*sa)[a + 176u], (*sb)[b + 160u], (*sb)[b + 176u]);
  r = mac(r, (*sa)[a + 192u], (*sa)[a + 208u], (*sb)[b + 192u], (*sb)[b + 208u]);
  r = mac(r, (*sa)[a + 224u], (*sa)[a + 240u], (*sb)[b + 224u], (*sb)[b + 240u]);
  r = mac(r, (*sa)[a + 256u], (*sa)[a + 272u], (*sb)[b + 256u], (*sb)[b + 272u]);
  r = mac(r, (*sa)[a + 288u], (*sa)[a + 304u], (*sb)[b + 288u], (*sb)[b + 304u]);
  r = mac(r, (*sa)[a + 320u], (*sa)[a + 336u], (*sb)[b + 320u], (*sb)[b + 336u]);
  r = mac(r, (*sa)[a + 352u], (*sa)[a + 368u], (*sb)[b + 352u], (*sb)[b + 368u]);
  r = mac(r, (*sa)[a + 384u], (*sa)[a + 400u], (*sb)[b + 384u], (*sb)[b + 400u]);
  r = mac(r, (*sa)[a + 416u], (*sa)[a + 432u], (*sb)[b + 416u], (*sb)[b + 432u]);
  r = mac(r, (*sa)[a + 448u], (*sa)[a + 464u], (*sb)[b + 448u], (*sb)[b + 464u]);
  return mac(r, (*sa)[a + 480u], (*sa)[a + 496u], (*sb)[b + 480u], (*sb)[b + 496u]);
}

fn store_acc(c: MmCtx, r: Acc, tx: u32, ty: u32) {
  let m0 = c.m0 + ty * 4u;
  let m1 = c.m0 + 64u + ty * 4u;
  let n0 = c.n0 + tx * 4u;
  let n1 = c.n0 + 64u + tx * 4u;
  store_row(c, m0, n0, n1, r.c00, r.c01);
  store_row(c, m0 + 1u, n0, n1, r.c10, r.c11);
  store_row(c, m0 + 2u, n0, n1, r.c20, r.c21);
  store_row(c, m0 + 3u, n0, n1, r.c30, r.c31);
  store_row(c, m1, n0, n1, r.c40, r.c41);
  store_row(c, m1 + 1u, n0, n1, r.c50, r.c51);
  store_row(c, m1 + 2u, n0, n1, r.c60, r.c61);
  store_row(c, m1 + 3u, n0, n1, r.c70, r.c71);
}

// The K tail slab (checked loads) into As/Bs and its k < K steps.
fn tail_slab(acc: Acc, c: MmCtx, fa: u32, fb: u32, kt: u32, lid: u32, tx: u32, ty: u32) -> Acc {
  put_slab(&As, &Bs, fa, fb, lid, fetch_a(c, kt, lid), fetch_a(c, kt, lid + 256u), fetch_b(c, kt, lid),
           fetch_b(c, kt, lid + 256u));
  workgroupBarrier();
  var r = acc;
  for (var kk = 0u; kk < c.K - kt; kk = kk + 1u) {
    r = mac(r, As[kk * 32u + ty], As[kk * 32u + 16u + ty], Bs[kk * 32u + tx], Bs[kk * 32u + 16u + tx]);
  }
  return r;
}

// Two static buffer pairs (As/Bs, As1/Bs1) and the slab loop unrolled by
// two, so every workgroup access names its buffer at compile time: slab s
// is multiplied from one pair while slab s + 1 is stored into the other
// (last read before the previous barrier), one barrier per slab.
@compute @workgroup_size(256)
fn main_f32(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let c = tile_ctx(wid);
  if (c.M == 0u) { return; } // uniform per workgroup
  let lid = ids.lid;
  let tx = lid % 16u; let ty = lid / 16u;
  let fa = pxu(MM_FAST_A); let fb = pxu(MM_FAST_B);
  var qa0 = a_quad0(c, fa, lid); var qa1 = a_quad0(c, fa, lid + 256u);
  var qb0 = b_quad0(c, fb, lid); var qb1 = b_quad0(c, fb, lid + 256u);
  let da = a_quad_step(c, fa); let db = b_quad_step(c, fb);
  let slabs = c.K / 16u;
  let z = vec4<f32>(0.0);
  var acc = Acc(z, z, z, z, z, z, z, z, z, z, z, z, z, z, z, z);
  var ra0 = z; var ra1 = z; var rb0 = z; var rb1 = z;
  if (slabs > 0u) { put_slab(&As, &Bs, fa, fb, lid, ld_quad(qa0), ld_quad(qa1), ld_quad(qb0), ld_quad(qb1)); }
  workgroupBarrier();
  var s = 0u;
  loop {
    if (s >= slabs) { break; }
    let more0 = s + 1u < slabs; // slab s from As/Bs, s + 1 into As1/Bs1
    if (more0) {
      qa0 = qa0 + da; qa1 = qa1 + da; qb0 = qb0 + db; qb1 = qb1 + db;
      ra0 = ld_quad(qa0); ra1 = ld_quad(qa1); rb0 = ld_quad(qb0); rb1 = ld_quad(qb1);
    }
    acc = mac_slab(acc, &As, &Bs, tx, ty);
    if (more0) { put_slab(&As1, &Bs1, fa, fb, lid, ra0, ra1, rb0, rb1); }
    workgroupBarrier();
    s = s + 1u;
    if (s >= slabs) { break; }
    let more1 = s + 1u < slabs; // slab s from As1/Bs1, s + 1 into As/Bs
    if (more1) {
      qa0 = qa0 + da; qa1 = qa1 + da; qb0 = qb0 + db; qb1 = qb1 + db;
      ra0 = ld_quad(qa0); ra1 = ld_quad(qa1); rb0 = ld_quad(qb0); rb1 = ld_quad(qb1);
    }
    acc = mac_slab(acc, &As1, &Bs1, tx, ty);
    if (more1) { put_slab(&As, &Bs, fa, fb, lid, ra0, ra1, rb0, rb1); }
    workgroupBarrier();
    s = s + 1u;
  }
  let kt = slabs * 16u;
  if (kt < c.K) { acc = tail_slab(acc, c, fa, fb, kt, lid, tx, ty); }
  store_acc(c, acc, tx, ty);
}
