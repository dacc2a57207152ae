// Reduce over any set of axes: one workgroup per output element. in0 is
// viewed as [keep dims..., reduced dims...]; floats accumulate in f32 with
// compensated (Kahan) sums per invocation, integers exactly in 64 bits.

var<workgroup> red_f: array<f32, 64>;
var<workgroup> red_i: array<vec2<u32>, 64>;

// Max / min over an empty set: -inf / +inf, saturated for integer outputs;
// bool false / true (as the CPU reference).
fn st_empty_extreme(op: u32, odt: u32, ooff: u32, o: i32) {
  if (odt == DT_BOOL) { st_u8(addr(ooff, o, odt), select(0u, 1u, op == RED_MIN)); return; }
  st_f(odt, ooff, o, select(inf_f(), -inf_f(), op == RED_MAX));
}

fn red_elem(base: i32, r_in: u32) -> i32 {
  let nk = pxu(RD_NKEEP);
  let nr = pxu(RD_NRED);
  var rem = r_in;
  var e = base;
  for (var d = i32(nk + nr) - 1; d >= i32(nk); d = d - 1) {
    let n = v_shape(2u, u32(d));
    e = e + i32(rem % n) * v_stride(2u, u32(d));
    rem = rem / n;
  }
  return e;
}

// max / min with NaN propagation; `first` takes v unconditionally.
fn pick_f(op: u32, best: f32, v: f32) -> f32 {
  if (is_nan(best)) { return best; }
  if (is_nan(v)) { return v; }
  if (op == RED_MAX) { return select(best, v, v > best); }
  return select(best, v, v < best);
}

// Key of v for a max-reduction of keys that implements op (max or min), NaN
// winning either way; 0 (below every key) for "no value".
fn mm_key(op: u32, v: f32) -> u32 {
  let k = fkey(v); // non-NaN keys lie in [0x007fffff, 0xff800000]
  if (op == RED_MAX || k == 0xffffffffu) { return k; }
  return 0xffffffffu - k; // same range, order reversed
}
fn mm_unkey(op: u32, k: u32) -> f32 {
  if (op == RED_MAX || k == 0xffffffffu) { return funkey(k); }
  return funkey(0xffffffffu - k);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let lid = ids.lid;
  let o = group_linear(wid);
  if (o >= pxu(RD_OUTER)) { return; }
  let op = P[R_OP];
  let inner = pxu(RD_INNER);
  let nk = pxu(RD_NKEEP);
  let dt = v_dt(2u); let off = v_off(2u);
  var base = 0;
  var rem = o;
  for (var d = i32(nk) - 1; d >= 0; d = d - 1) {
    let n = v_shape(2u, u32(d));
    base = base + i32(rem % n) * v_stride(2u, u32(d));
    rem = rem / n;
  }
  let odt = v_dt(0u); let ooff = v_off(0u);
  if (is_intlike(dt)) {
    var acc = select(vec2<u32>(0u, 0u), vec2<u32>(1u, 0u), op == RED_PROD);
    var have = false;
    for (var r = lid; r < inner; r = r + 64u) {
      let v = ld_i(dt, off, red_elem(base, r));
      if (op == RED_SUM || op == RED_MEAN) { acc = i64_add(acc, v); }
      else if (op == RED_PROD) { acc = i64_mul(acc, v); }
      else if (!have) { acc = v; }
      else if (op == RED_MAX) { acc = select(acc, v, i64_lt(acc, v)); }
      else { acc = select(acc, v, i64_lt(v, acc)); }
      have = true;
    }
    if (!have && (op == RED_MAX || op == RED_MIN)) { acc = select(vec2<u32>(0x7fffffffu, 0x7fffffffu), vec2<u32>(0u, 0x80000000u), op == RED_MAX); }
    red_i[lid] = acc;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
      if (lid < s) {
        let a = red_i[lid]; let b = red_i[lid + s];
        var c: vec2<u32>;
        if (op == RED_SUM || op == RED_MEAN) { c = i64_add(a, b); }
        else if (op == RED_PROD) { c = i64_mul(a, b); }
        else if (op == RED_MAX) { c = select(a, b, i64_lt(a, b)); }
        else { c = select(a, b, i64_lt(b, a)); }
        red_i[lid] = c;
      }
      workgroupBarrier();
    }
    if (lid == 0u) {
      let v = red_i[0];
      if (op == RED_MEAN) { st_f(odt, ooff, i32(o), select(nan_f(), i64_to_f32(v) / f32(inner), inner > 0u)); }
      else if ((op == RED_MAX || op == RED_MIN) && inner == 0u) { st_empty_extreme(op, odt, ooff, i32(o)); }
      else { st_i(odt, ooff, i32(o), v); }
    }
    return;
  }
  var acc = select(0.0, 1.0, op == RED_PROD);
  var comp = 0.0;
  var have = false;
  for (var r = lid; r < inner; r = r + 64u) {
    let v = ld_f(dt, off, red_elem(base, r));
    if (op == RED_SUM || op == RED_MEAN) {
      let y = v - comp;
      let t = acc + y;
      comp = (t - acc) - y;
      acc = t;
    } else if (op == RED_PROD) { acc = acc * v; }
    else if (!have) { acc = v; }
    else { acc = pick_f(op, acc, v); }
    have = true;
  }
  // sum and max / min through wg_sum / wg_max_key (subgroups when enabled)
  if (op == RED_SUM || op == RED_MEAN) {
    var v = wg_sum(acc, ids, 64u);
    if (op == RED_MEAN) { v = select(nan_f(), v / f32(inner), inner > 0u); }
    if (lid == 0u) { st_f(odt, ooff, i32(o), v); }
    return;
  }
  if (op != RED_PROD) {
    let k = wg_max_key(select(0u, mm_key(op, acc), have), ids, 64u);
    if (lid == 0u && inner == 0u) { st_empty_extreme(op, odt, ooff, i32(o)); }
    else if (lid == 0u) { st_f(odt, ooff, i32(o), mm_unkey(op, k)); }
    return;
  }
  red_f[lid] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s = s >> 1u) {
    if (lid < s) { red_f[lid] = red_f[lid] * red_f[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) { st_f(odt, ooff, i32(o), red_f[0]); }
}
