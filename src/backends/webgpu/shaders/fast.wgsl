// Fast paths the host picks at encode time from a step's views (the arena
// is seen as vec4 words, so one access moves 16 bytes):
//  - eltwise_vec_main: dense f32 (or same-dtype 4-byte copy) elementwise, one
//    vec4 per invocation; each input is contiguous, a scalar, periodic along
//    the output (a broadcast row: index i % p) or a broadcast column (index
//    i / p), with p a multiple of 4;
//  - softmax_row_main / norm_row_main: one 256-wide workgroup per contiguous
//    f32 row of up to 1024 * ROW_CACHE elements, held in registers between the passes,
//    reduced with wg_sum / wg_max_key (subgroups when enabled).
// View offsets of these steps are multiples of 16 bytes (host-checked).

// ------------------------------------------------------------ elementwise

// Element index of input `slot` (2..4) for output element i.
fn ev_index(k: u32, i: u32) -> u32 {
  let mode = pxu(EV_MODE + k);
  let p = pxu(EV_PERIOD + k);
  if (mode == 1u) { return 0u; }
  if (mode == 2u) { return i % p; }
  if (mode == 3u) { return i / p; }
  return i;
}

// Four elements i..i+3 (i a multiple of 4) of input k.
fn ev_load4(k: u32, i: u32) -> vec4<u32> {
  let mode = pxu(EV_MODE + k);
  let w = v_off(2u + k) >> 2u;
  if (mode == 0u || mode == 2u) { return A[(w + ev_index(k, i)) >> 2u]; }
  return vec4<u32>(lw(w + ev_index(k, i)));
}

fn ev_load1(k: u32, i: u32) -> u32 { return lw((v_off(2u + k) >> 2u) + ev_index(k, i)); }

fn ev_apply(kind: u32, op: u32, a: u32, b: u32) -> u32 {
  if (kind == K_BINARY) { return bitcast<u32>(binary_f(op, bitcast<f32>(a), bitcast<f32>(b))); }
  if (kind == K_UNARY) { return bitcast<u32>(activation(op, bitcast<f32>(a))); }
  return a; // K_COPY: same 4-byte dtype, bits
}

@compute @workgroup_size(256)
fn eltwise_vec_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let v = group_linear(wid) * 256u + ids.lid;
  let n = P[R_COUNT];
  let i = v * 4u;
  if (i >= n) { return; }
  let kind = P[R_KIND];
  let op = P[R_OP];
  let two = kind == K_BINARY;
  let ow = v_off(0u) >> 2u;
  if (i + 4u <= n) {
    let a = ev_load4(0u, i);
    var b = a;
    if (two) { b = ev_load4(1u, i); }
    A[(ow >> 2u) + v] = vec4<u32>(ev_apply(kind, op, a.x, b.x), ev_apply(kind, op, a.y, b.y),
                                  ev_apply(kind, op, a.z, b.z), ev_apply(kind, op, a.w, b.w));
    return;
  }
  for (var e = i; e < n; e = e + 1u) { // the last, partial vector
    let a = ev_load1(0u, e);
    var b = a;
    if (two) { b = ev_load1(1u, e); }
    sw(ow + e, ev_apply(kind, op, a, b));
  }
}

// ------------------------------------------------------------ rows

// ROW_CACHE, vec4 per invocation (rows up to 1024 * ROW_CACHE elements),
// comes from the host's defines: 4 or 8, one pipeline each, picked by row
// length (fewer slots where they suffice run faster).

// exp(x) for x <= 0 (an element minus a max) to a few ulp: k = round(x /
// ln2) and r = x - k ln2 (ln2 in two parts, exact products), then the
// hardware exp2 on |r / ln2| <= 1/2, where its error stays at an ulp or two,
// times 2^k built from exponent bits. Below -87 (results under 2^-125,
// which only ever add to a sum of at least 1) it returns 0, also for -inf;
// NaN stays NaN.
fn exp_row(x: f32) -> f32 {
  let k = round(x * 1.4426950408889634);
  let r = (x - k * 0.693145751953125) - k * 1.428606765330187e-06;
  let scale = bitcast<f32>(u32(i32(max(k, -126.0)) + 127) << 23u);
  return select(exp2(r * 1.4426950408889634) * scale, 0.0, x < -87.0);
}

fn exp_row4(x: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(exp_row(x.x), exp_row(x.y), exp_row(x.z), exp_row(x.w));
}

