#version 450
// ArgMax / ArgMin along rows of [outer, n, inner]: one invocation per row,
// serial along it, exactly the reference's order (first NaN wins, ties keep
// the first index).
#include "common.glsl"
layout(local_size_x = 64) in;

// Total order with NaN above everything; returns -1, 0, 1.
int cmp_f(float a, float b) {
  bool an = isnan(a), bn = isnan(b);
  if (an || bn) return (an ? 1 : 0) - (bn ? 1 : 0);
  return a > b ? 1 : (a < b ? -1 : 0);
}
int cmp_i(int64_t a, int64_t b) { return a > b ? 1 : (a < b ? -1 : 0); }

void main() {
  const int X = RLXVK_SLOT_IN0, O = RLXVK_SLOT_OUT0;
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int n = PX(RW_N), inner = PX(RW_INNER);
  uint xdt = v_dt(X), xo = v_off(X);
  bool ints = is_intlike(xdt);
  int row = int(gid), o = row / inner, j = row - o * inner;
  int base = o * n * inner + j;
  bool argmax = P(RLXVK_OP) == 0;
  int best_i = 0;
  float bf = ints ? 0.0 : ld_f(xdt, xo, base);
  int64_t bi = ints ? ld_i(xdt, xo, base) : 0L;
  for (int i = 1; i < n; i++) {
    if (!ints && isnan(bf)) break;
    if (ints) {
      int64_t v = ld_i(xdt, xo, base + i * inner);
      if (argmax ? v > bi : v < bi) { bi = v; best_i = i; }
    } else {
      float v = ld_f(xdt, xo, base + i * inner);
      int c = cmp_f(v, bf);
      if (isnan(v) || (argmax ? c > 0 : c < 0)) { bf = v; best_i = i; }
    }
  }
  st_i(v_dt(O), v_off(O), o * inner + j, int64_t(best_i));
}
