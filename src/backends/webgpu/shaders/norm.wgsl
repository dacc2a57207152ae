// LayerNorm / RmsNorm (optionally of x + residual [+ bias], also written
// out): one 256-wide workgroup per row (subgroup or workgroup reductions).
// The pre-norm sum is rounded to the output dtype before it is normalised,
// as the reference does. Slots: 0 norm out,
// 1 sum out, 2 x, 3 residual, 4 bias, 5 gamma, 6 beta.

fn pre_norm(r: u32, c: u32) -> f32 {
  let e = i32(r * pxu(NM_COLS) + c);
  var x = ld_f(v_dt(2u), v_off(2u), e);
  if (px(NM_HAS_RES) != 0) {
    x = x + ld_f(v_dt(3u), v_off(3u), e);
    if (px(NM_HAS_BIAS) != 0) { x = x + ld_f(v_dt(4u), v_off(4u), i32(c)); }
    x = round_to(v_dt(0u), x);
  }
  return x;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let lid = ids.lid;
  let r = group_linear(wid);
  if (r >= pxu(NM_ROWS)) { return; }
  let cols = pxu(NM_COLS);
  let rms = px(NM_RMS) != 0;
  var mean = 0.0;
  if (!rms) {
    var s = 0.0;
    for (var c = lid; c < cols; c = c + 256u) { s = s + pre_norm(r, c); }
    mean = wg_sum(s, ids, 256u) / f32(cols);
  }
  var ss = 0.0;
  for (var c = lid; c < cols; c = c + 256u) { let d = pre_norm(r, c) - mean; ss = ss + d * d; }
  let ms = wg_sum(ss, ids, 256u) / f32(cols);
  let inv = 1.0 / sqrt_f(ms + pf(R_X + NM_EPS));
  let writes_sum = px(NM_WRITES_SUM) != 0;
  // Everything is read before anything is written (outputs may alias x).
  workgroupBarrier();
  for (var c = lid; c < cols; c = c + 256u) {
    let x = pre_norm(r, c);
    var y = (x - mean) * inv;
    if (px(NM_HAS_GAMMA) != 0) { y = y * ld_f(v_dt(5u), v_off(5u), i32(c)); }
    if (px(NM_HAS_BETA) != 0) { y = y + ld_f(v_dt(6u), v_off(6u), i32(c)); }
    let e = i32(r * cols + c);
    if (writes_sum) { st_f(v_dt(1u), v_off(1u), e, x); }
    st_f(v_dt(0u), v_off(0u), e, y);
  }
}
