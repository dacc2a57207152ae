// DequantMatMul (RLX_K_DEQUANT_MATMUL): y = x . W^T with W [N, K] stored
// quantized row by row, or y [M, K] = x [M, N] . W in the gradient's role.
// W's runs of 16 elements are decoded by quant.wgsl (prepended).
//
// Entry points (wg_encode.c picks one per step):
//  - gemv_main (decode, M <= 4): a workgroup of 64 per W row; lane l
//    decodes runs l, l + 64, ..., each element once for all M rows;
//    partials summed in workgroup memory.
//  - tile_main (larger M): a 64 x 64 tile of y per workgroup of 256; W is
//    dequantized a 64-row x 32-k slice at a time into workgroup memory.
//  - t_main (transposed role): an invocation per 4 rows of x and one
//    column of y, walking W's N rows.
// f32 accumulation (the reference sums in double): within f32 tolerance.

fn dq_x(i: u32) -> f32 {
  if (dq_xdt == DT_F32) { return bitcast<f32>(lw((dq_xoff >> 2u) + i)); }
  return ld_f(dq_xdt, dq_xoff, i32(i));
}

fn dq_store(i: u32, v: f32) { st_f(v_dt(0u), v_off(0u), i32(i), v); }

// ------------------------------------------------------------ decode GEMV

var<workgroup> dq_red: array<f32, 256>; // [4 rows m][64 lanes]

@compute @workgroup_size(64)
fn gemv_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let n = group_linear(wid);
  if (n >= P[R_COUNT]) { return; } // uniform per workgroup
  dq_init(4u);
  let M = pxu(DQ_M); let N = pxu(DQ_N); let runs = pxu(DQ_RUNS);
  var acc = vec4<f32>(0.0);
  for (var r = t; r < runs; r += 64u) {
    let k0 = 16u * r;
    let len = min(16u, dq_K - k0);
    let run = dq_setup(n, k0);
    for (var j = 0u; j < len; j++) {
      let w = dq_elem(run, j);
      for (var m = 0u; m < M; m++) { acc[m] = acc[m] + dq_x(m * dq_K + k0 + j) * w; }
    }
  }
  for (var m = 0u; m < 4u; m++) { dq_red[m * 64u + t] = acc[m]; }
  workgroupBarrier();
  for (var s = 32u; s > 0u; s = s >> 1u) {
    if (t < s) {
      for (var m = 0u; m < 4u; m++) { dq_red[m * 64u + t] = dq_red[m * 64u + t] + dq_red[m * 64u + t + s]; }
    }
    workgroupBarrier();
  }
  if (t < M) { dq_store(t * N + n, dq_red[t * 64u]); }
}

// ------------------------------------------------------------ prefill tiles

var<workgroup> dq_xs: array<f32, 2080>; // [32 k][65]: the tile's x slice (padded rows)
var<workgroup> dq_ws: array<f32, 2080>; // [32 k][65]: the dequantized W slice

@compute @workgroup_size(256)
fn tile_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let tile = group_linear(wid);
  if (tile >= P[R_COUNT]) { return; } // uniform per workgroup
  dq_init(4u);
  let M = pxu(DQ_M); let N = pxu(DQ_N); let K = pxu(DQ_K); let tiles_n = pxu(DQ_TILES_N);
  let m0 = tile / tiles_n * 64u; let n0 = tile % tiles_n * 64u;
  let tx = t % 16u; let ty = t / 16u;
  var acc: array<vec4<f32>, 4>; // acc[i][j]: row m0 + 4 ty + i, column n0 + 4 tx + j
  for (var k0 = 0u; k0 < K; k0 += 32u) {
    { // 64 W rows x 32 k: invocation t decodes 8 elements of one run
      let nn = t / 4u; let kk = 8u * (t % 4u);
      let live = n0 + nn < N && k0 + kk < K;
      var run: DqRun;
      if (live) { run = dq_setup(n0 + nn, k0 + (kk & ~15u)); }
      for (var j = 0u; j < 8u; j++) {
        var w = 0.0;
        if (live) { w = dq_elem(run, (kk & 15u) + j); }
        dq_ws[(kk + j) * 65u + nn] = w;
      }
    }
    for (var q = 0u; q < 8u; q++) { // 64 x rows x 32 k
      let i = t + 256u * q; let mm = i / 32u; let kk = i % 32u;
      let m = m0 + mm; let k = k0 + kk;
      var v = 0.0;
      if (m < M && k < K) { v = dq_x(m * K + k); }
      dq_xs[kk * 65u + mm] = v;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 32u; kk++) {
      let xa = kk * 65u + 4u * ty; let wb = kk * 65u + 4u * tx;
      let b = vec4<f32>(dq_ws[wb], dq_ws[wb + 1u], dq_ws[wb + 2u], dq_ws[wb + 3u]);
      acc[0] = acc[0] + dq_xs[xa] * b;
      acc[1] = acc[1] + dq_xs[xa + 1u] * b;
      acc[2] = acc[2] + dq_xs[xa + 2u] * b;
      acc[3] = acc[3] + dq_xs[xa + 3u] * b;
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 4u; j++) {
      let m = m0 + 4u * ty + i; let n = n0 + 4u * tx + j;
      if (m < M && n < N) { dq_store(m * N + n, acc[i][j]); }
    }
  }
}

// ------------------------------------------------------------ transposed role

// An invocation per 4 rows of x and one column k of y, walking W's rows.
@compute @workgroup_size(64)
fn t_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let item = group_linear(wid) * 64u + lid;
  if (item >= P[R_COUNT]) { return; }
  dq_init(4u);
  let M = pxu(DQ_M); let N = pxu(DQ_N);
  let m0 = 4u * (item / dq_K); let k = item % dq_K;
  var acc = vec4<f32>(0.0);
  for (var n = 0u; n < N; n++) {
    let w = dq_elem(dq_setup(n, k & ~15u), k & 15u);
    for (var i = 0u; i < 4u; i++) {
      if (m0 + i < M) { acc[i] = acc[i] + dq_x((m0 + i) * N + n) * w; }
    }
  }
  for (var i = 0u; i < 4u; i++) {
    if (m0 + i < M) { dq_store((m0 + i) * dq_K + k, acc[i]); }
  }
}
