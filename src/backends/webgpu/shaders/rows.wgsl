// Row ops over a dense [outer, n, inner] view, along n: softmax / log-softmax
// (one workgroup per row, subgroup or workgroup reductions), arg-max/min and cumsum (one
// invocation per row, sequential so ties and NaN rules match the reference
// exactly), top-k (one invocation per element: its rank in the row decides
// whether and where it is written).

fn row_elem(o: u32, i: u32, j: u32) -> i32 { return i32((o * pxu(RW_N) + i) * pxu(RW_INNER) + j); }

// One 256-wide workgroup per row; wg_max_key / wg_sum (host prelude) use
// subgroups when the device has them.
@compute @workgroup_size(256)
fn softmax_main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let lid = ids.lid;
  let row = group_linear(wid);
  let inner = pxu(RW_INNER);
  if (row >= pxu(RW_OUTER) * inner) { return; }
  let o = row / inner; let j = row % inner;
  let n = pxu(RW_N);
  let dt = v_dt(2u); let off = v_off(2u);
  var mk = 0u;
  for (var i = lid; i < n; i = i + 256u) { mk = max(mk, fkey(ld_f(dt, off, row_elem(o, i, j)))); }
  let m = funkey(wg_max_key(mk, ids, 256u));
  var sum = 0.0;
  var comp = 0.0;
  for (var i = lid; i < n; i = i + 256u) {
    let y = exp_f(ld_f(dt, off, row_elem(o, i, j)) - m) - comp;
    let t = sum + y;
    comp = (t - sum) - y;
    sum = t;
  }
  sum = wg_sum(sum, ids, 256u);
  let log_sum = log_f(sum);
  let odt = v_dt(0u); let ooff = v_off(0u);
  let logsm = P[R_OP] == 1u;
  // Everything is read before anything is written (the output may alias).
  workgroupBarrier();
  for (var i = lid; i < n; i = i + 256u) {
    let e = row_elem(o, i, j);
    let x = ld_f(dt, off, e);
    st_f(odt, ooff, e, select(exp_f(x - m) / sum, x - m - log_sum, logsm));
  }
}

// Total order with NaN above everything; ints compared exactly.
fn num_cmp(ints: bool, ai: vec2<u32>, af: f32, bi: vec2<u32>, bf: f32) -> i32 {
  if (ints) { return select(select(0, 1, i64_lt(bi, ai)), -1, i64_lt(ai, bi)); }
  let an = is_nan(af); let bn = is_nan(bf);
  if (an || bn) { return select(0, 1, an) - select(0, 1, bn); }
  return select(0, 1, af > bf) - select(0, 1, af < bf);
}

@compute @workgroup_size(64)
fn arg_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = group_linear(wid) * 64u + lid;
  let inner = pxu(RW_INNER);
  if (row >= pxu(RW_OUTER) * inner) { return; }
  let o = row / inner; let j = row % inner;
  let n = pxu(RW_N);
  let dt = v_dt(2u); let off = v_off(2u);
  let ints = is_intlike(dt);
  var best_i = 0u;
  var bi = vec2<u32>(0u, 0u); var bf = 0.0;
  if (ints) { bi = ld_i(dt, off, row_elem(o, 0u, j)); } else { bf = ld_f(dt, off, row_elem(o, 0u, j)); }
  for (var i = 1u; i < n; i = i + 1u) {
    if (!ints && is_nan(bf)) { break; }
    var vi = vec2<u32>(0u, 0u); var vf = 0.0;
    if (ints) { vi = ld_i(dt, off, row_elem(o, i, j)); } else { vf = ld_f(dt, off, row_elem(o, i, j)); }
    let c = num_cmp(ints, vi, vf, bi, bf);
    let better = (!ints && is_nan(vf)) || select((c < 0), (c > 0), P[R_OP] == 0u);
    if (better) { bi = vi; bf = vf; best_i = i; }
  }
  st_i(v_dt(0u), v_off(0u), i32(o * inner + j), vec2<u32>(best_i, 0u));
}

@compute @workgroup_size(64)
fn cumsum_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = group_linear(wid) * 64u + lid;
  let inner = pxu(RW_INNER);
  if (row >= pxu(RW_OUTER) * inner) { return; }
  let o = row / inner; let j = row % inner;
  let n = pxu(RW_N);
  let dt = v_dt(2u); let off = v_off(2u);
  let odt = v_dt(0u); let ooff = v_off(0u);
  let ints = is_intlike(dt);
  let excl = px(RW_EXCLUSIVE) != 0;
  let rev = px(RW_REVERSE) != 0;
  var acc = 0.0;
  var comp = 0.0;
  var iacc = vec2<u32>(0u, 0u);
  for (var s = 0u; s < n; s = s + 1u) {
    let i = select(s, n - 1u - s, rev);
    let e = row_elem(o, i, j);
    // Read before writing: the output may be the input (in place).
    var vi = vec2<u32>(0u, 0u); var vf = 0.0;
    if (ints) { vi = ld_i(dt, off, e); } else { vf = ld_f(dt, off, e); }
    if (!excl) {
      if (ints) { iacc = i64_add(iacc, vi); } else { let y = vf - comp; let t = acc + y; comp = (t - acc) - y; acc = t; }
    }
    if (ints) { st_i(odt, ooff, e, iacc); } else { st_f(odt, ooff, e, acc); }
    if (excl) {
      if (ints) { iacc = i64_add(iacc, vi); } else { let y = vf - comp; let t = acc + y; comp = (t - acc) - y; acc = t; }
    }
  }
}

// Element (o, i, j) of a row goes to position rank(i) when rank(i) < k;
// order: by value (descending when largest), ties by lower index.
@compute @workgroup_size(64)
fn topk_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = group_linear(wid) * 64u + lid;
  let n = pxu(RW_N);
  let inner = pxu(RW_INNER);
  if (t >= pxu(RW_OUTER) * n * inner) { return; }
  let j = t % inner;
  let i = (t / inner) % n;
  let o = t / (inner * n);
  let k = pxu(RW_K);
  let largest = px(RW_LARGEST) != 0;
  let dt = v_dt(2u); let off = v_off(2u);
  let ints = is_intlike(dt);
  var xi = vec2<u32>(0u, 0u); var xf = 0.0;
  if (ints) { xi = ld_i(dt, off, row_elem(o, i, j)); } else { xf = ld_f(dt, off, row_elem(o, i, j)); }
  var rank = 0u;
  for (var q = 0u; q < n; q = q + 1u) {
    if (q == i) { continue; }
    var yi = vec2<u32>(0u, 0u); var yf = 0.0;
    if (ints) { yi = ld_i(dt, off, row_elem(o, q, j)); } else { yf = ld_f(dt, off, row_elem(o, q, j)); }
    var c = num_cmp(ints, yi, yf, xi, xf);
    if (!largest) { c = -c; }
    if (c > 0 || (c == 0 && q < i)) { rank = rank + 1u; }
  }
  if (rank >= k) { return; }
  let e = i32((o * k + rank) * inner + j);
  copy_elem(v_dt(0u), v_off(0u), e, dt, off, row_elem(o, i, j));
  st_i(v_dt(1u), v_off(1u), e, vec2<u32>(i, 0u));
}
