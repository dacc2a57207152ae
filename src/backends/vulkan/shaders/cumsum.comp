#version 450
// Cumsum (inclusive / exclusive, forward / reverse) along rows of
// [outer, n, inner]: one invocation per row, serial in the reference's order,
// with a Kahan-compensated f32 sum so long rows stay close to the f64
// reference; integers exact in int64.
#include "common.glsl"
layout(local_size_x = 64) in;

void kahan_add(inout float acc, inout float comp, float v) {
  precise float y = v - comp;
  precise float t = acc + y;
  precise float e = (t - acc) - y;
  comp = e;
  acc = t;
}

void main() {
  const int X = RLXVK_SLOT_IN0, O = RLXVK_SLOT_OUT0;
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int n = PX(RW_N), inner = PX(RW_INNER);
  uint xdt = v_dt(X), xo = v_off(X), odt = v_dt(O), oo = v_off(O);
  bool ints = is_intlike(xdt);
  int row = int(gid), o = row / inner, j = row - o * inner;
  int base = o * n * inner + j;
  bool excl = PX(RW_EXCLUSIVE) != 0, rev = PX(RW_REVERSE) != 0;
  float acc = 0.0, comp = 0.0;
  int64_t iacc = 0L;
  for (int s = 0; s < n; s++) {
    int i = rev ? n - 1 - s : s;
    int e = base + i * inner;
    if (ints) {
      int64_t v = ld_i(xdt, xo, e);
      if (!excl) iacc += v;
      st_i(odt, oo, e, iacc);
      if (excl) iacc += v;
    } else {
      float v = ld_f(xdt, xo, e);
      if (!excl) kahan_add(acc, comp, v);
      st_f(odt, oo, e, acc);
      if (excl) kahan_add(acc, comp, v);
    }
  }
}
