// DequantGroupedMatMul (RLX_K_GROUPED_MATMUL with a quant scheme): y[r, n] =
// sum_k x[r / x_rep, k] * W[e](k, n), e = idx[r]. Expert e's W is stored
// quantized row by row and decoded by quant.wgsl (prepended; the decoders
// DequantMatMul uses), its stored rows numbered across experts (row i of
// expert e is e * rows + i): with GQ_WT W[e] is [N, K] (row n holds k),
// else [K, N] (row k holds n; the gradient's role). Record: the DQ_* words
// quant.wgsl reads (DQ_K = elements per stored row) and GQ_*; slots 2 x,
// 3 w, 4 idx, 5 scale, 6 aux.
//
// Entry points (wg_encode.c picks one per step):
//  - gemv_main (decode, M <= 4): a workgroup of 64 per output element;
//    the lanes split the dot (runs of 16 along row n with GQ_WT, one
//    element of each row k otherwise), partials summed in workgroup memory.
//  - tile_main (prefill): a 64 x 64 tile of y over rows in idx order per
//    workgroup of 256. For each distinct expert among the tile's rows, in
//    increasing order, W[e] is dequantized a 64-n x 32-k slice at a time
//    into workgroup memory beside x's slice, where rows of other experts
//    are 0, and that expert's rows are stored after its pass: W is decoded
//    once per tile and expert, never per row.
// A bad expert index is reported to the host (the run fails naming the
// node) and its row is left unwritten, as grouped.wgsl does. f32
// accumulation (the reference sums in double).

fn gq_x(i: u32) -> f32 {
  if (dq_xdt == DT_F32) { return bitcast<f32>(lw((dq_xoff >> 2u) + i)); }
  return ld_f(dq_xdt, dq_xoff, i32(i));
}

fn gq_store(i: u32, v: f32) { st_f(v_dt(0u), v_off(0u), i32(i), v); }

// Row r's expert, or E (reported) when outside [0, E) (negative included).
fn gq_expert(r: u32, E: u32) -> u32 {
  let raw = ld_i(v_dt(4u), v_off(4u), i32(r));
  if (raw.y != 0u || raw.x >= E) {
    report_bad_index(raw, E);
    return E;
  }
  return raw.x;
}

// ------------------------------------------------------------ decode GEMV

var<workgroup> gq_red: array<f32, 64>;

@compute @workgroup_size(64)
fn gemv_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let item = group_linear(wid);
  if (item >= P[R_COUNT]) { return; } // uniform per workgroup
  dq_init(5u);
  let N = pxu(GQ_N); let K = pxu(GQ_K); let E = pxu(GQ_E);
  let n = item % N; let r = item / N;
  let e = gq_expert(r, E);
  var acc = 0.0;
  if (e < E) { // every lane still reaches the barriers below
    let xb = (r / pxu(GQ_XREP)) * K;
    if (px(GQ_WT) != 0) { // row e * N + n holds the dot's K weights
      let row = e * N + n;
      for (var k0 = 16u * t; k0 < K; k0 += 16u * 64u) {
        let run = dq_setup(row, k0);
        let len = min(16u, K - k0);
        for (var j = 0u; j < len; j++) { acc += gq_x(xb + k0 + j) * dq_elem(run, j); }
      }
    } else { // weight k is element n of row e * K + k
      for (var k = t; k < K; k += 64u) {
        acc += gq_x(xb + k) * dq_elem(dq_setup(e * K + k, n & ~15u), n & 15u);
      }
    }
  }
  gq_red[t] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s = s >> 1u) {
    if (t < s) { gq_red[t] = gq_red[t] + gq_red[t + s]; }
    workgroupBarrier();
  }
  if (t == 0u && e < E) { gq_store(item, gq_red[0]); }
}

// ------------------------------------------------------------ prefill tiles

var<workgroup> gq_xs: array<f32, 2080>; // [32 k][65 m]: x's slice, the pass's rows only
var<workgroup> gq_ws: array<f32, 2080>; // [32 k][65 n]: the pass's dequantized W slice
var<workgroup> gq_row_e: array<u32, 64>; // expert of each tile row (E: past M or bad)
var<workgroup> gq_cur: u32;              // the pass's expert (E: none left)

