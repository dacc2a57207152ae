// Resize (nearest / linear / cubic): one invocation per output element
// (rlx_resize_params in src/passes/lower.h). Slots: 0 out (dense), 2 x
// (dense, same rank). Mode = P[R_OP]. Coordinates are the step's affine
// coefficients in f32; the host sends steps whose nearest rounding f32
// could change to the fallback (rlx_resize_params.f32_exact).

// Nearest rounding of x (rlx_resize_round in src/base/scalar_math.h).
fn resize_round(how: u32, x: f32) -> f32 {
  let f = floor(x);
  if (how == RZ_ROUND_PREFER_CEIL) { return floor(x + 0.5); }
  if (how == RZ_FLOOR) { return f; }
  if (how == RZ_ROUND_PREFER_FLOOR) { return select(floor(x + 0.5), f, x - f == 0.5); }
  return ceil(x);
}

// Keys cubic weight at distance t (rlx_cubic_weight).
fn resize_cubic(a: f32, t0: f32) -> f32 {
  let t = abs(t0);
  if (t <= 1.0) { return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0; }
  if (t < 2.0) { return ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a; }
  return 0.0;
}

struct ResizeTaps {
  n: u32,
  idx: array<i32, 4>,
  w: array<f32, 4>,
}

// Taps of coordinate x along a dim of n elements (rlx_resize_taps):
// clamped indices and weights.
fn resize_taps(mode: u32, x: f32, n: i32) -> ResizeTaps {
  var r: ResizeTaps;
  let f = floor(x);
  let base = i32(f);
  if (mode == RZ_MODE_NEAREST) {
    r.idx[0] = i32(resize_round(pxu(RZ_NEAREST), x));
    r.w[0] = 1.0;
    r.n = 1u;
  } else if (mode == RZ_MODE_LINEAR) {
    r.idx[0] = base;
    r.idx[1] = base + 1;
    r.w[0] = 1.0 - (x - f);
    r.w[1] = x - f;
    r.n = 2u;
  } else {
    let a = pf(R_X + RZ_CUBIC_A);
    let excl = px(RZ_EXCL) != 0;
    var sum = 0.0;
    for (var k = 0; k < 4; k = k + 1) {
      r.idx[k] = base - 1 + k;
      r.w[k] = resize_cubic(a, x - f32(r.idx[k]));
      if (excl && (r.idx[k] < 0 || r.idx[k] >= n)) { r.w[k] = 0.0; }
      sum = sum + r.w[k];
    }
    if (excl && sum != 0.0) {
      for (var k = 0; k < 4; k = k + 1) { r.w[k] = r.w[k] / sum; }
    }
    r.n = 4u;
  }
  for (var k = 0u; k < r.n; k = k + 1u) { r.idx[k] = clamp(r.idx[k], 0, n - 1); }
  return r;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let gid = group_linear(wid) * 64u + lid;
  if (gid >= P[R_COUNT]) { return; }
  let rank = pxu(RZ_RANK);
  let nd = pxu(RZ_NDIMS);
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
  var taps: array<ResizeTaps, 3>;
  var moving: array<bool, 8>;
  var total = 1u;
  for (var i = 0u; i < nd; i = i + 1u) {
    let d = pxu(RZ_DIM + i);
    let n = px(RZ_IN + i);
    moving[d] = true;
    let x = f32(oc[d]) * pf(R_X + RZ_COEF_A + i) + pf(R_X + RZ_COEF_B + i);
    if (px(RZ_CROP) != 0 && (x < 0.0 || x > f32(n - 1))) {
      st_f(odt, ooff, i32(gid), pf(R_X + RZ_EXTRAP));
      return;
    }
    taps[i] = resize_taps(mode, x, n);
    total = total * taps[i].n;
  }
  var base = 0;
  for (var d = 0u; d < rank; d = d + 1u) {
    if (!moving[d]) { base = base + oc[d] * v_stride(2u, d); }
  }
  if (mode == RZ_MODE_NEAREST) {
    for (var i = 0u; i < nd; i = i + 1u) {
      base = base + taps[i].idx[0] * v_stride(2u, pxu(RZ_DIM + i));
    }
    copy_elem(odt, ooff, i32(gid), v_dt(2u), v_off(2u), base);
    return;
  }
  let xdt = v_dt(2u);
  let xoff = v_off(2u);
  var acc = 0.0;
  for (var t = 0u; t < total; t = t + 1u) {
    var r = t;
    var off = base;
    var wt = 1.0;
    for (var ii = i32(nd) - 1; ii >= 0; ii = ii - 1) {
      let i = u32(ii);
      let k = r % taps[i].n;
      r = r / taps[i].n;
      off = off + taps[i].idx[k] * v_stride(2u, pxu(RZ_DIM + i));
      wt = wt * taps[i].w[k];
    }
    acc = acc + wt * ld_f(xdt, xoff, off);
  }
  st_f(odt, ooff, i32(gid), acc);
}
