// GridSample (P[R_OP] 0) and RoiAlign (1): one invocation per output
// element (rlx_sampler_params in src/passes/lower.h; the CPU reference in
// ref_nn.c is the definition, computed here in f32). Slots: 0 out, 2 x
// [N, C, H, W], 3 grid [N, Ho, Wo, 2] or rois [R, 4], 4 batch indices [R].

// Grid coordinate g in [-1, 1] -> pixel coordinate along a dim of n.
fn sp_unnormalize(g: f32, n: i32, align: bool) -> f32 {
  if (align) { return (g + 1.0) / 2.0 * f32(n - 1); }
  return ((g + 1.0) * f32(n) - 1.0) / 2.0;
}

// Mirror of c into [lo2 / 2, hi2 / 2] (bounds doubled, as PyTorch).
fn sp_reflect(c0: f32, lo2: f32, hi2: f32) -> f32 {
  if (lo2 == hi2) { return 0.0; }
  let lo = lo2 / 2.0;
  let span = (hi2 - lo2) / 2.0;
  let c = abs(c0 - lo);
  let flips = floor(c / span);
  let extra = c - flips * span;
  if (flips - 2.0 * floor(flips / 2.0) == 0.0) { return extra + lo; }
  return span - extra + lo;
}

fn sp_pad(c0: f32, n: i32, padding: i32, align: bool) -> f32 {
  if (padding == SP_ZEROS) { return c0; }
  var c = c0;
  if (padding == SP_REFLECTION) {
    if (align) { c = sp_reflect(c, 0.0, 2.0 * f32(n - 1)); }
    else { c = sp_reflect(c, -1.0, 2.0 * f32(n) - 1.0); }
  }
  return clamp(c, 0.0, f32(n - 1));
}

fn sp_tap(plane: i32, iy: i32, ix: i32) -> f32 {
  let H = i32(v_shape(2u, 2u));
  let W = i32(v_shape(2u, 3u));
  if (iy < 0 || iy >= H || ix < 0 || ix >= W) { return 0.0; }
  return ld_f(v_dt(2u), v_off(2u), (plane * H + iy) * W + ix);
}

fn sp_cubic(t0: f32) -> f32 {
  let a = -0.75;
  let t = abs(t0);
  if (t <= 1.0) { return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0; }
  if (t < 2.0) { return ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a; }
  return 0.0;
}

fn sp_grid(plane: i32, gx: f32, gy: f32) -> f32 {
  let H = i32(v_shape(2u, 2u));
  let W = i32(v_shape(2u, 3u));
  let mode = px(SP_MODE);
  let padding = px(SP_PADDING);
  let align = px(SP_ALIGN) != 0;
  var ix = sp_unnormalize(gx, W, align);
  var iy = sp_unnormalize(gy, H, align);
  if (mode == SP_CUBIC) { // padding per tap of the raw coordinate
    let fx = floor(ix);
    let fy = floor(iy);
    var acc = 0.0;
    for (var j = 0; j < 4; j = j + 1) {
      let ty = fy - 1.0 + f32(j);
      let wy = sp_cubic(iy - ty);
      let py = i32(sp_pad(ty, H, padding, align));
      for (var i = 0; i < 4; i = i + 1) {
        let tx = fx - 1.0 + f32(i);
        acc = acc + wy * sp_cubic(ix - tx) * sp_tap(plane, py, i32(sp_pad(tx, W, padding, align)));
      }
    }
    return acc;
  }
  ix = sp_pad(ix, W, padding, align);
  iy = sp_pad(iy, H, padding, align);
  if (mode == SP_NEAREST) { return sp_tap(plane, i32(round(iy)), i32(round(ix))); }
  let x0 = floor(ix);
  let y0 = floor(iy);
  let lx = ix - x0;
  let ly = iy - y0;
  let a = i32(x0);
  let b = i32(y0);
  return (1.0 - ly) * ((1.0 - lx) * sp_tap(plane, b, a) + lx * sp_tap(plane, b, a + 1)) +
         ly * ((1.0 - lx) * sp_tap(plane, b + 1, a) + lx * sp_tap(plane, b + 1, a + 1));
}

