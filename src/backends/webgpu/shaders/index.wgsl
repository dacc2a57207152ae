// Gather (one invocation per output element) and ScatterAdd (one invocation
// per output element it may touch, summing its sources in the reference's
// order: deterministic, no float atomics). Bad indices are reported to the
// run-state buffer and the host fails the run naming the node.

@compute @workgroup_size(64)
fn gather_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = group_linear(wid) * 64u + lid;
  let inner = pxu(GA_INNER);
  let nidx = pxu(GA_NIDX);
  if (t >= P[R_COUNT]) { return; }
  let j = t % inner;
  let q = (t / inner) % nidx;
  let o = t / (inner * nidx);
  let len = pxu(GA_AXIS_LEN);
  let v = resolve_index(ld_i(v_dt(3u), v_off(3u), i32(q)), len);
  if (v < 0) { return; }
  copy_elem(v_dt(0u), v_off(0u), i32(t), v_dt(2u), v_off(2u), i32((o * len + u32(v)) * inner + j));
}

@compute @workgroup_size(64)
fn scatter_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = group_linear(wid) * 64u + lid;
  if (t >= P[R_COUNT]) { return; }
  let rank = px(SC_RANK);
  let axis = pxu(SC_AXIS);
  let alen = pxu(SC_AXIS_LEN);
  // Coordinates of t over the shape with dim `axis` = alen (tgt position).
  var rem = t;
  var tgt = 0u;
  var e_out = 0;
  var idx_base = 0u; // dense offset into idx/src with coordinate axis = 0
  var stride = 1u;
  var axis_stride = 1u;
  for (var d = rank - 1; d >= 0; d = d - 1) {
    let ud = u32(d);
    let n = select(pxu(SC_SHAPE + ud), alen, ud == axis);
    let c = rem % n;
    rem = rem / n;
    e_out = e_out + i32(c) * px(SC_OSTRIDE + ud);
    if (ud == axis) { tgt = c; axis_stride = stride; } else { idx_base = idx_base + c * stride; }
    stride = stride * pxu(SC_SHAPE + ud);
  }
  let idt = v_dt(2u); let ioff = v_off(2u);
  let sdt = v_dt(3u); let soff = v_off(3u);
  let odt = v_dt(0u); let ooff = v_off(0u);
  let ints = is_intlike(odt);
  var accf = 0.0;
  var acci = vec2<u32>(0u, 0u);
  if (ints) { acci = ld_i(odt, ooff, e_out); } else { accf = ld_f(odt, ooff, e_out); }
  let n_axis = pxu(SC_SHAPE + axis);
  var hit = false;
  for (var j = 0u; j < n_axis; j = j + 1u) {
    let p = i32(idx_base + j * axis_stride);
    let v = resolve_index(ld_i(idt, ioff, p), alen);
    if (v < 0 || u32(v) != tgt) { continue; }
    hit = true;
    if (ints) { acci = i64_add(acci, ld_i(sdt, soff, p)); }
    else { accf = round_to(odt, accf + ld_f(sdt, soff, p)); }
  }
  if (!hit) { return; }
  if (ints) { st_i(odt, ooff, e_out, acci); } else { st_f(odt, ooff, e_out, accf); }
}
