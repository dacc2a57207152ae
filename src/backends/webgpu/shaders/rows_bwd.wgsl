// Row-wise backward kinds: one 256-wide workgroup per row, f32 sums through
// wg_sum (host prelude: subgroups or a fixed-order tree, deterministic).
//   norm_bwd_main (NORM_BWD): dx of LayerNorm / RmsNorm rows of NM_COLS
//     contiguous elements; the row's statistics are recomputed from x, then
//     dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat)) (RMS: no
//     mean(g*dy) term). Slots: 0 dx, 2 x, 3 gamma, 4 dy.
//   softmax_bwd_main (SOFTMAX_BWD): rows of a dense [outer, n, inner]
//     tensor; softmax (op 0) dx = y * (dy - sum(dy*y)), log-softmax (op 1)
//     dx = dy - exp(y) * sum(dy). Slots: 0 dx, 2 y, 3 dy.

fn ld_slot(slot: u32, e: u32) -> f32 { return ld_f(v_dt(slot), v_off(slot), i32(e)); }

fn gamma_at(c: u32) -> f32 {
  if (px(NM_HAS_GAMMA) != 0) { return ld_slot(3u, c); }
  return 1.0;
}

@compute @workgroup_size(256)
fn norm_bwd_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let lid = ids.lid;
  let r = group_linear(wid);
  if (r >= pxu(NM_ROWS)) { return; }
  let cols = pxu(NM_COLS);
  let base = r * cols;
  var s = 0.0;
  for (var c = lid; c < cols; c = c + 256u) { s = s + ld_slot(2u, base + c); }
  var mean = wg_sum(s, ids, 256u) / f32(cols);
  if (px(NM_RMS) != 0) { mean = 0.0; }
  var ss = 0.0;
  for (var c = lid; c < cols; c = c + 256u) { let d = ld_slot(2u, base + c) - mean; ss = ss + d * d; }
  let rstd = 1.0 / sqrt_f(wg_sum(ss, ids, 256u) / f32(cols) + pf(R_X + NM_EPS));
  var sum_gdy = 0.0;
  var sum_gdy_xhat = 0.0;
  for (var c = lid; c < cols; c = c + 256u) {
    let gdy = gamma_at(c) * ld_slot(4u, base + c);
    let xhat = (ld_slot(2u, base + c) - mean) * rstd;
    sum_gdy = sum_gdy + gdy;
    sum_gdy_xhat = sum_gdy_xhat + gdy * xhat;
  }
  var a = wg_sum(sum_gdy, ids, 256u) / f32(cols);
  let b = wg_sum(sum_gdy_xhat, ids, 256u) / f32(cols);
  if (px(NM_RMS) != 0) { a = 0.0; }
  for (var c = lid; c < cols; c = c + 256u) {
    let gdy = gamma_at(c) * ld_slot(4u, base + c);
    let xhat = (ld_slot(2u, base + c) - mean) * rstd;
    st_f(v_dt(0u), v_off(0u), i32(base + c), rstd * (gdy - a - xhat * b));
  }
}

fn bwd_elem(o: u32, i: u32, j: u32) -> u32 { return (o * pxu(RW_N) + i) * pxu(RW_INNER) + j; }

@compute @workgroup_size(256)
fn softmax_bwd_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let lid = ids.lid;
  let row = group_linear(wid);
  let inner = pxu(RW_INNER);
  if (row >= pxu(RW_OUTER) * inner) { return; }
  let o = row / inner; let j = row % inner;
  let n = pxu(RW_N);
  let logsm = P[R_OP] == 1u;
  var acc = 0.0;
  for (var i = lid; i < n; i = i + 256u) {
    let e = bwd_elem(o, i, j);
    let dy = ld_slot(3u, e);
    acc = acc + select(dy * ld_slot(2u, e), dy, logsm);
  }
  acc = wg_sum(acc, ids, 256u);
  for (var i = lid; i < n; i = i + 256u) {
    let e = bwd_elem(o, i, j);
    let y = ld_slot(2u, e); let dy = ld_slot(3u, e);
    st_f(v_dt(0u), v_off(0u), i32(e), select(y * (dy - acc), dy - exp_f(y) * acc, logsm));
  }
}