// The W slice of expert e at (k0, n0) into gq_ws: 8 elements of one run per
// invocation. Elements past the stored row are 0 (quant.wgsl), rows past
// the expert's are skipped.
fn gq_fill_w(e: u32, k0: u32, n0: u32, N: u32, K: u32, wt: bool, t: u32) {
  if (wt) { // 64 rows n x 32 k
    let nn = t / 4u; let kk = 8u * (t % 4u);
    let live = n0 + nn < N && k0 + kk < K;
    var run: DqRun;
    if (live) { run = dq_setup(e * N + n0 + nn, k0 + (kk & ~15u)); }
    for (var j = 0u; j < 8u; j++) {
      var w = 0.0;
      if (live) { w = dq_elem(run, (kk & 15u) + j); }
      gq_ws[(kk + j) * 65u + nn] = w;
    }
  } else { // 32 rows k x 64 n
    let kk = t / 8u; let nn = 8u * (t % 8u);
    let live = k0 + kk < K && n0 + nn < N;
    var run: DqRun;
    if (live) { run = dq_setup(e * K + k0 + kk, n0 + (nn & ~15u)); }
    for (var j = 0u; j < 8u; j++) {
      var w = 0.0;
      if (live) { w = dq_elem(run, (nn & 15u) + j); }
      gq_ws[kk * 65u + nn + j] = w;
    }
  }
}

@compute @workgroup_size(256)
fn tile_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let tile = group_linear(wid);
  if (tile >= P[R_COUNT]) { return; } // uniform per workgroup
  dq_init(5u);
  let M = pxu(GQ_M); let N = pxu(GQ_N); let K = pxu(GQ_K); let E = pxu(GQ_E);
  let xrep = pxu(GQ_XREP); let wt = px(GQ_WT) != 0; let tiles_n = pxu(GQ_TILES_N);
  let m0 = tile / tiles_n * 64u; let n0 = tile % tiles_n * 64u;
  let tx = t % 16u; let ty = t / 16u;
  if (t < 64u) {
    var ex = E;
    if (m0 + t < M) { ex = gq_expert(m0 + t, E); }
    gq_row_e[t] = ex;
  }
  var done = 0u; // experts below this one have been stored
  loop {
    workgroupBarrier();
    if (t == 0u) { // the smallest expert not yet stored among the rows
      var next = E;
      for (var i = 0u; i < 64u; i++) {
        let x = gq_row_e[i];
        if (x >= done && x < next) { next = x; }
      }
      gq_cur = next;
    }
    let e = workgroupUniformLoad(&gq_cur);
    if (e >= E) { break; }
    var acc: array<vec4<f32>, 4>; // acc[i][j]: row m0 + 4 ty + i, column n0 + 4 tx + j
    for (var k0 = 0u; k0 < K; k0 += 32u) {
      gq_fill_w(e, k0, n0, N, K, wt, t);
      for (var q = 0u; q < 8u; q++) { // 64 x rows x 32 k
        let i = t + 256u * q; let mm = i / 32u; let kx = i % 32u;
        let k = k0 + kx;
        var v = 0.0;
        if (gq_row_e[mm] == e && k < K) { v = gq_x(((m0 + mm) / xrep) * K + k); }
        gq_xs[kx * 65u + mm] = v;
      }
      workgroupBarrier();
      for (var kk = 0u; kk < 32u; kk++) {
        let xa = kk * 65u + 4u * ty; let wb = kk * 65u + 4u * tx;
        let b = vec4<f32>(gq_ws[wb], gq_ws[wb + 1u], gq_ws[wb + 2u], gq_ws[wb + 3u]);
        acc[0] = acc[0] + gq_xs[xa] * b;
        acc[1] = acc[1] + gq_xs[xa + 1u] * b;
        acc[2] = acc[2] + gq_xs[xa + 2u] * b;
        acc[3] = acc[3] + gq_xs[xa + 3u] * b;
      }
      workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
      for (var j = 0u; j < 4u; j++) {
        let mm = 4u * ty + i; let n = n0 + 4u * tx + j;
        if (gq_row_e[mm] == e && n < N) { gq_store((m0 + mm) * N + n, acc[i][j]); }
      }
    }
    done = e + 1u;
  }
}