// Softmax / log-softmax along contiguous f32 rows (inner == 1): the row's
// max (a float max per invocation, one order-preserving key each for the
// workgroup), then the sum of exp(x - max) (per invocation a plain sum of
// at most 4 * ROW_CACHE terms), each a workgroup reduction. A NaN element
// (whether or not a max kept it), or a +inf max (inf - inf), makes the sum
// NaN and so every output, as in the reference; a row of -inf gives NaN too
// (-inf - -inf). On the H100 at 16384x4096 this runs 0.22 ms where
// per-element keys, Kahan sums and the polynomial exp_f took 0.24 ms, and
// one (max, sum) reduction with a rescaled sum per invocation also 0.24.
@compute @workgroup_size(256)
fn softmax_row_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let row = group_linear(wid);
  if (row >= pxu(RW_OUTER)) { return; } // uniform per workgroup
  let n4 = pxu(RW_N) / 4u;
  let ib = (v_off(2u) >> 4u) + row * n4;
  let ob = (v_off(0u) >> 4u) + row * n4;
  let lid = ids.lid;
  var x: array<vec4<f32>, ROW_CACHE>;
  var mv = vec4<f32>(-inf_f());
  for (var k = 0u; k < ROW_CACHE; k = k + 1u) {
    let v = lid + k * 256u;
    if (v < n4) {
      x[k] = bitcast<vec4<f32>>(A[ib + v]);
      mv = max(mv, x[k]);
    }
  }
  let m = funkey(wg_max_key(fkey(max(max(mv.x, mv.y), max(mv.z, mv.w))), ids, 256u));
  let logsm = P[R_OP] == 1u;
  var s4 = vec4<f32>(0.0);
  for (var k = 0u; k < ROW_CACHE; k = k + 1u) {
    if (lid + k * 256u < n4) {
      let e = exp_row4(x[k] - vec4<f32>(m));
      s4 = s4 + e;
      if (!logsm) { x[k] = e; }
    }
  }
  let sum = wg_sum((s4.x + s4.y) + (s4.z + s4.w), ids, 256u);
  let log_sum = log_f(sum);
  let inv = 1.0 / sum;
  for (var k = 0u; k < ROW_CACHE; k = k + 1u) {
    let v = lid + k * 256u;
    if (v < n4) {
      var y: vec4<f32>;
      if (logsm) { y = x[k] - vec4<f32>(m) - vec4<f32>(log_sum); } else { y = x[k] * inv; }
      A[ob + v] = bitcast<vec4<u32>>(y);
    }
  }
}

// LayerNorm / RmsNorm without residual over contiguous f32 rows. Slots: 0 out,
// 2 x, 5 gamma, 6 beta (f32, [cols]).
@compute @workgroup_size(256)
fn norm_row_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let row = group_linear(wid);
  if (row >= pxu(NM_ROWS)) { return; }
  let cols = pxu(NM_COLS);
  let n4 = cols / 4u;
  let ib = (v_off(2u) >> 4u) + row * n4;
  let ob = (v_off(0u) >> 4u) + row * n4;
  let lid = ids.lid;
  let rms = px(NM_RMS) != 0;
  var x: array<vec4<f32>, ROW_CACHE>;
  var s = 0.0;
  for (var k = 0u; k < ROW_CACHE; k = k + 1u) {
    let v = lid + k * 256u;
    if (v < n4) {
      x[k] = bitcast<vec4<f32>>(A[ib + v]);
      s = s + ((x[k].x + x[k].y) + (x[k].z + x[k].w));
    }
  }
  var mean = 0.0;
  if (!rms) { mean = wg_sum(s, ids, 256u) / f32(cols); }
  var ss = 0.0;
  for (var k = 0u; k < ROW_CACHE; k = k + 1u) {
    let v = lid + k * 256u;
    if (v < n4) {
      let d = x[k] - vec4<f32>(mean);
      ss = ss + dot(d, d);
    }
  }
  let ms = wg_sum(ss, ids, 256u) / f32(cols);
  let inv = 1.0 / sqrt_f(ms + pf(R_X + NM_EPS));
  let has_g = px(NM_HAS_GAMMA) != 0;
  let has_b = px(NM_HAS_BETA) != 0;
  let gb = v_off(5u) >> 4u;
  let bb = v_off(6u) >> 4u;
  for (var k = 0u; k < ROW_CACHE; k = k + 1u) {
    let v = lid + k * 256u;
    if (v < n4) {
      var y = (x[k] - vec4<f32>(mean)) * inv;
      if (has_g) { y = y * bitcast<vec4<f32>>(A[gb + v]); }
      if (has_b) { y = y + bitcast<vec4<f32>>(A[bb + v]); }
      A[ob + v] = bitcast<vec4<u32>>(y);
    }
  }
}
