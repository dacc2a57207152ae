// PoolBackward (max / average): one invocation per dx (input) element
// (rlx_pool_params in src/passes/lower.h, the forward's windows). Each
// invocation sums, in tap order, dy of every window that reads its
// element: max only where it is the window's first maximum (the forward's
// argmax), average divided by the window's count. No atomics: a run is
// deterministic. Slots: 0 dx (dense), 2 x, 3 dy (dense, same rank).
// Mode = P[R_OP]. Dims the window does not move along (kernel 1, stride
// 1: N and C of a 2-D pool) skip their divisions, which were most of the
// work (every tap divided per dim, per covering window).

// x offset of the first maximum of window oc (-1: no tap inside x).
fn pbw_argmax(oc: array<i32, 8>, rank: u32) -> i32 {
  let xdt = v_dt(2u);
  let xoff = v_off(2u);
  var best = -inf_f();
  var at = -1;
  let taps = pxu(PL_TAPS);
  for (var t = 0u; t < taps; t = t + 1u) {
    var rem = t;
    var off = 0;
    var in_x = true;
    for (var dd = i32(rank) - 1; dd >= 0; dd = dd - 1) {
      let d = u32(dd);
      let kd = pxu(PL_KERNEL + d);
      var k = 0;
      if (kd != 1u) {
        k = i32(rem % kd);
        rem = rem / kd;
      }
      let i = oc[d] * px(PL_STRIDE + d) - px(PL_PAD + d) + k * px(PL_DIL + d);
      if (i < 0 || i >= i32(v_shape(2u, d))) { in_x = false; }
      off = off + i * v_stride(2u, d);
    }
    if (!in_x) { continue; }
    let v = ld_f(xdt, xoff, off);
    if (at < 0 || ((v > best || is_nan(v)) && !is_nan(best))) { best = v; at = off; }
  }
  return at;
}

// The taps an average window divided by (inside x, or inside x + pads).
fn pbw_count(oc: array<i32, 8>, rank: u32) -> i32 {
  let cip = px(PL_CIP) != 0;
  var count = 1;
  for (var d = 0u; d < rank; d = d + 1u) {
    let pad = px(PL_PAD + d);
    let n = i32(v_shape(2u, d));
    let lo = select(0, -pad, cip);
    let hi = n + select(0, px(PL_PAD_END + d), cip);
    var c = 0;
    for (var k = 0; k < px(PL_KERNEL + d); k = k + 1) {
      let i = oc[d] * px(PL_STRIDE + d) - pad + k * px(PL_DIL + d);
      if (i >= lo && i < hi) { c = c + 1; }
    }
    count = count * c;
  }
  return count;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let gid = group_linear(wid) * 64u + lid;
  if (gid >= P[R_COUNT]) { return; }
  let rank = pxu(PL_RANK);
  let mode = P[R_OP];
  let taps = pxu(PL_TAPS);
  var ic: array<i32, 8>;
  var rem = gid;
  var self_off = 0;
  for (var dd = i32(rank) - 1; dd >= 0; dd = dd - 1) {
    let d = u32(dd);
    let n = v_shape(0u, d);
    ic[d] = i32(rem % n);
    rem = rem / n;
    self_off = self_off + ic[d] * v_stride(2u, d);
  }
  let gdt = v_dt(3u);
  let goff = v_off(3u);
  var acc = 0.0;
  for (var t = 0u; t < taps; t = t + 1u) {
    var r = t;
    var oc: array<i32, 8>;
    var at = 0;
    var hit = true;
    for (var dd = i32(rank) - 1; dd >= 0 && hit; dd = dd - 1) {
      let d = u32(dd);
      let kd = pxu(PL_KERNEL + d);
      var k = 0;
      if (kd != 1u) {
        k = i32(r % kd);
        r = r / kd;
      }
      let num = ic[d] + px(PL_PAD + d) - k * px(PL_DIL + d);
      let s = px(PL_STRIDE + d);
      var o = num;
      if (s != 1 && num >= 0) { o = num / s; }
      hit = num >= 0 && (s == 1 || num % s == 0) && o < i32(v_shape(3u, d));
      oc[d] = select(0, o, hit);
      at = at + oc[d] * v_stride(3u, d);
    }
    if (!hit) { continue; }
    let g = ld_f(gdt, goff, at);
    if (mode == PL_MAX) {
      if (pbw_argmax(oc, rank) == self_off) { acc = acc + g; }
    } else {
      acc = acc + g / f32(pbw_count(oc, rank));
    }
  }
  st_f(v_dt(0u), v_off(0u), i32(gid), acc);
}
