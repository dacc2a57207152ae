#version 450
// Softmax / log-softmax over rows of a dense [outer, n, inner] tensor: one
// workgroup per (outer, inner) row; max, then sum of exp, then the output.
// A NaN anywhere in the row poisons it, as in the reference.
#include "common.glsl"
layout(local_size_x = 64) in;

shared float red[64];

float fmax_nan(float a, float b) { return (isnan(a) || isnan(b)) ? NAN_F : max(a, b); }

void main() {
  const int X = RLXVK_SLOT_IN0, O = RLXVK_SLOT_OUT0;
  uint row = group_linear();
  if (row >= PU(RLXVK_COUNT)) return;
  int n = PX(RW_N), inner = PX(RW_INNER);
  int o = int(row) / inner, j = int(row) - o * inner;
  int base = o * n * inner + j;
  uint xdt = v_dt(X), xo = v_off(X), odt = v_dt(O), oo = v_off(O);
  uint lid = gl_LocalInvocationID.x;
  float m = -INF_F;
  for (int i = int(lid); i < n; i += 64) m = fmax_nan(m, ld_f(xdt, xo, base + i * inner));
  red[lid] = m;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (lid < s) red[lid] = fmax_nan(red[lid], red[lid + s]);
    barrier();
  }
  m = red[0];
  barrier();
  float sum = 0.0;
  for (int i = int(lid); i < n; i += 64) sum += exp(ld_f(xdt, xo, base + i * inner) - m);
  red[lid] = sum;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (lid < s) red[lid] += red[lid + s];
    barrier();
  }
  sum = red[0];
  float log_sum = log(sum);
  bool logsm = P(RLXVK_OP) != 0;
  for (int i = int(lid); i < n; i += 64) {
    float x = ld_f(xdt, xo, base + i * inner);
    float y = logsm ? (x - m) - log_sum : exp(x - m) / sum;
    st_f(odt, oo, base + i * inner, y);
  }
}
