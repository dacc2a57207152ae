// GroupedMatMul with float experts (RLX_K_GROUPED_MATMUL): one invocation
// per output element y[r, n] = sum_k x[r / x_rep, k] * W[e](k, n), e =
// idx[r]; W[e] stored [N, K] (GM_WT) or [K, N]. Products summed in f32 in
// k order. An expert index outside [0, E) (negative included) is reported
// to the host, which fails the run naming the node; its row is unwritten.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = group_linear(wid) * 64u + lid;
  if (t >= P[R_COUNT]) { return; }
  let N = pxu(GM_N);
  let K = pxu(GM_K);
  let E = pxu(GM_E);
  let n = t % N;
  let r = t / N;
  let raw = ld_i(v_dt(4u), v_off(4u), i32(r));
  if (raw.y != 0u || raw.x >= E) { report_bad_index(raw, E); return; }
  let xb = (r / pxu(GM_XREP)) * K;
  let wb = raw.x * N * K;
  // element (k, n) of W[e]: [N, K] steps by 1 along k, [K, N] by N
  var w0 = wb + n;
  var ws = N;
  if (px(GM_WT) != 0) { w0 = wb + n * K; ws = 1u; }
  let xdt = v_dt(2u);
  let xoff = v_off(2u);
  let wdt = v_dt(3u);
  let woff = v_off(3u);
  var acc = 0.0;
  for (var k = 0u; k < K; k++) {
    acc += ld_f(xdt, xoff, i32(xb + k)) * ld_f(wdt, woff, i32(w0 + k * ws));
  }
  st_f(v_dt(0u), v_off(0u), i32(t), acc);
}
