#version 450
// Row ops with one invocation per item: ARG_REDUCE and CUMSUM (one per
// (outer, inner) row, serial along the row, exactly the reference's order)
// and TOPK (one per row element: its rank among the row decides where it
// lands, so no sort is needed and ties keep the lower index first).
#include "common.glsl"
layout(local_size_x = 64) in;

#define K_ARG 7
#define K_CUMSUM 9
#define K_TOPK 10

// Total order with NaN above everything; returns -1, 0, 1.
int cmp_f(float a, float b) {
  bool an = isnan(a), bn = isnan(b);
  if (an || bn) return int(an) - int(bn);
  return int(a > b) - int(a < b);
}
int cmp_i(int64_t a, int64_t b) { return int(a > b) - int(a < b); }

void main() {
  const int X = RLXVK_SLOT_IN0, O = RLXVK_SLOT_OUT0, O1 = RLXVK_SLOT_OUT1;
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int kind = P(RLXVK_KIND), n = PX(RW_N), inner = PX(RW_INNER);
  uint xdt = v_dt(X), xo = v_off(X), odt = v_dt(O), oo = v_off(O);
  bool ints = is_intlike(xdt);
  if (kind == K_TOPK) {
    int i = int(gid % uint(n)), row = int(gid / uint(n));
    int o = row / inner, j = row - o * inner;
    int base = o * n * inner + j, k = PX(RW_K);
    bool largest = PX(RW_LARGEST) != 0;
    float vf = ints ? 0.0 : ld_f(xdt, xo, base + i * inner);
    int64_t vi = ints ? ld_i(xdt, xo, base + i * inner) : 0L;
    int rank = 0;
    for (int q = 0; q < n && rank < k; q++) {
      if (q == i) continue;
      int c = ints ? cmp_i(ld_i(xdt, xo, base + q * inner), vi)
                   : cmp_f(ld_f(xdt, xo, base + q * inner), vf);
      if (!largest) c = -c;
      if (c > 0 || (c == 0 && q < i)) rank++;
    }
    if (rank >= k) return;
    int e = (o * k + rank) * inner + j;
    copy_elem(odt, oo, e, xdt, xo, base + i * inner);
    st_i(v_dt(O1), v_off(O1), e, int64_t(i));
    return;
  }
  int row = int(gid), o = row / inner, j = row - o * inner;
  int base = o * n * inner + j;
  if (kind == K_ARG) {
    bool argmax = P(RLXVK_OP) == 0;
    int best_i = 0;
    float bf = ints ? 0.0 : ld_f(xdt, xo, base);
    int64_t bi = ints ? ld_i(xdt, xo, base) : 0L;
    for (int i = 1; i < n && (ints || !isnan(bf)); i++) {
      if (ints) {
        int64_t v = ld_i(xdt, xo, base + i * inner);
        if (argmax ? v > bi : v < bi) { bi = v; best_i = i; }
      } else {
        float v = ld_f(xdt, xo, base + i * inner);
        int c = cmp_f(v, bf);
        if (isnan(v) || (argmax ? c > 0 : c < 0)) { bf = v; best_i = i; }
      }
    }
    st_i(odt, oo, o * inner + j, int64_t(best_i));
    return;
  }
  // CUMSUM: Kahan-compensated f32 so long rows stay close to the f64 reference.
  bool excl = PX(RW_EXCLUSIVE) != 0, rev = PX(RW_REVERSE) != 0;
  precise float acc = 0.0, comp = 0.0;
  int64_t iacc = 0L;
  for (int s = 0; s < n; s++) {
    int i = rev ? n - 1 - s : s;
    int e = base + i * inner;
    float vf = 0.0;
    int64_t vi = 0L;
    if (ints) vi = ld_i(xdt, xo, e); else vf = ld_f(xdt, xo, e);
    if (!excl) {
      if (ints) iacc += vi;
      else { precise float y = vf - comp; precise float t = acc + y; comp = (t - acc) - y; acc = t; }
    }
    if (ints) st_i(odt, oo, e, iacc); else st_f(odt, oo, e, acc);
    if (excl) {
      if (ints) iacc += vi;
      else { precise float y = vf - comp; precise float t = acc + y; comp = (t - acc) - y; acc = t; }
    }
  }
}
