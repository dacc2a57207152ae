// Attention: one workgroup per query row (b, h, i). Keys are taken 64 at a
// time: each invocation scores one key of the chunk (scale, softcap, mask),
// then every invocation folds the chunk into the running max / sum and into
// the output dims it owns (d = lid, lid + 64, ...: Dv <= 256), flash-style.
// A row whose keys are all masked outputs zeros, as the reference.
// Slots: 0 out, 2 q, 3 k, 4 v, 5 mask/bias.

var<workgroup> at_s: array<f32, 64>;

// masked_score (common.wgsl) applies scale, softcap and the mask.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = group_linear(wid);
  let H = pxu(AT_H); let Sq = pxu(AT_SQ); let Sk = pxu(AT_SK);
  if (row >= pxu(AT_B) * H * Sq) { return; }
  let i = row % Sq;
  let h = (row / Sq) % H;
  let b = row / (Sq * H);
  let kvh = h / (H / pxu(AT_HKV));
  let D = pxu(AT_D); let Dv = pxu(AT_DV);
  let qo = i32(b) * px(AT_Q) + i32(i) * px(AT_Q + 1u) + i32(h) * px(AT_Q + 2u);
  let qdt = v_dt(2u); let qoff = v_off(2u);
  let kdt = v_dt(3u); let koff = v_off(3u);
  let vdt = v_dt(4u); let voff = v_off(4u);
  var m = -inf_f();
  var l = 0.0;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  for (var j0 = 0u; j0 < Sk; j0 = j0 + 64u) {
    let j = j0 + lid;
    var sc = -inf_f();
    if (j < Sk) {
      let ko = i32(b) * px(AT_K) + i32(j) * px(AT_K + 1u) + i32(kvh) * px(AT_K + 2u);
      var dot = 0.0;
      for (var d = 0u; d < D; d = d + 1u) {
        dot = fma(ld_f(qdt, qoff, qo + i32(d)), ld_f(kdt, koff, ko + i32(d)), dot);
      }
      sc = masked_score(dot, b, h, i, j);
    }
    workgroupBarrier();
    at_s[lid] = sc;
    workgroupBarrier();
    let n = min(64u, Sk - j0);
    var cm = m;
    for (var t = 0u; t < n; t = t + 1u) { cm = max(cm, at_s[t]); }
    if (cm != -inf_f()) { // else nothing visible yet
      let corr = select(exp_f(m - cm), 0.0, m == -inf_f());
      l = l * corr;
      for (var u = 0u; u < 4u; u = u + 1u) { acc[u] = acc[u] * corr; }
      for (var t = 0u; t < n; t = t + 1u) {
        let s = at_s[t];
        if (s == -inf_f()) { continue; }
        let w = exp_f(s - cm);
        l = l + w;
        let vo = i32(b) * px(AT_V) + i32(j0 + t) * px(AT_V + 1u) + i32(kvh) * px(AT_V + 2u);
        for (var u = 0u; u < 4u; u = u + 1u) {
          let d = lid + u * 64u;
          if (d < Dv) { acc[u] = fma(w, ld_f(vdt, voff, vo + i32(d)), acc[u]); }
        }
      }
      m = cm;
    }
  }
  let oo = i32(b) * px(AT_O) + i32(i) * px(AT_O + 1u) + i32(h) * px(AT_O + 2u);
  for (var u = 0u; u < 4u; u = u + 1u) {
    let d = lid + u * 64u;
    if (d < Dv) { st_f(v_dt(0u), v_off(0u), oo + i32(d), select(0.0, acc[u] / l, l > 0.0)); }
  }
}
