#version 450
// Optimizer update (RLX_K_OPT_UPDATE), one invocation per element: every
// operand of the element is read before any output is written (outputs are
// planned in the bytes of the param and state they replace). hyper
// (f32 [RLX_HYPER_COUNT]) is read from the arena at run time.
//  SGD:  in p, grad, buf (absent without momentum), hyper -> out p, buf;
//  Adam: in p, grad, m, v, hyper -> out p, m, v (v's view in OU_OUT2_*).
#include "common.glsl"
layout(local_size_x = 64) in;

const int SP = RLXVK_SLOT_IN0, SG = RLXVK_SLOT_IN0 + 1, S2 = RLXVK_SLOT_IN0 + 2,
          S3 = RLXVK_SLOT_IN0 + 3;

float hyper(int slot, int k) { return ld_f(uint(RLXVK_F32), v_off(slot), k); }

void sgd(int e) {
  const int SH = RLXVK_SLOT_IN0 + 3;
  float w = ld_f(v_dt(SP), v_off(SP), e);
  bool has_buf = PX(OU_HAS_BUF) != 0;
  float buf = has_buf ? ld_f(v_dt(S2), v_off(S2), e) : 0.0;
  if (hyper(SH, OU_H_APPLY) == 0.0) {
    st_f(v_dt(RLXVK_SLOT_OUT0), v_off(RLXVK_SLOT_OUT0), e, w);
    if (has_buf) st_f(v_dt(RLXVK_SLOT_OUT1), v_off(RLXVK_SLOT_OUT1), e, buf);
    return;
  }
  float g = ld_f(v_dt(SG), v_off(SG), e) * hyper(SH, OU_H_GRAD_SCALE);
  float mom = PF(RLXVK_X + OU_MOMENTUM), wd = PF(RLXVK_X + OU_WD);
  if (wd != 0.0) g += wd * w;
  if (mom != 0.0) {
    buf = hyper(SH, OU_H_STEP) <= 1.0
              ? g : mom * buf + (1.0 - PF(RLXVK_X + OU_DAMPENING)) * g;
    g = PX(OU_NESTEROV) != 0 ? g + mom * buf : buf;
  }
  st_f(v_dt(RLXVK_SLOT_OUT0), v_off(RLXVK_SLOT_OUT0), e, w - hyper(SH, OU_H_LR) * g);
  if (has_buf) st_f(v_dt(RLXVK_SLOT_OUT1), v_off(RLXVK_SLOT_OUT1), e, buf);
}

void adam(int e) {
  const int SH = RLXVK_SLOT_IN0 + 4;
  uint v_dt2 = uint(PX(OU_OUT2_DT)), v_off2 = uint(PX(OU_OUT2_OFF));
  float w = ld_f(v_dt(SP), v_off(SP), e), m = ld_f(v_dt(S2), v_off(S2), e);
  float v = ld_f(v_dt(S3), v_off(S3), e);
  if (hyper(SH, OU_H_APPLY) != 0.0) {
    float g = ld_f(v_dt(SG), v_off(SG), e) * hyper(SH, OU_H_GRAD_SCALE);
    float lr = hyper(SH, OU_H_LR), t = hyper(SH, OU_H_STEP);
    float b1 = PF(RLXVK_X + OU_BETA1), b2 = PF(RLXVK_X + OU_BETA2), wd = PF(RLXVK_X + OU_WD);
    if (PX(OU_DECOUPLED) != 0) w *= 1.0 - lr * wd;
    else g += wd * w;
    m = b1 * m + (1.0 - b1) * g;
    v = b2 * v + (1.0 - b2) * g * g;
    float m_hat = m / (1.0 - pow(b1, t)), v_hat = v / (1.0 - pow(b2, t));
    w -= lr * m_hat / (sqrt(v_hat) + PF(RLXVK_X + OU_EPS));
  }
  st_f(v_dt(RLXVK_SLOT_OUT0), v_off(RLXVK_SLOT_OUT0), e, w);
  st_f(v_dt(RLXVK_SLOT_OUT1), v_off(RLXVK_SLOT_OUT1), e, m);
  st_f(v_dt2, v_off2, e, v);
}

void main() {
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  if (P(RLXVK_OP) == OU_OP_ADAM) adam(int(gid));
  else sgd(int(gid));
}
