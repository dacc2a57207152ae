// Conv and ConvTranspose (RLX_K_CONV; rlx_conv_params in src/passes/lower.h),
// y = act(conv(x, w) + bias + residual). Slots: 0 y, 2 x, 3 w, 4 bias,
// 5 residual, all dense; x, residual and y share the layout CV_LAYOUT.
// Spatial dims past the node's are 1, so every loop walks three. Op =
// P[R_OP]: CV_TRANSPOSE reads input i for output o through tap k where
// o + pad - k * dil = i * stride (taps off the stride grid add nothing).
//
// Two entry points over the same index maps:
//   main        one invocation per output element, the whole sum in a loop
//               (the generic kernel; depthwise convs, C/groups = 1, where a
//               GEMM would have one column per group);
//   tiled_main  implicit GEMM per group: rows m = (image, output pixel),
//               columns the group's output channels, k = (input channel of
//               the group, tap) in the weight's order for channels first;
//               (tap, channel) for channels last, whose A loads then run
//               along contiguous channels. A 64x64 tile per
//               256-invocation workgroup, 4x4 outputs per invocation, K in
//               slabs of 16 staged in workgroup memory; A's elements are
//               gathered from x as the slab is loaded (zero outside the
//               input), never materialised. The epilogue is fused into the
//               store.
// Accumulation is f32 in ascending k (the reference sums in f64; the
// parity tolerance covers the difference).

fn cv_last() -> bool { return pxu(CV_LAYOUT) == CV_LAST; }
fn cv_transpose() -> bool { return P[R_OP] == CV_TRANSPOSE; }
fn cv_out_area() -> u32 { return pxu(CV_OUT) * pxu(CV_OUT + 1u) * pxu(CV_OUT + 2u); }
fn cv_in_area() -> u32 { return pxu(CV_IN) * pxu(CV_IN + 1u) * pxu(CV_IN + 2u); }

// Dense element index of channel ch at spatial position s of image n in an
// activation with `chans` channels and `area` pixels.
fn cv_index(n: u32, ch: u32, s: u32, chans: u32, area: u32) -> i32 {
  if (cv_last()) { return i32((n * area + s) * chans + ch); }
  return i32((n * chans + ch) * area + s);
}

// Input coordinate of spatial dim d read by output coordinate o through
// kernel offset k, or -1 when none is (outside x, or off the stride grid).
fn cv_source(d: u32, o: i32, k: i32) -> i32 {
  let n = px(CV_IN + d);
  let st = px(CV_STRIDE + d);
  if (!cv_transpose()) {
    let i = o * st - px(CV_PAD + d) + k * px(CV_DIL + d);
    return select(-1, i, i >= 0 && i < n);
  }
  let num = o + px(CV_PAD + d) - k * px(CV_DIL + d);
  if (num < 0 || num % st != 0) { return -1; }
  let i = num / st;
  return select(-1, i, i < n);
}

// Input pixel (linear over x's spatial dims) read by output pixel o through
// tap t, or -1 when the tap reads nothing.
fn cv_tap_source(o: vec3<i32>, t: u32) -> i32 {
  let k1 = pxu(CV_KERNEL + 1u); let k2 = pxu(CV_KERNEL + 2u);
  let i0 = cv_source(0u, o.x, i32(t / (k1 * k2)));
  let i1 = cv_source(1u, o.y, i32((t / k2) % k1));
  let i2 = cv_source(2u, o.z, i32(t % k2));
  if (i0 < 0 || i1 < 0 || i2 < 0) { return -1; }
  return (i0 * px(CV_IN + 1u) + i1) * px(CV_IN + 2u) + i2;
}

// Output pixel s as coordinates.
fn cv_pixel(s: u32) -> vec3<i32> {
  let o1 = pxu(CV_OUT + 1u); let o2 = pxu(CV_OUT + 2u);
  return vec3<i32>(i32(s / (o1 * o2)), i32((s / o2) % o1), i32(s % o2));
}

