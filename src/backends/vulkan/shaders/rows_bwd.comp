#version 450
// Row-wise backward kinds, one workgroup per row, f32 accumulation through
// the fixed-order workgroup sums of wgreduce.glsl (deterministic):
//   NORM_BWD    dx of LayerNorm / RmsNorm rows of `cols` contiguous elements:
//               the row's statistics are recomputed from x, then
//               dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat))
//               (RMS: no mean(g*dy) term). Slots: in0 x, in1 gamma, in2 dy.
//   SOFTMAX_BWD rows of a dense [outer, n, inner] tensor: softmax (op 0)
//               dx = y * (dy - sum(dy*y)); log-softmax (op 1)
//               dx = dy - exp(y) * sum(dy). Slots: in0 y, in1 dy.
#include "common.glsl"
#include "wgreduce.glsl"
layout(local_size_x = 64) in;

const int S_IN0 = RLXVK_SLOT_IN0, S_IN1 = RLXVK_SLOT_IN0 + 1, S_IN2 = RLXVK_SLOT_IN0 + 2,
          S_OUT = RLXVK_SLOT_OUT0;

float ld_slot(int slot, int e) { return ld_f(v_dt(slot), v_off(slot), e); }

void norm_bwd(int r) {
  int cols = PX(NM_COLS), lid = int(gl_LocalInvocationID.x), base = r * cols;
  bool rms = PX(NM_RMS) != 0, has_gamma = PX(NM_HAS_GAMMA) != 0;
  float s = 0.0;
  for (int c = lid; c < cols; c += 64) s += ld_slot(S_IN0, base + c);
  float mean = wg_sum(s) / float(cols); // every invocation reaches each barrier
  if (rms) mean = 0.0;
  float ss = 0.0;
  for (int c = lid; c < cols; c += 64) { float d = ld_slot(S_IN0, base + c) - mean; ss += d * d; }
  float rstd = 1.0 / sqrt(wg_sum(ss) / float(cols) + PF(RLXVK_X + NM_EPS));
  float sum_gdy = 0.0, sum_gdy_xhat = 0.0;
  for (int c = lid; c < cols; c += 64) {
    float g = has_gamma ? ld_slot(S_IN1, c) : 1.0;
    float gdy = g * ld_slot(S_IN2, base + c), xhat = (ld_slot(S_IN0, base + c) - mean) * rstd;
    sum_gdy += gdy;
    sum_gdy_xhat += gdy * xhat;
  }
  float a = wg_sum(sum_gdy) / float(cols), b = wg_sum(sum_gdy_xhat) / float(cols);
  if (rms) a = 0.0;
  for (int c = lid; c < cols; c += 64) {
    float g = has_gamma ? ld_slot(S_IN1, c) : 1.0;
    float gdy = g * ld_slot(S_IN2, base + c), xhat = (ld_slot(S_IN0, base + c) - mean) * rstd;
    st_f(v_dt(S_OUT), v_off(S_OUT), base + c, rstd * (gdy - a - xhat * b));
  }
}

void softmax_bwd(int row) {
  int n = PX(RW_N), inner = PX(RW_INNER), lid = int(gl_LocalInvocationID.x);
  int o = row / inner, j = row - o * inner, base = o * n * inner + j;
  bool logsm = P(RLXVK_OP) != 0;
  float acc = 0.0;
  for (int i = lid; i < n; i += 64) {
    float dy = ld_slot(S_IN1, base + i * inner);
    acc += logsm ? dy : dy * ld_slot(S_IN0, base + i * inner);
  }
  acc = wg_sum(acc);
  for (int i = lid; i < n; i += 64) {
    int e = base + i * inner;
    float y = ld_slot(S_IN0, e), dy = ld_slot(S_IN1, e);
    st_f(v_dt(S_OUT), v_off(S_OUT), e, logsm ? dy - exp(y) * acc : y * (dy - acc));
  }
}

void main() {
  uint row = group_linear();
  if (row >= PU(RLXVK_COUNT)) return; // whole workgroups: the barriers stay uniform
  if (P(RLXVK_KIND) == RLX_K_NORM_BWD) norm_bwd(int(row));
  else softmax_bwd(int(row));
}
