// Training kernels. Slots: 0 out0, 1 out1, 2.. in0..in4.
//  xent_main (RLX_K_XENT, one 256-wide workgroup per row; rlx_xent_params):
//    op 0 rows: out0[r] = (loss of row r, 1), or (0, 0) when ignored;
//    op 1 mean: one workgroup sums the partials in a fixed order, divides;
//    op 2 backward: d_loss / count * (softmax - smoothed one-hot).
//  gather_bwd_main (RLX_K_GATHER_BACKWARD): one 256-wide workgroup per dx
//    row (o, a) adds the dy rows whose index is a in position order.
//  opt_main (RLX_K_OPT_UPDATE): one element per invocation, every operand
//    read before an output is written (outputs may be the inputs' bytes).
// Bad targets / indices are reported to the run-state buffer.

fn xe_ignore() -> vec2<u32> { return vec2<u32>(pxu(XE_IGNORE_LO), pxu(XE_IGNORE_HI)); }

var<workgroup> xe_t: i32;

// The row's target, -1 when ignored; one outside the vocabulary is
// reported. Read by one invocation and shared, so the value is uniform
// (the reductions after it need uniform control flow).
fn xe_target(r: u32, V: u32, lid: u32) -> i32 {
  if (lid == 0u) {
    let t = ld_i(v_dt(3u), v_off(3u), i32(r));
    var v = i32(t.x);
    if (all(t == xe_ignore())) { v = -1; }
    else if (i64_is_neg(t) || t.y != 0u || t.x >= V) { report_bad_index(t, V); v = -1; }
    xe_t = v;
  }
  return workgroupUniformLoad(&xe_t);
}

// (log(sum(exp(x))), sum(x)) of row r; every invocation takes part.
fn xe_lse(r: u32, V: u32, ids: Ids) -> vec2<f32> {
  let dt = v_dt(2u);
  let off = v_off(2u);
  var key = 0u;
  for (var j = ids.lid; j < V; j = j + 256u) { key = max(key, fkey(ld_f(dt, off, i32(r * V + j)))); }
  let mx = funkey(wg_max_key(key, ids, 256u));
  var s = 0.0;
  var total = 0.0;
  for (var j = ids.lid; j < V; j = j + 256u) {
    let x = ld_f(dt, off, i32(r * V + j));
    s = s + exp_f(x - mx);
    total = total + x;
  }
  return vec2<f32>(mx + log_f(wg_sum(s, ids, 256u)), wg_sum(total, ids, 256u));
}

fn xe_rows(r: u32, V: u32, ls: f32, ids: Ids) {
  let t = xe_target(r, V, ids.lid);
  if (t < 0) {
    if (ids.lid == 0u) { st_f(v_dt(0u), v_off(0u), i32(2u * r), 0.0); st_f(v_dt(0u), v_off(0u), i32(2u * r + 1u), 0.0); }
    return;
  }
  let l = xe_lse(r, V, ids);
  if (ids.lid != 0u) { return; }
  var loss = (1.0 - ls) * (l.x - ld_f(v_dt(2u), v_off(2u), i32(r * V) + t));
  if (ls != 0.0) { loss = loss + ls * (l.x - l.y / f32(V)); }
  st_f(v_dt(0u), v_off(0u), i32(2u * r), loss);
  st_f(v_dt(0u), v_off(0u), i32(2u * r + 1u), 1.0);
}

fn xe_mean(rows: u32, ids: Ids) {
  var loss = 0.0;
  var count = 0.0;
  for (var r = ids.lid; r < rows; r = r + 256u) {
    loss = loss + ld_f(v_dt(2u), v_off(2u), i32(2u * r));
    count = count + ld_f(v_dt(2u), v_off(2u), i32(2u * r + 1u));
  }
  let l = wg_sum(loss, ids, 256u);
  let c = wg_sum(count, ids, 256u);
  if (ids.lid == 0u) { st_f(v_dt(0u), v_off(0u), 0, select(l / c, nan_f(), c == 0.0)); }
}

fn xe_backward(r: u32, rows: u32, V: u32, ls: f32, ids: Ids) {
  var count = 0.0;
  for (var q = ids.lid; q < rows; q = q + 256u) {
    if (any(ld_i(v_dt(3u), v_off(3u), i32(q)) != xe_ignore())) { count = count + 1.0; }
  }
  count = wg_sum(count, ids, 256u);
  let t = xe_target(r, V, ids.lid);
  if (t < 0) {
    for (var j = ids.lid; j < V; j = j + 256u) { st_f(v_dt(0u), v_off(0u), i32(r * V + j), 0.0); }
    return;
  }
  let lse = xe_lse(r, V, ids).x;
  let scale = ld_f(v_dt(4u), v_off(4u), 0) / count;
  // every logit is read (xe_lse) before any gradient is written
  workgroupBarrier();
  for (var j = ids.lid; j < V; j = j + 256u) {
    let soft = exp_f(ld_f(v_dt(2u), v_off(2u), i32(r * V + j)) - lse);
    let onehot = ls / f32(V) + select(0.0, 1.0 - ls, i32(j) == t);
    st_f(v_dt(0u), v_off(0u), i32(r * V + j), scale * (soft - onehot));
  }
}

