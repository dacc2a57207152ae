// Matrix-vector products (decode shapes): C[M, N] = act(A[M, K] . B + bias)
// for M <= 4 rows, f32 operands, one batch. Bandwidth bound: each weight
// element is read once, inside a 16-byte load, and used for all M rows, so
// the 16x16 tile kernel's 16-fold waste on M = 1 disappears. The host picks
// this kernel only when B loads as vec4 in one of two layouts:
//
//  - MM_FAST_B = 1, B[K, N] (n contiguous): a workgroup owns 16 columns; its
//    256 invocations are 4 column quads x 64 k lanes (lane l sums k = l,
//    l + 64, ...); the 64 partials of a quad are summed in workgroup memory.
//  - MM_FAST_B = 2, B[N, K] (k contiguous, a transposed weight): a workgroup
//    owns 8 columns of 32 lanes; lane l sums the quads k = 4l, 4l + 128, ...
//    and the 32 partials of a column are summed in workgroup memory.
//
// The M accumulators are named vec4s, never an array indexed in a loop
// (arrays may be placed in local memory). f32 accumulation split over lanes:
// the order differs from the reference's, within the f32 tolerance.

var<workgroup> red: array<vec4<f32>, 1024>; // [4 rows m][256 invocations]

struct GvCtx { M: u32, N: u32, K: u32, a_base: u32, ars: u32, acs: u32 }

fn gv_a(c: GvCtx, m: u32, k: u32) -> f32 {
  return bitcast<f32>(lw(c.a_base + m * c.ars + k * c.acs));
}
fn gv_a4(c: GvCtx, m: u32, k: u32) -> vec4<f32> {
  return vec4<f32>(gv_a(c, m, k), gv_a(c, m, k + 1u), gv_a(c, m, k + 2u), gv_a(c, m, k + 3u));
}

fn gv_store(c: GvCtx, m: u32, n: u32, acc: f32) {
  if (m >= c.M || n >= c.N) { return; }
  var v = acc;
  if (px(MM_HAS_BIAS) != 0) { v = v + ld_f(v_dt(4u), v_off(4u), i32(n)); }
  v = activation(pxu(MM_ACT), v);
  st_f(v_dt(0u), v_off(0u), i32(m) * px(MM_CRS) + i32(n), v);
}

fn gv_stash(t: u32, a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>) {
  red[t] = a0; red[256u + t] = a1; red[512u + t] = a2; red[768u + t] = a3;
}

// red[m][t] += red[m][t + o] for the rows in use.
fn gv_add(t: u32, o: u32, M: u32) {
  red[t] = red[t] + red[t + o];
  if (M > 1u) { red[256u + t] = red[256u + t] + red[256u + t + o]; }
  if (M > 2u) { red[512u + t] = red[512u + t] + red[512u + t + o]; }
  if (M > 3u) { red[768u + t] = red[768u + t] + red[768u + t + o]; }
}

// Accumulators of the M rows (named members: they stay in registers).
struct GvAcc { a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32> }

// Adds A[m, k] * w (w: 4 columns of weight row k) for the rows in use.
fn gv_fma_kn(c: GvCtx, s: GvAcc, k: u32, w: vec4<f32>) -> GvAcc {
  var r = s;
  r.a0 = fma(vec4<f32>(gv_a(c, 0u, k)), w, r.a0);
  if (c.M > 1u) { r.a1 = fma(vec4<f32>(gv_a(c, 1u, k)), w, r.a1); }
  if (c.M > 2u) { r.a2 = fma(vec4<f32>(gv_a(c, 2u, k)), w, r.a2); }
  if (c.M > 3u) { r.a3 = fma(vec4<f32>(gv_a(c, 3u, k)), w, r.a3); }
  return r;
}

// Weight quad of row k at column n (B[K, N]).
fn gv_w(b_base: u32, brs: u32, k: u32, n: u32) -> vec4<f32> {
  return bitcast<vec4<f32>>(A[(b_base + k * brs + n) >> 2u]);
}

// Lane l of columns n..n+3 over k = l, l + 64, ...: four weight rows per
// trip, loaded before any is used, keep four 16-byte loads in flight.
fn gv_sum_kn(c: GvCtx, n: u32, lane: u32) -> GvAcc {
  let b_base = v_off(3u) >> 2u;
  let brs = pxu(MM_BRS);
  var s = GvAcc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  var k = lane;
  for (; k + 192u < c.K; k = k + 256u) {
    let w0 = gv_w(b_base, brs, k, n); let w1 = gv_w(b_base, brs, k + 64u, n);
    let w2 = gv_w(b_base, brs, k + 128u, n); let w3 = gv_w(b_base, brs, k + 192u, n);
    s = gv_fma_kn(c, s, k, w0);
    s = gv_fma_kn(c, s, k + 64u, w1);
    s = gv_fma_kn(c, s, k + 128u, w2);
    s = gv_fma_kn(c, s, k + 192u, w3);
  }
  for (; k < c.K; k = k + 64u) { s = gv_fma_kn(c, s, k, gv_w(b_base, brs, k, n)); }
  return s;
}

