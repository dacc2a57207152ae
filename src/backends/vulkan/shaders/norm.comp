#version 450
// LayerNorm / RmsNorm (optionally of x + residual [+ bias], also written out):
// one workgroup per row; mean, then variance about it, then the output.
// The pre-norm sum is rounded to the output dtype before use, as the
// reference normalises the very value it stores.
#include "common.glsl"
#include "wgreduce.glsl"
layout(local_size_x = 64) in;

const int SX = RLXVK_SLOT_IN0, SR = RLXVK_SLOT_IN0 + 1, SB = RLXVK_SLOT_IN0 + 2,
          SG = RLXVK_SLOT_IN0 + 3, SBETA = RLXVK_SLOT_IN0 + 4;

float round_to(uint dt, float x) {
  if (dt == RLXVK_F16) return f16_to_f32(f32_to_f16(x));
  if (dt == RLXVK_BF16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

float pre(int r, int c, int cols) {
  int e = r * cols + c;
  float x = ld_f(v_dt(SX), v_off(SX), e);
  if (PX(NM_HAS_RES) != 0) {
    x += ld_f(v_dt(SR), v_off(SR), e);
    if (PX(NM_HAS_BIAS) != 0) x += ld_f(v_dt(SB), v_off(SB), c);
    x = round_to(v_dt(RLXVK_SLOT_OUT0), x);
  }
  return x;
}

void main() {
  uint row = group_linear();
  if (row >= PU(RLXVK_COUNT)) return;
  int r = int(row), cols = PX(NM_COLS);
  int lid = int(gl_LocalInvocationID.x);
  bool rms = PX(NM_RMS) != 0;
  float mean = 0.0;
  if (!rms) {
    float s = 0.0;
    for (int c = lid; c < cols; c += 64) s += pre(r, c, cols);
    mean = wg_sum(s) / float(cols);
  }
  float ss = 0.0;
  for (int c = lid; c < cols; c += 64) { float d = pre(r, c, cols) - mean; ss += d * d; }
  float inv = 1.0 / sqrt(wg_sum(ss) / float(cols) + PF(RLXVK_X + NM_EPS));
  bool sum_out = PX(NM_WRITES_SUM) != 0 && PX(NM_HAS_RES) != 0;
  for (int c = lid; c < cols; c += 64) {
    float v = pre(r, c, cols);
    if (sum_out) st_f(v_dt(RLXVK_SLOT_OUT1), v_off(RLXVK_SLOT_OUT1), r * cols + c, v);
    float y = (v - mean) * inv;
    if (PX(NM_HAS_GAMMA) != 0) y *= ld_f(v_dt(SG), v_off(SG), c);
    if (PX(NM_HAS_BETA) != 0) y += ld_f(v_dt(SBETA), v_off(SBETA), c);
    st_f(v_dt(RLXVK_SLOT_OUT0), v_off(RLXVK_SLOT_OUT0), r * cols + c, y);
  }
}
