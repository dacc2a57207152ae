#version 450
// Channel-wise norms (GroupNorm, InstanceNorm, LayerNorm2d, BatchNorm):
// one workgroup per group (o, i) of n elements, inner apart (see
// rlx_gnorm_params in src/passes/lower.h). Mean, then the biased variance
// about it (f32), then the per-channel affine. BatchNorm (has_stats) reads
// the group's mean and var instead of reducing.
#include "common.glsl"
#include "wgreduce.glsl"
layout(local_size_x = 64) in;

const int O = RLXVK_SLOT_OUT0, X = RLXVK_SLOT_IN0, SG = RLXVK_SLOT_IN0 + 1,
          SB = RLXVK_SLOT_IN0 + 2, SM = RLXVK_SLOT_IN0 + 3, SV = RLXVK_SLOT_IN0 + 4;

void main() {
  uint item = group_linear();
  if (item >= PU(RLXVK_COUNT)) return;
  int n = PX(GN_N), inner = PX(GN_INNER), groups = PX(GN_GROUPS), cdiv = PX(GN_CDIV);
  int o = int(item) / inner, base = o * n * inner + int(item) % inner;
  int lid = int(gl_LocalInvocationID.x);
  float mean, var_;
  if (PX(GN_HAS_STATS) != 0) {
    mean = ld_f(v_dt(SM), v_off(SM), o % groups);
    var_ = ld_f(v_dt(SV), v_off(SV), o % groups);
  } else {
    float s = 0.0;
    for (int j = lid; j < n; j += 64) s += ld_f(v_dt(X), v_off(X), base + j * inner);
    mean = wg_sum(s) / float(n);
    float ss = 0.0;
    for (int j = lid; j < n; j += 64) {
      float d = ld_f(v_dt(X), v_off(X), base + j * inner) - mean;
      ss += d * d;
    }
    var_ = wg_sum(ss) / float(n);
  }
  float inv = 1.0 / sqrt(var_ + PF(RLXVK_X + GN_EPS));
  int cbase = (o % groups) * n;
  for (int j = lid; j < n; j += 64) {
    int e = base + j * inner, c = (cbase + j) / cdiv;
    float y = (ld_f(v_dt(X), v_off(X), e) - mean) * inv;
    if (PX(GN_HAS_GAMMA) != 0) y *= ld_f(v_dt(SG), v_off(SG), c);
    if (PX(GN_HAS_BETA) != 0) y += ld_f(v_dt(SB), v_off(SB), c);
    st_f(v_dt(O), v_off(O), e, y);
  }
}
