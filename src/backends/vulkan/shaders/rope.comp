#version 450
// RoPE: one invocation per (b, s, h, pair) plus the pass-through dims of
// partial rotary. Both halves of a pair are read before either is written,
// so in-place is safe.
#include "common.glsl"
layout(local_size_x = 64) in;

void main() {
  const int X = RLXVK_SLOT_IN0, CS = RLXVK_SLOT_IN0 + 1, SN = RLXVK_SLOT_IN0 + 2, O = RLXVK_SLOT_OUT0;
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int S = PX(RP_S), H = PX(RP_H), D = PX(RP_D), n_rot = PX(RP_NROT);
  int half_ = n_rot / 2, per = half_ + (D - n_rot);
  int p = int(gid % uint(per));
  uint t = gid / uint(per);
  int h = int(t % uint(H));
  t /= uint(H);
  int s = int(t % uint(S)), b = int(t / uint(S));
  int xo = b * PX(RP_X) + s * PX(RP_X + 1) + h * PX(RP_X + 2);
  int oo = b * PX(RP_O) + s * PX(RP_O + 1) + h * PX(RP_O + 2);
  uint xdt = v_dt(X), xoff = v_off(X), odt = v_dt(O), ooff = v_off(O);
  if (p >= half_) {
    int d = n_rot + (p - half_);
    st_f(odt, ooff, oo + d, ld_f(xdt, xoff, xo + d));
    return;
  }
  int row = PX(RP_PER_TOKEN) != 0 ? b * S + s : s;
  bool gptj = PX(RP_STYLE) == RLX_ROPE_GPTJ;
  int i1 = gptj ? 2 * p : p, i2 = gptj ? 2 * p + 1 : p + half_;
  float c = ld_f(v_dt(CS), v_off(CS), row * half_ + p);
  float sn = ld_f(v_dt(SN), v_off(SN), row * half_ + p);
  if (PX(RP_INVERSE) != 0) sn = -sn; // RopeBackward: the transposed rotation
  float x1 = ld_f(xdt, xoff, xo + i1), x2 = ld_f(xdt, xoff, xo + i2);
  st_f(odt, ooff, oo + i1, x1 * c - x2 * sn);
  st_f(odt, ooff, oo + i2, x2 * c + x1 * sn);
}