// acc + x . (w0, w1, w2, w3): four weight rows scaled by one activation quad.
fn gv_fma4(acc: vec4<f32>, x: vec4<f32>, w0: vec4<f32>, w1: vec4<f32>, w2: vec4<f32>,
           w3: vec4<f32>) -> vec4<f32> {
  return fma(vec4<f32>(x.w), w3, fma(vec4<f32>(x.z), w2, fma(vec4<f32>(x.y), w1,
             fma(vec4<f32>(x.x), w0, acc))));
}

fn gv_a_quad(c: GvCtx, m: u32, k: u32) -> vec4<f32> {
  return bitcast<vec4<f32>>(A[(c.a_base + m * c.ars + k) >> 2u]);
}

// The same when A's rows load as quads (MM_FAST_A = 1: K % 4 == 0, rows
// contiguous at 16-byte offsets): lane l owns the k quads 4l, 4l + 256, ...,
// one 16-byte activation load per four weight rows.
fn gv_sum_kn4(c: GvCtx, n: u32, lane: u32) -> GvAcc {
  let b_base = v_off(3u) >> 2u;
  let brs = pxu(MM_BRS);
  var s = GvAcc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  for (var k = 4u * lane; k < c.K; k = k + 256u) {
    let w0 = gv_w(b_base, brs, k, n); let w1 = gv_w(b_base, brs, k + 1u, n);
    let w2 = gv_w(b_base, brs, k + 2u, n); let w3 = gv_w(b_base, brs, k + 3u, n);
    s.a0 = gv_fma4(s.a0, gv_a_quad(c, 0u, k), w0, w1, w2, w3);
    if (c.M > 1u) { s.a1 = gv_fma4(s.a1, gv_a_quad(c, 1u, k), w0, w1, w2, w3); }
    if (c.M > 2u) { s.a2 = gv_fma4(s.a2, gv_a_quad(c, 2u, k), w0, w1, w2, w3); }
    if (c.M > 3u) { s.a3 = gv_fma4(s.a3, gv_a_quad(c, 3u, k), w0, w1, w2, w3); }
  }
  return s;
}

// B[K, N]: 4 column quads x 64 k lanes; the 64 partials of a quad are summed
// in workgroup memory.
fn gemv_kn(c: GvCtx, g: u32, t: u32) {
  let q = t & 3u; let lane = t >> 2u;
  let n = g * 16u + 4u * q;
  var s = GvAcc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  if (n < c.N) {
    if (pxu(MM_FAST_A) == 1u) { s = gv_sum_kn4(c, n, lane); } else { s = gv_sum_kn(c, n, lane); }
  }
  let a0 = s.a0; let a1 = s.a1; let a2 = s.a2; let a3 = s.a3;
  gv_stash(t, a0, a1, a2, a3);
  workgroupBarrier();
  // lanes of a quad are 4 apart: halve over offsets 128, 64, .. 4
  for (var s = 128u; s >= 4u; s = s >> 1u) {
    if (t < s) { gv_add(t, s, c.M); }
    workgroupBarrier();
  }
  if (t < 4u) {
    for (var m = 0u; m < c.M; m = m + 1u) {
      let v = red[m * 256u + t];
      gv_store(c, m, n, v.x); gv_store(c, m, n + 1u, v.y);
      gv_store(c, m, n + 2u, v.z); gv_store(c, m, n + 3u, v.w);
    }
  }
}

// B[N, K]: 8 columns x 32 k lanes.
fn gemv_nk(c: GvCtx, g: u32, t: u32) {
  let col = t >> 5u; let lane = t & 31u;
  let n = g * 8u + col;
  let b_base = v_off(3u) >> 2u;
  let bcs = pxu(MM_BCS);
  var a0 = vec4<f32>(0.0); var a1 = a0; var a2 = a0; var a3 = a0;
  if (n < c.N) {
    for (var k = 4u * lane; k < c.K; k = k + 128u) {
      let w = bitcast<vec4<f32>>(A[(b_base + n * bcs + k) >> 2u]);
      a0 = fma(gv_a4(c, 0u, k), w, a0);
      if (c.M > 1u) { a1 = fma(gv_a4(c, 1u, k), w, a1); }
      if (c.M > 2u) { a2 = fma(gv_a4(c, 2u, k), w, a2); }
      if (c.M > 3u) { a3 = fma(gv_a4(c, 3u, k), w, a3); }
    }
  }
  gv_stash(t, a0, a1, a2, a3);
  workgroupBarrier();
  for (var s = 16u; s > 0u; s = s >> 1u) {
    if (lane < s) { gv_add(t, s, c.M); }
    workgroupBarrier();
  }
  if (lane == 0u) {
    for (var m = 0u; m < c.M; m = m + 1u) {
      let v = red[m * 256u + t];
      gv_store(c, m, n, (v.x + v.y) + (v.z + v.w));
    }
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let g = group_linear(wid);
  var c: GvCtx;
  c.M = pxu(MM_M); c.N = pxu(MM_N); c.K = pxu(MM_K);
  // R_COUNT counts the 16x16 kernel's tiles: bound by the columns instead
  let per_group = select(8u, 16u, pxu(MM_FAST_B) == 1u);
  if (g * per_group >= c.N) { return; } // uniform per workgroup
  c.a_base = v_off(2u) >> 2u;
  c.ars = pxu(MM_ARS); c.acs = pxu(MM_ACS);
  if (pxu(MM_FAST_B) == 1u) { gemv_kn(c, g, ids.lid); } else { gemv_nk(c, g, ids.lid); }
}