// Weight element for input channel c (within group g), output channel col
// (within the group) and tap t: w is [OC, C/g, taps] forward and
// [C, OC/g, taps] transposed.
fn cv_weight_index(g: u32, c: u32, col: u32, t: u32) -> i32 {
  let cg = pxu(CV_C) / pxu(CV_GROUPS);
  let ocg = pxu(CV_OC) / pxu(CV_GROUPS);
  let taps = pxu(CV_TAPS);
  if (cv_transpose()) { return i32(((g * cg + c) * ocg + col) * taps + t); }
  return i32(((g * ocg + col) * cg + c) * taps + t);
}

// y[yi] = act(sum + bias[oc] + residual[yi]).
fn cv_store(yi: i32, oc: u32, sum: f32) {
  var v = sum;
  if (pxu(CV_HAS_BIAS) != 0u) { v = v + ld_f(v_dt(4u), v_off(4u), i32(oc)); }
  if (pxu(CV_HAS_RES) != 0u) { v = v + ld_f(v_dt(5u), v_off(5u), yi); }
  st_f(v_dt(0u), v_off(0u), yi, activation(pxu(CV_ACT), v));
}

// ------------------------------------------------------------ direct

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let gid = group_linear(wid) * 64u + lid;
  if (gid >= P[R_COUNT]) { return; }
  let OC = pxu(CV_OC);
  let area = cv_out_area();
  var oc: u32; var s: u32; var n: u32;
  if (cv_last()) { oc = gid % OC; s = (gid / OC) % area; n = gid / OC / area; }
  else { s = gid % area; oc = (gid / area) % OC; n = gid / area / OC; }
  let groups = pxu(CV_GROUPS);
  let cg = pxu(CV_C) / groups;
  let ocg = OC / groups;
  let g = oc / ocg;
  let o = cv_pixel(s);
  let xdt = v_dt(2u); let xoff = v_off(2u);
  let wdt = v_dt(3u); let woff = v_off(3u);
  let C = pxu(CV_C); let in_area = cv_in_area();
  var acc = 0.0;
  for (var t = 0u; t < pxu(CV_TAPS); t = t + 1u) {
    let si = cv_tap_source(o, t);
    if (si < 0) { continue; }
    for (var c = 0u; c < cg; c = c + 1u) {
      let xv = ld_f(xdt, xoff, cv_index(n, g * cg + c, u32(si), C, in_area));
      acc = fma(xv, ld_f(wdt, woff, cv_weight_index(g, c, oc % ocg, t)), acc);
    }
  }
  cv_store(i32(gid), oc, acc);
}

// ------------------------------------------------------------ implicit GEMM

var<workgroup> cv_a: array<vec4<f32>, 256>; // [16 k][16 quads of m]
var<workgroup> cv_b: array<vec4<f32>, 256>; // [16 k][16 quads of n]
// Kernel offsets (k * dilation per dim, 10 bits each) of every tap: the
// tap decode divides once per workgroup instead of per gathered element
// (the host keeps taps <= 256 here).
var<workgroup> cv_tap: array<u32, 256>;

// The geometry the tiled kernel reads in its loops, loaded from the record
// once per invocation.
struct CvGeo {
  M: u32, K: u32, C: u32, OC: u32, cg: u32, ocg: u32, taps: u32, area: u32, in_area: u32,
  last: bool, transpose: bool,
  inp: vec3<i32>, stride: vec3<i32>, pad: vec3<i32>,
  xdt: u32, xoff: u32, wdt: u32, woff: u32,
}

fn cv_geo() -> CvGeo {
  var c: CvGeo;
  c.M = pxu(CV_M); c.K = pxu(CV_K); c.C = pxu(CV_C); c.OC = pxu(CV_OC);
  c.cg = c.C / pxu(CV_GROUPS); c.ocg = c.OC / pxu(CV_GROUPS); c.taps = pxu(CV_TAPS);
  c.area = cv_out_area(); c.in_area = cv_in_area();
  c.last = cv_last(); c.transpose = cv_transpose();
  c.inp = vec3<i32>(px(CV_IN), px(CV_IN + 1u), px(CV_IN + 2u));
  c.stride = vec3<i32>(px(CV_STRIDE), px(CV_STRIDE + 1u), px(CV_STRIDE + 2u));
  c.pad = vec3<i32>(px(CV_PAD), px(CV_PAD + 1u), px(CV_PAD + 2u));
  c.xdt = v_dt(2u); c.xoff = v_off(2u); c.wdt = v_dt(3u); c.woff = v_off(3u);
  return c;
}

