// Pool (max / average windows) and Pad (constant, reflect, edge): one
// invocation per output element (rlx_pool_params in src/passes/lower.h).
// Slots: 0 out (dense), 2 x (dense, same rank). Mode = P[R_OP].

fn pool_reflect(i0: i32, n: i32) -> i32 {
  if (n == 1) { return 0; }
  let period = 2 * (n - 1);
  var i = i0 % period;
  if (i < 0) { i = i + period; }
  return select(period - i, i, i < n);
}

// Source element of a padded output element, or -1 for the fill value.
fn pool_pad_source(mode: u32, oc: array<i32, 8>, rank: u32) -> i32 {
  var off = 0;
  for (var d = 0u; d < rank; d = d + 1u) {
    let n = i32(v_shape(2u, d));
    var i = oc[d] - px(PL_PAD + d);
    if (i < 0 || i >= n) {
      if (mode == PL_PAD_CONSTANT) { return -1; }
      if (mode == PL_PAD_EDGE) { i = select(n - 1, 0, i < 0); }
      else if (mode == PL_PAD_WRAP) { i = ((i % n) + n) % n; }
      else { i = pool_reflect(i, n); }
    }
    off = off + i * v_stride(2u, d);
  }
  return off;
}

// The max / average of the window and (y) the input index of the first
// maximum (-1 if no tap is inside).
fn pool_window(mode: u32, oc: array<i32, 8>, rank: u32) -> vec2<f32> {
  let xdt = v_dt(2u);
  let xoff = v_off(2u);
  var acc = select(0.0, -inf_f(), mode == PL_MAX);
  var inside = 0;
  var padded = 0;
  var at = -1;
  let taps = pxu(PL_TAPS);
  for (var t = 0u; t < taps; t = t + 1u) {
    var rem = t;
    var off = 0;
    var in_x = true;
    var in_pad = true;
    for (var dd = i32(rank) - 1; dd >= 0; dd = dd - 1) {
      let d = u32(dd);
      let kd = pxu(PL_KERNEL + d);
      let k = i32(rem % kd);
      rem = rem / kd;
      let pad = px(PL_PAD + d);
      let n = i32(v_shape(2u, d));
      let i = oc[d] * px(PL_STRIDE + d) - pad + k * px(PL_DIL + d);
      if (i < 0 || i >= n) { in_x = false; }
      if (i < -pad || i >= n + px(PL_PAD_END + d)) { in_pad = false; }
      off = off + i * v_stride(2u, d);
    }
    if (in_pad) { padded = padded + 1; }
    if (!in_x) { continue; }
    inside = inside + 1;
    let v = ld_f(xdt, xoff, off);
    if (mode == PL_MAX) {
      if (at < 0 || ((v > acc || is_nan(v)) && !is_nan(acc))) { acc = v; at = off; }
    } else {
      acc = acc + v;
    }
  }
  if (mode == PL_MAX) { return vec2<f32>(acc, bitcast<f32>(at)); }
  let count = select(inside, padded, px(PL_CIP) != 0);
  if (count == 0) { return vec2<f32>(nan_f(), 0.0); }
  return vec2<f32>(acc / f32(count), 0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let gid = group_linear(wid) * 64u + lid;
  if (gid >= P[R_COUNT]) { return; }
  let rank = pxu(PL_RANK);
  let mode = P[R_OP];
  var oc: array<i32, 8>;
  var rem = gid;
  for (var dd = i32(rank) - 1; dd >= 0; dd = dd - 1) {
    let n = v_shape(0u, u32(dd));
    oc[dd] = i32(rem % n);
    rem = rem / n;
  }
  let odt = v_dt(0u);
  let ooff = v_off(0u);
  if (mode >= PL_PAD_CONSTANT) {
    let src = pool_pad_source(mode, oc, rank);
    if (src < 0) { st_f(odt, ooff, i32(gid), pf(R_X + PL_VALUE)); }
    else { copy_elem(odt, ooff, i32(gid), v_dt(2u), v_off(2u), src); }
    return;
  }
  let r = pool_window(mode, oc, rank);
  if (px(PL_INDEX_OUT) != 0) { st_i(odt, ooff, i32(gid), i64_from_i32(bitcast<i32>(r.y))); }
  else { st_f(odt, ooff, i32(gid), r.x); }
}
