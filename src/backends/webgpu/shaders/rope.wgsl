// RoPE: one invocation per rotated pair or passed-through dim of each
// (b, s, h). Both halves of a pair are read before either is written, so the
// kernel is also correct in place. Slots: 0 out, 2 x, 3 cos, 4 sin.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = group_linear(wid) * 64u + lid;
  if (t >= P[R_COUNT]) { return; }
  let S = pxu(RP_S); let H = pxu(RP_H); let D = pxu(RP_D);
  let n_rot = pxu(RP_NROT);
  let half = n_rot / 2u;
  let per = half + D - n_rot;
  let k = t % per;
  let h = (t / per) % H;
  let s = (t / (per * H)) % S;
  let b = t / (per * H * S);
  let xo = i32(b) * px(RP_X) + i32(s) * px(RP_X + 1u) + i32(h) * px(RP_X + 2u);
  let oo = i32(b) * px(RP_O) + i32(s) * px(RP_O + 1u) + i32(h) * px(RP_O + 2u);
  let xdt = v_dt(2u); let xoff = v_off(2u);
  let odt = v_dt(0u); let ooff = v_off(0u);
  if (k >= half) {
    let d = n_rot + (k - half);
    copy_elem(odt, ooff, oo + i32(d), xdt, xoff, xo + i32(d));
    return;
  }
  let row = select(s, b * S + s, px(RP_PER_TOKEN) != 0);
  let gptj = px(RP_STYLE) == ROPE_GPTJ;
  let i1 = select(k, 2u * k, gptj);
  let i2 = select(k + half, 2u * k + 1u, gptj);
  let c = ld_f(v_dt(3u), v_off(3u), i32(row * half + k));
  let sn0 = ld_f(v_dt(4u), v_off(4u), i32(row * half + k));
  let sn = select(sn0, -sn0, px(RP_INVERSE) != 0); // RopeBackward: the transposed rotation
  let x1 = ld_f(xdt, xoff, xo + i32(i1));
  let x2 = ld_f(xdt, xoff, xo + i32(i2));
  st_f(odt, ooff, oo + i32(i1), x1 * c - x2 * sn);
  st_f(odt, ooff, oo + i32(i2), x2 * c + x1 * sn);
}