@compute @workgroup_size(256)
fn xent_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let item = group_linear(wid);
  if (item >= P[R_COUNT]) { return; }
  let rows = pxu(XE_ROWS);
  let V = pxu(XE_VOCAB);
  let ls = pf(R_X + XE_LS);
  let op = P[R_OP];
  if (op == XE_OP_MEAN) { xe_mean(rows, ids); }
  else if (op == XE_OP_BACKWARD) { xe_backward(item, rows, V, ls, ids); }
  else { xe_rows(item, V, ls, ids); }
}

var<workgroup> gb_idx: array<i32, 256>;

@compute @workgroup_size(256)
fn gather_bwd_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let item = group_linear(wid);
  if (item >= P[R_COUNT]) { return; }
  let len = pxu(GA_AXIS_LEN);
  let inner = pxu(GA_INNER);
  let nidx = pxu(GA_NIDX);
  let a = i32(item % len);
  let o = item / len;
  let lid = ids.lid;
  for (var j0 = 0u; j0 < inner; j0 = j0 + 256u) {
    let j = j0 + lid;
    var acc = 0.0;
    for (var q0 = 0u; q0 < nidx; q0 = q0 + 256u) {
      workgroupBarrier();
      if (q0 + lid < nidx) {
        var raw = ld_i(v_dt(3u), v_off(3u), i32(q0 + lid));
        var v = raw;
        if (i64_is_neg(v)) { v = i64_add(v, vec2<u32>(len, 0u)); }
        let bad = v.y != 0u || v.x >= len;
        if (bad && item == 0u && j0 == 0u) { report_bad_index(raw, len); }
        gb_idx[lid] = select(i32(v.x), -1, bad);
      }
      workgroupBarrier();
      let n = min(256u, nidx - q0);
      for (var k = 0u; k < n; k = k + 1u) {
        if (gb_idx[k] == a && j < inner) {
          acc = acc + ld_f(v_dt(2u), v_off(2u), i32((o * nidx + q0 + k) * inner + j));
        }
      }
    }
    if (j < inner) { st_f(v_dt(0u), v_off(0u), i32((o * len + u32(a)) * inner + j), acc); }
  }
}

fn ou_hyper(slot: u32, k: u32) -> f32 { return ld_f(DT_F32, v_off(slot), i32(k)); }
fn ou_pow(b: f32, t: f32) -> f32 { return select(exp_f(t * log_f(b)), 0.0, b == 0.0); }

fn ou_sgd(e: i32) {
  let h = 5u; // in3
  let w = ld_f(v_dt(2u), v_off(2u), e);
  let has_buf = px(OU_HAS_BUF) != 0;
  var buf = 0.0;
  if (has_buf) { buf = ld_f(v_dt(4u), v_off(4u), e); }
  if (ou_hyper(h, OU_H_APPLY) == 0.0) {
    st_f(v_dt(0u), v_off(0u), e, w);
    if (has_buf) { st_f(v_dt(1u), v_off(1u), e, buf); }
    return;
  }
  var g = ld_f(v_dt(3u), v_off(3u), e) * ou_hyper(h, OU_H_GRAD_SCALE);
  let mom = pf(R_X + OU_MOMENTUM);
  let wd = pf(R_X + OU_WD);
  if (wd != 0.0) { g = g + wd * w; }
  if (mom != 0.0) {
    buf = select(mom * buf + (1.0 - pf(R_X + OU_DAMPENING)) * g, g, ou_hyper(h, OU_H_STEP) <= 1.0);
    g = select(buf, g + mom * buf, px(OU_NESTEROV) != 0);
  }
  st_f(v_dt(0u), v_off(0u), e, w - ou_hyper(h, OU_H_LR) * g);
  if (has_buf) { st_f(v_dt(1u), v_off(1u), e, buf); }
}

fn ou_adam(e: i32) {
  let h = 6u; // in4
  var w = ld_f(v_dt(2u), v_off(2u), e);
  var m = ld_f(v_dt(4u), v_off(4u), e);
  var v = ld_f(v_dt(5u), v_off(5u), e);
  if (ou_hyper(h, OU_H_APPLY) != 0.0) {
    var g = ld_f(v_dt(3u), v_off(3u), e) * ou_hyper(h, OU_H_GRAD_SCALE);
    let lr = ou_hyper(h, OU_H_LR);
    let t = ou_hyper(h, OU_H_STEP);
    let b1 = pf(R_X + OU_BETA1);
    let b2 = pf(R_X + OU_BETA2);
    let wd = pf(R_X + OU_WD);
    if (px(OU_DECOUPLED) != 0) { w = w * (1.0 - lr * wd); } else { g = g + wd * w; }
    m = b1 * m + (1.0 - b1) * g;
    v = b2 * v + (1.0 - b2) * g * g;
    let m_hat = m / (1.0 - ou_pow(b1, t));
    let v_hat = v / (1.0 - ou_pow(b2, t));
    w = w - lr * m_hat / (sqrt_f(v_hat) + pf(R_X + OU_EPS));
  }
  st_f(v_dt(0u), v_off(0u), e, w);
  st_f(v_dt(1u), v_off(1u), e, m);
  st_f(pxu(OU_OUT2_DT), pxu(OU_OUT2_OFF), e, v);
}

@compute @workgroup_size(64)
fn opt_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = group_linear(wid) * 64u + lid;
  if (t >= P[R_COUNT]) { return; }
  if (P[R_OP] == OU_OP_ADAM) { ou_adam(i32(t)); } else { ou_sgd(i32(t)); }
}