// RoiAlign's bilinear sample (the ONNX / Caffe2 rule): the four weighted
// corners, 0 outside [-1, n].
fn sp_roi_sample(plane: i32, y_in: f32, x_in: f32) -> vec4<f32> {
  let H = i32(v_shape(2u, 2u));
  let W = i32(v_shape(2u, 3u));
  if (y_in < -1.0 || y_in > f32(H) || x_in < -1.0 || x_in > f32(W)) { return vec4<f32>(0.0); }
  var yy = max(y_in, 0.0);
  var xx = max(x_in, 0.0);
  var y0 = i32(yy);
  var x0 = i32(xx);
  var y1 = y0 + 1;
  var x1 = x0 + 1;
  if (y0 >= H - 1) { y0 = H - 1; y1 = H - 1; yy = f32(y0); }
  if (x0 >= W - 1) { x0 = W - 1; x1 = W - 1; xx = f32(x0); }
  let ly = yy - f32(y0);
  let lx = xx - f32(x0);
  let hy = 1.0 - ly;
  let hx = 1.0 - lx;
  return vec4<f32>(hy * hx * sp_tap(plane, y0, x0), hy * lx * sp_tap(plane, y0, x1),
                   ly * hx * sp_tap(plane, y1, x0), ly * lx * sp_tap(plane, y1, x1));
}

fn sp_roi_bin(r: i32, c: i32, ph: i32, pw: i32) -> f32 {
  let gdt = v_dt(3u);
  let goff = v_off(3u);
  let half_px = px(SP_ALIGN) != 0;
  let is_max = px(SP_MODE) == SP_POOL_MAX;
  let off = select(0.0, 0.5, half_px);
  let sc = pf(R_X + SP_SCALE);
  let x1 = ld_f(gdt, goff, r * 4) * sc - off;
  let y1 = ld_f(gdt, goff, r * 4 + 1) * sc - off;
  var rw = ld_f(gdt, goff, r * 4 + 2) * sc - off - x1;
  var rh = ld_f(gdt, goff, r * 4 + 3) * sc - off - y1;
  if (!half_px) {
    rw = max(rw, 1.0);
    rh = max(rh, 1.0);
  }
  let oh = i32(v_shape(0u, 2u));
  let ow = i32(v_shape(0u, 3u));
  let ratio = px(SP_RATIO);
  let bh = rh / f32(oh);
  let bw = rw / f32(ow);
  let gh = select(i32(ceil(rh / f32(oh))), ratio, ratio > 0);
  let gw = select(i32(ceil(rw / f32(ow))), ratio, ratio > 0);
  let b = ld_i(v_dt(4u), v_off(4u), r);
  // The reference refuses a batch index outside x; a kernel cannot, so it
  // writes NaN instead of reading outside x.
  if (!i64_fits_i32(b) || i64_low_i32(b) < 0 || i64_low_i32(b) >= i32(v_shape(2u, 0u))) {
    return nan_f();
  }
  let plane = i64_low_i32(b) * i32(v_shape(2u, 1u)) + c;
  var acc = select(0.0, -inf_f(), is_max);
  for (var iy = 0; iy < gh; iy = iy + 1) {
    let yy = y1 + f32(ph) * bh + (f32(iy) + 0.5) * bh / f32(gh);
    for (var ix = 0; ix < gw; ix = ix + 1) {
      let v = sp_roi_sample(plane, yy, x1 + f32(pw) * bw + (f32(ix) + 0.5) * bw / f32(gw));
      if (is_max) { acc = max(acc, max(max(v.x, v.y), max(v.z, v.w))); }
      else { acc = acc + v.x + v.y + v.z + v.w; }
    }
  }
  if (is_max) { return select(0.0, acc, gh * gw > 0); }
  return acc / f32(max(gh * gw, 1));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let gid = group_linear(wid) * 64u + lid;
  if (gid >= P[R_COUNT]) { return; }
  let C = i32(v_shape(0u, 1u));
  let Ho = i32(v_shape(0u, 2u));
  let Wo = i32(v_shape(0u, 3u));
  let o = i32(gid);
  let w = o % Wo;
  let h = (o / Wo) % Ho;
  let nc = o / (Wo * Ho);
  var v: f32;
  if (P[R_OP] == SP_ROI_ALIGN) {
    v = sp_roi_bin(nc / C, nc % C, h, w);
  } else {
    let gi = (((nc / C) * Ho + h) * Wo + w) * 2;
    v = sp_grid(nc, ld_f(v_dt(3u), v_off(3u), gi), ld_f(v_dt(3u), v_off(3u), gi + 1));
  }
  st_f(v_dt(0u), v_off(0u), o, v);
}
