// Attention backward, one phase per dispatch (R_OP = AB_* = RLX_ATTN_BWD_*,
// lower.h), one workgroup per work item, f32 arithmetic:
//   STATS (query row b, h, i): lse over the keys and D = d_out . out, stored
//          as stats[row] = (lse, D);
//   DQ    (query row): its stats again, then per chunk of 64 keys each
//          invocation's dS goes to workgroup memory and dq = sum dS k;
//   DV/DK (key row b, kvh, j): per chunk of 64 query rows (over the kv
//          head's query heads) P or dS, then dv = sum P d_out, dk = sum dS q.
// Each invocation folds a whole chunk itself (as attention.wgsl), so every
// barrier sits in control flow that depends on the record only. Output dims
// d = lid, lid + 64, ... (head dims <= 256).
// Slots: 0 out, 1 d_out (the step's sixth input), 2 q, 3 k, 4 v, 5 mask,
// 6 out (STATS, DQ) or the stats (DV, DK).

var<workgroup> ab_w: array<f32, 64>;

// Score and its derivative by the dot product; score -inf where masked.
fn ab_score(dot: f32, b: u32, h: u32, i: u32, j: u32) -> vec2<f32> {
  let scale = pf(R_X + AT_SCALE);
  let cap = pf(R_X + AT_SOFTCAP);
  var dsc = scale;
  if (cap > 0.0) {
    let t = tanh_f(dot * scale / cap);
    dsc = scale * (1.0 - t * t);
  }
  return vec2<f32>(masked_score(dot, b, h, i, j), dsc);
}

fn ab_q(b: u32, h: u32, i: u32) -> i32 { return i32(b) * px(AT_Q) + i32(i) * px(AT_Q + 1u) + i32(h) * px(AT_Q + 2u); }
fn ab_k(b: u32, g: u32, j: u32) -> i32 { return i32(b) * px(AT_K) + i32(j) * px(AT_K + 1u) + i32(g) * px(AT_K + 2u); }
fn ab_v(b: u32, g: u32, j: u32) -> i32 { return i32(b) * px(AT_V) + i32(j) * px(AT_V + 1u) + i32(g) * px(AT_V + 2u); }
fn ab_do(b: u32, h: u32, i: u32) -> i32 { return i32(b) * px(AB_DO) + i32(i) * px(AB_DO + 1u) + i32(h) * px(AB_DO + 2u); }

fn ab_dot(sa: u32, a: i32, sb: u32, bo: i32, n: u32) -> f32 {
  let adt = v_dt(sa); let aoff = v_off(sa); let bdt = v_dt(sb); let boff = v_off(sb);
  var s = 0.0;
  for (var d = 0u; d < n; d = d + 1u) { s = fma(ld_f(adt, aoff, a + i32(d)), ld_f(bdt, boff, bo + i32(d)), s); }
  return s;
}

// (lse, D) of query row (b, h, i); lse = -inf when every key is masked.
fn ab_row_stats(b: u32, h: u32, i: u32, kvh: u32, lid: u32) -> vec2<f32> {
  let Sk = pxu(AT_SK); let D = pxu(AT_D);
  var m = -inf_f();
  var l = 0.0;
  for (var j0 = 0u; j0 < Sk; j0 = j0 + 64u) {
    let j = j0 + lid;
    var sc = -inf_f();
    if (j < Sk) { sc = ab_score(ab_dot(2u, ab_q(b, h, i), 3u, ab_k(b, kvh, j), D), b, h, i, j).x; }
    workgroupBarrier();
    ab_w[lid] = sc;
    workgroupBarrier();
    let n = min(64u, Sk - j0);
    var cm = m;
    for (var t = 0u; t < n; t = t + 1u) { cm = max(cm, ab_w[t]); }
    if (cm != -inf_f()) {
      l = l * select(exp_f(m - cm), 0.0, m == -inf_f());
      for (var t = 0u; t < n; t = t + 1u) {
        if (ab_w[t] != -inf_f()) { l = l + exp_f(ab_w[t] - cm); }
      }
      m = cm;
    }
  }
  let oo = i32(b) * px(AT_O) + i32(i) * px(AT_O + 1u) + i32(h) * px(AT_O + 2u);
  let delta = ab_dot(1u, ab_do(b, h, i), 6u, oo, pxu(AT_DV));
  return vec2<f32>(select(m + log(l), -inf_f(), m == -inf_f()), delta);
}

