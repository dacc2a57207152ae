#version 450
// TopK along rows of [outer, n, inner]: one invocation per row element;
// its rank among the row (value order with NaN above everything, ties to the
// lower index) decides where it lands, so nothing is sorted.
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
  const int X = RLXVK_SLOT_IN0, O = RLXVK_SLOT_OUT0, O1 = RLXVK_SLOT_OUT1;
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int n = PX(RW_N), inner = PX(RW_INNER);
  uint xdt = v_dt(X), xo = v_off(X);
  bool ints = is_intlike(xdt);
  int i = int(gid % uint(n)), row = int(gid / uint(n));
  int o = row / inner, j = row - o * inner;
  int base = o * n * inner + j, k = PX(RW_K);
  bool largest = PX(RW_LARGEST) != 0;
  float vf = ints ? 0.0 : ld_f(xdt, xo, base + i * inner);
  int64_t vi = ints ? ld_i(xdt, xo, base + i * inner) : 0L;
  int rank = 0;
  for (int q = 0; q < n; q++) {
    if (q == i) continue;
    int c = ints ? cmp_i(ld_i(xdt, xo, base + q * inner), vi)
                 : cmp_f(ld_f(xdt, xo, base + q * inner), vf);
    if (!largest) c = -c;
    if (c > 0 || (c == 0 && q < i)) rank++;
  }
  if (rank >= k) return;
  int e = (o * k + rank) * inner + j;
  copy_elem(v_dt(O), v_off(O), e, xdt, xo, base + i * inner);
  st_i(v_dt(O1), v_off(O1), e, int64_t(i));
}
