#version 450
// Softmax / log-softmax over rows of a dense [outer, n, inner] tensor: one
// workgroup per (outer, inner) row; max, then sum of exp, then the output.
// A NaN anywhere in the row poisons it, as in the reference. Reductions use
// subgroup arithmetic where the device has it (wgreduce.glsl).
#include "common.glsl"
#include "wgreduce.glsl"
layout(local_size_x = 64) in;

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
  m = wg_max_nan(m);
  float sum = 0.0;
  for (int i = int(lid); i < n; i += 64) sum += exp(ld_f(xdt, xo, base + i * inner) - m);
  sum = wg_sum(sum);
  float log_sum = log(sum);
  bool logsm = P(RLXVK_OP) != 0;
  for (int i = int(lid); i < n; i += 64) {
    float x = ld_f(xdt, xo, base + i * inner);
    float y = logsm ? (x - m) - log_sum : exp(x - m) / sum;
    st_f(odt, oo, base + i * inner, y);
  }
}
