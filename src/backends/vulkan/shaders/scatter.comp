#version 450
// ScatterAdd, deterministic: one invocation per destination element (p with
// p[axis] = v). It walks the source positions that differ from it only along
// the axis, in the reference's order, and adds those whose index is v, so
// results match the serial reference without atomics.
#include "common.glsl"
layout(local_size_x = 64) in;

void main() {
  const int I = RLXVK_SLOT_IN0, S = RLXVK_SLOT_IN0 + 1, O = RLXVK_SLOT_OUT0;
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int rank = PX(SC_RANK), axis = PX(SC_AXIS), len = PX(SC_AXIS_LEN);
  int coord[8];
  uint rem = gid;
  for (int d = rank - 1; d >= 0; d--) {
    uint n = uint(d == axis ? len : PX(SC_SHAPE + d));
    coord[d] = int(rem % n);
    rem /= n;
  }
  int v = coord[axis];
  int e = 0, ib = 0, sb = 0;
  for (int d = 0; d < rank; d++) {
    e += coord[d] * PX(SC_OSTRIDE + d);
    if (d != axis) { ib += coord[d] * v_stride(I, d); sb += coord[d] * v_stride(S, d); }
  }
  uint idt = v_dt(I), io = v_off(I), sdt = v_dt(S), so = v_off(S), odt = v_dt(O), oo = v_off(O);
  bool ints = is_intlike(odt);
  float accf = ints ? 0.0 : ld_f(odt, oo, e);
  int64_t acci = ints ? ld_i(odt, oo, e) : 0L;
  bool hit = false;
  int n_ax = PX(SC_SHAPE + axis);
  for (int k = 0; k < n_ax; k++) {
    int64_t raw = ld_i(idt, io, ib + k * v_stride(I, axis));
    int64_t r = raw < 0L ? raw + int64_t(len) : raw;
    if (r < 0L || r >= int64_t(len)) {
      if (v == 0) report_bad_index(raw, int64_t(len));
      continue;
    }
    if (int(r) != v) continue;
    hit = true;
    int se = sb + k * v_stride(S, axis);
    if (ints) acci += ld_i(sdt, so, se);
    else accf += ld_f(sdt, so, se);
  }
  if (!hit) return;
  if (ints) st_i(odt, oo, e, acci); else st_f(odt, oo, e, accf);
}
