// Channel-wise norms (GroupNorm, InstanceNorm, LayerNorm2d, BatchNorm):
// one 256-wide workgroup per group (o, i) of n elements, inner apart (see
// rlx_gnorm_params in src/passes/lower.h). Mean, then the biased variance
// about it (f32), then the per-channel affine; BatchNorm (has_stats) reads
// the group's mean and var instead. Slots: 0 out, 2 x, 3 gamma, 4 beta,
// 5 mean, 6 var.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let lid = ids.lid;
  let item = group_linear(wid);
  if (item >= P[R_COUNT]) { return; }
  let n = pxu(GN_N);
  let inner = pxu(GN_INNER);
  let groups = pxu(GN_GROUPS);
  let cdiv = pxu(GN_CDIV);
  let o = item / inner;
  let base = o * n * inner + item % inner;
  var mean = 0.0;
  var var_ = 0.0;
  if (px(GN_HAS_STATS) != 0) {
    mean = ld_f(v_dt(5u), v_off(5u), i32(o % groups));
    var_ = ld_f(v_dt(6u), v_off(6u), i32(o % groups));
  } else {
    var s = 0.0;
    for (var j = lid; j < n; j = j + 256u) {
      s = s + ld_f(v_dt(2u), v_off(2u), i32(base + j * inner));
    }
    mean = wg_sum(s, ids, 256u) / f32(n);
    var ss = 0.0;
    for (var j = lid; j < n; j = j + 256u) {
      let d = ld_f(v_dt(2u), v_off(2u), i32(base + j * inner)) - mean;
      ss = ss + d * d;
    }
    var_ = wg_sum(ss, ids, 256u) / f32(n);
  }
  let inv = 1.0 / sqrt_f(var_ + pf(R_X + GN_EPS));
  let cbase = (o % groups) * n;
  // Everything is read before anything is written (out may alias x).
  workgroupBarrier();
  for (var j = lid; j < n; j = j + 256u) {
    let e = i32(base + j * inner);
    let c = i32((cbase + j) / cdiv);
    var y = (ld_f(v_dt(2u), v_off(2u), e) - mean) * inv;
    if (px(GN_HAS_GAMMA) != 0) { y = y * ld_f(v_dt(3u), v_off(3u), c); }
    if (px(GN_HAS_BETA) != 0) { y = y + ld_f(v_dt(4u), v_off(4u), c); }
    st_f(v_dt(0u), v_off(0u), e, y);
  }
}