fn ab_query(item: u32, op: u32, lid: u32) {
  let H = pxu(AT_H); let Sq = pxu(AT_SQ); let Sk = pxu(AT_SK); let D = pxu(AT_D); let Dv = pxu(AT_DV);
  let i = item % Sq; let h = (item / Sq) % H; let b = item / (Sq * H);
  let kvh = h / (H / pxu(AT_HKV));
  let st = ab_row_stats(b, h, i, kvh, lid);
  if (op == AB_STATS) {
    if (lid == 0u) {
      st_f(v_dt(0u), v_off(0u), 2 * i32(item), st.x);
      st_f(v_dt(0u), v_off(0u), 2 * i32(item) + 1, st.y);
    }
    return;
  }
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  let kdt = v_dt(3u); let koff = v_off(3u);
  for (var j0 = 0u; j0 < Sk; j0 = j0 + 64u) {
    let j = j0 + lid;
    var ds = 0.0;
    if (j < Sk && st.x != -inf_f()) {
      let s = ab_score(ab_dot(2u, ab_q(b, h, i), 3u, ab_k(b, kvh, j), D), b, h, i, j);
      if (s.x != -inf_f()) {
        let p = exp_f(s.x - st.x);
        let dp = ab_dot(1u, ab_do(b, h, i), 4u, ab_v(b, kvh, j), Dv);
        ds = p * (dp - st.y) * s.y;
      }
    }
    workgroupBarrier();
    ab_w[lid] = ds;
    workgroupBarrier();
    let n = min(64u, Sk - j0);
    for (var t = 0u; t < n; t = t + 1u) {
      let w = ab_w[t];
      if (w == 0.0) { continue; }
      let ko = ab_k(b, kvh, j0 + t);
      for (var u = 0u; u < 4u; u = u + 1u) {
        let d = lid + u * 64u;
        if (d < D) { acc[u] = fma(w, ld_f(kdt, koff, ko + i32(d)), acc[u]); }
      }
    }
  }
  let go = i32(b) * px(AB_G) + i32(i) * px(AB_G + 1u) + i32(h) * px(AB_G + 2u);
  for (var u = 0u; u < 4u; u = u + 1u) {
    let d = lid + u * 64u;
    if (d < D) { st_f(v_dt(0u), v_off(0u), go + i32(d), acc[u]); }
  }
}

fn ab_key(item: u32, op: u32, lid: u32) {
  let H = pxu(AT_H); let Hkv = pxu(AT_HKV); let Sq = pxu(AT_SQ); let Sk = pxu(AT_SK);
  let D = pxu(AT_D); let Dv = pxu(AT_DV);
  let j = item % Sk; let kvh = (item / Sk) % Hkv; let b = item / (Sk * Hkv);
  let dk = op == AB_DK;
  let width = select(Dv, D, dk);
  let src = select(1u, 2u, dk); // d_out rows for dv, q rows for dk
  let sdt = v_dt(src); let soff = v_off(src);
  let group = H / Hkv;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  for (var h = kvh * group; h < (kvh + 1u) * group; h = h + 1u) {
    for (var i0 = 0u; i0 < Sq; i0 = i0 + 64u) {
      let i = i0 + lid;
      var wt = 0.0;
      if (i < Sq) {
        let r = i32((b * H + h) * Sq + i);
        let lse = ld_f(v_dt(6u), v_off(6u), 2 * r);
        if (lse != -inf_f()) {
          let s = ab_score(ab_dot(2u, ab_q(b, h, i), 3u, ab_k(b, kvh, j), D), b, h, i, j);
          if (s.x != -inf_f()) {
            let p = exp_f(s.x - lse);
            wt = p;
            if (dk) {
              let dp = ab_dot(1u, ab_do(b, h, i), 4u, ab_v(b, kvh, j), Dv);
              wt = p * (dp - ld_f(v_dt(6u), v_off(6u), 2 * r + 1)) * s.y;
            }
          }
        }
      }
      workgroupBarrier();
      ab_w[lid] = wt;
      workgroupBarrier();
      let n = min(64u, Sq - i0);
      for (var t = 0u; t < n; t = t + 1u) {
        let w = ab_w[t];
        if (w == 0.0) { continue; }
        let at = select(ab_do(b, h, i0 + t), ab_q(b, h, i0 + t), dk);
        for (var u = 0u; u < 4u; u = u + 1u) {
          let d = lid + u * 64u;
          if (d < width) { acc[u] = fma(w, ld_f(sdt, soff, at + i32(d)), acc[u]); }
        }
      }
    }
  }
  let go = i32(b) * px(AB_G) + i32(j) * px(AB_G + 1u) + i32(kvh) * px(AB_G + 2u);
  for (var u = 0u; u < 4u; u = u + 1u) {
    let d = lid + u * 64u;
    if (d < width) { st_f(v_dt(0u), v_off(0u), go + i32(d), acc[u]); }
  }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let item = group_linear(wid);
  if (item >= pu(R_COUNT)) { return; }
  let op = pu(R_OP);
  if (op == AB_DV || op == AB_DK) {
    ab_key(item, op, lid);
  } else {
    ab_query(item, op, lid);
  }
}