// cv_tap[t] for this workgroup's taps (before the first barrier).
fn cv_fill_taps(lid: u32, taps: u32) {
  let k1 = pxu(CV_KERNEL + 1u); let k2 = pxu(CV_KERNEL + 2u);
  for (var t = lid; t < taps; t = t + 256u) {
    let d0 = (t / (k1 * k2)) * pxu(CV_DIL);
    let d1 = ((t / k2) % k1) * pxu(CV_DIL + 1u);
    let d2 = (t % k2) * pxu(CV_DIL + 2u);
    cv_tap[t] = d0 | (d1 << 10u) | (d2 << 20u);
  }
}

// The GEMM row one invocation gathers for: image, output pixel and whether
// it exists (rows past M load zeros).
struct CvRow { n: u32, o: vec3<i32>, ok: bool }

fn cv_row(c: CvGeo, m: u32) -> CvRow {
  var r: CvRow;
  r.ok = m < c.M;
  r.n = m / c.area;
  r.o = cv_pixel(m % c.area);
  if (!c.transpose) { r.o = r.o * c.stride - c.pad; } // forward: the window's origin
  else { r.o = r.o + c.pad; }
  return r;
}

// GEMM column k as (input channel of the group, tap): channel-major for
// channels first (the weight's order), tap-major for channels last.
struct CvK { ch: u32, t: u32 }

fn cv_k(c: CvGeo, k: u32) -> CvK {
  if (c.last) { return CvK(k % c.cg, k / c.cg); }
  return CvK(k / c.taps, k % c.taps);
}

// Column k + 1 from column k's pair, without dividing.
fn cv_k_next(c: CvGeo, p: CvK) -> CvK {
  var q = p;
  if (c.last) {
    q.ch = q.ch + 1u;
    if (q.ch == c.cg) { q.ch = 0u; q.t = q.t + 1u; }
  } else {
    q.t = q.t + 1u;
    if (q.t == c.taps) { q.t = 0u; q.ch = q.ch + 1u; }
  }
  return q;
}

// A[m, k] of group g, k = (ch, t): x at the input pixel tap t of row r
// reads, channel ch of the group.
fn cv_gather(c: CvGeo, r: CvRow, g: u32, k: u32, ch: u32, t: u32) -> f32 {
  if (!r.ok || k >= c.K) { return 0.0; }
  let packed = cv_tap[t];
  let off = vec3<i32>(i32(packed & 1023u), i32((packed >> 10u) & 1023u), i32(packed >> 20u));
  var i: vec3<i32>;
  if (!c.transpose) {
    i = r.o + off;
  } else {
    let num = r.o - off;
    if (any(num < vec3<i32>(0)) || any(num % c.stride != vec3<i32>(0))) { return 0.0; }
    i = num / c.stride;
  }
  if (any(i < vec3<i32>(0)) || any(i >= c.inp)) { return 0.0; }
  let si = u32((i.x * c.inp.y + i.y) * c.inp.z + i.z);
  let xc = g * c.cg + ch;
  var xi: u32;
  if (c.last) { xi = (r.n * c.in_area + si) * c.C + xc; }
  else { xi = (r.n * c.C + xc) * c.in_area + si; }
  return ld_f(c.xdt, c.xoff, i32(xi));
}

// B[k, col] of group g, k = (ch, t).
fn cv_weight(c: CvGeo, g: u32, k: u32, kc: CvK, col: u32) -> f32 {
  if (k >= c.K || col >= c.ocg) { return 0.0; }
  var wi: u32;
  if (c.transpose) { wi = ((g * c.cg + kc.ch) * c.ocg + col) * c.taps + kc.t; }
  else { wi = ((g * c.ocg + col) * c.cg + kc.ch) * c.taps + kc.t; }
  return ld_f(c.wdt, c.woff, i32(wi));
}

fn cv_mac(acc: vec4<f32>, a: f32, b: vec4<f32>) -> vec4<f32> { return fma(vec4<f32>(a), b, acc); }

// Stores output row m (4 columns from col0 of group g), skipping what lies
// past M or the group's channels.
fn cv_store_row(c: CvGeo, g: u32, m: u32, col0: u32, v: vec4<f32>) {
  if (m >= c.M) { return; }
  let n = m / c.area; let s = m % c.area;
  for (var j = 0u; j < 4u; j = j + 1u) {
    let col = col0 + j;
    if (col < c.ocg) {
      let oc = g * c.ocg + col;
      cv_store(cv_index(n, oc, s, c.OC, c.area), oc, v[j]);
    }
  }
}

// The four A elements k .. k + 3 of this invocation's row (one division
// for the first column's pair, then stepped).
fn cv_gather4(c: CvGeo, r: CvRow, g: u32, k: u32) -> vec4<f32> {
  var v: vec4<f32>;
  var p = cv_k(c, k);
  for (var j = 0u; j < 4u; j = j + 1u) {
    v[j] = cv_gather(c, r, g, k + j, p.ch, p.t);
    p = cv_k_next(c, p);
  }
  return v;
}

fn cv_weight4(c: CvGeo, g: u32, k: u32, col: u32) -> vec4<f32> {
  var v: vec4<f32>;
  var p = cv_k(c, k);
  for (var j = 0u; j < 4u; j = j + 1u) {
    v[j] = cv_weight(c, g, k + j, p, col);
    p = cv_k_next(c, p);
  }
  return v;
}

// Each slab's gathers are issued before the previous slab's fmas (held in
// registers until the barrier), so their latency overlaps the arithmetic.
@compute @workgroup_size(256)
fn tiled_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let tiles_m = pxu(CV_TILES_M); let tiles_n = pxu(CV_TILES_N);
  let t = group_linear(wid);
  let g = t / (tiles_m * tiles_n);
  if (g >= pxu(CV_GROUPS)) { return; } // uniform per workgroup
  let m0 = ((t / tiles_n) % tiles_m) * 64u;
  let n0 = (t % tiles_n) * 64u;
  let lid = ids.lid;
  let c = cv_geo();
  cv_fill_taps(lid, c.taps);
  // Loads: A row lid % 64, k quad lid / 64 for channels first (consecutive
  // invocations read neighbouring pixels of one channel); row lid / 4, k
  // quad lid % 4 for channels last (they read consecutive channels of one
  // pixel). B column lid / 4, k quad lid % 4.
  var ar = lid % 64u; var ak = (lid / 64u) * 4u;
  if (c.last) { ar = lid / 4u; ak = (lid % 4u) * 4u; }
  let row = cv_row(c, m0 + ar);
  let bc = lid / 4u; let bk = (lid % 4u) * 4u;
  let tx = lid % 16u; let ty = lid / 16u;
  let z = vec4<f32>(0.0);
  var acc0 = z; var acc1 = z; var acc2 = z; var acc3 = z;
  workgroupBarrier(); // cv_tap
  var ra = cv_gather4(c, row, g, ak);
  var rb = cv_weight4(c, g, bk, n0 + bc);
  for (var k0 = 0u; k0 < c.K; k0 = k0 + 16u) {
    for (var j = 0u; j < 4u; j = j + 1u) {
      cv_a[(ak + j) * 16u + ar / 4u][ar % 4u] = ra[j];
      cv_b[(bk + j) * 16u + bc / 4u][bc % 4u] = rb[j];
    }
    workgroupBarrier();
    if (k0 + 16u < c.K) {
      ra = cv_gather4(c, row, g, k0 + 16u + ak);
      rb = cv_weight4(c, g, k0 + 16u + bk, n0 + bc);
    }
    // Only k < K: padded terms could turn a -0 sum into +0.
    let kn = min(16u, c.K - k0);
    for (var kk = 0u; kk < kn; kk = kk + 1u) {
      let a = cv_a[kk * 16u + ty];
      let b = cv_b[kk * 16u + tx];
      acc0 = cv_mac(acc0, a.x, b); acc1 = cv_mac(acc1, a.y, b);
      acc2 = cv_mac(acc2, a.z, b); acc3 = cv_mac(acc3, a.w, b);
    }
    workgroupBarrier();
  }
  let m = m0 + ty * 4u; let col = n0 + tx * 4u;
  cv_store_row(c, g, m, col, acc0);
  cv_store_row(c, g, m + 1u, col, acc1);
  cv_store_row(c, g, m + 2u, col, acc2);
  cv_store_row(c, g, m + 3u, col, acc3);
}
