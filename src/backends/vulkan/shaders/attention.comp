#version 450
// Attention forward, one workgroup per query row (b, h, i): keys are swept in
// tiles of 64 (one score per invocation), with an online softmax in f32 so
// any key length runs in fixed shared memory. Head dims up to 256 (the host
// sends larger ones to the fallback). Fully masked rows output zeros.
#include "common.glsl"
layout(local_size_x = 64) in;

#define MAXD 256
shared float qs[MAXD];
shared float ps[64];
shared float red[64];

const int SQ = RLXVK_SLOT_IN0, SK = RLXVK_SLOT_IN0 + 1, SV = RLXVK_SLOT_IN0 + 2,
          SM = RLXVK_SLOT_IN0 + 3, SO = RLXVK_SLOT_OUT0;

float score(int b, int h, int i, int j, int kvh, int D) {
  int Sq = PX(AT_SQ), Sk = PX(AT_SK);
  int ko = b * PX(AT_K) + j * PX(AT_K + 1) + kvh * PX(AT_K + 2);
  uint kdt = v_dt(SK), koff = v_off(SK);
  float dot_ = 0.0;
  for (int d = 0; d < D; d++) dot_ = fma(qs[d], ld_f(kdt, koff, ko + d), dot_);
  float sc = dot_ * PF(RLXVK_X + AT_SCALE);
  float cap = PF(RLXVK_X + AT_SOFTCAP);
  if (cap > 0.0) sc = cap * tanh_f(sc / cap);
  int last_visible = i + Sk - Sq;
  int mask = PX(AT_MASK);
  int m_at = b * PX(AT_M) + h * PX(AT_M + 1) + i * PX(AT_M + 2) + j * PX(AT_M + 3);
  if (mask == RLX_MASK_CAUSAL && j > last_visible) return -INF_F;
  if (mask == RLX_MASK_SLIDING && (j > last_visible || j <= last_visible - PX(AT_WINDOW))) return -INF_F;
  if (mask == RLX_MASK_CUSTOM && !(ld_f(v_dt(SM), v_off(SM), m_at) > 0.5)) return -INF_F;
  if (mask == RLX_MASK_BIAS) sc += ld_f(v_dt(SM), v_off(SM), m_at);
  return sc;
}

void main() {
  uint row = group_linear();
  if (row >= PU(RLXVK_COUNT)) return;
  int H = PX(AT_H), Sq = PX(AT_SQ), Sk = PX(AT_SK), D = PX(AT_D), Dv = PX(AT_DV);
  int i = int(row % uint(Sq));
  int h = int((row / uint(Sq)) % uint(H));
  int b = int(row / uint(Sq * H));
  int kvh = h / (H / PX(AT_HKV));
  int lid = int(gl_LocalInvocationID.x);
  int qo = b * PX(AT_Q) + i * PX(AT_Q + 1) + h * PX(AT_Q + 2);
  for (int d = lid; d < D; d += 64) qs[d] = ld_f(v_dt(SQ), v_off(SQ), qo + d);
  barrier();
  float acc[MAXD / 64];
  for (int t = 0; t < MAXD / 64; t++) acc[t] = 0.0;
  float m = -INF_F, total = 0.0;
  uint vdt = v_dt(SV), voff = v_off(SV);
  for (int j0 = 0; j0 < Sk; j0 += 64) {
    int j = j0 + lid;
    float s = j < Sk ? score(b, h, i, j, kvh, D) : -INF_F;
    red[lid] = s;
    barrier();
    for (int st = 32; st > 0; st >>= 1) {
      if (lid < st) red[lid] = max(red[lid], red[lid + st]);
      barrier();
    }
    float tile_max = red[0];
    float new_m = max(m, tile_max);
    barrier();
    if (new_m == -INF_F) continue; // uniform: nothing visible yet
    float alpha = m == -INF_F ? 0.0 : exp(m - new_m);
    float p = s == -INF_F ? 0.0 : exp(s - new_m);
    ps[lid] = p;
    red[lid] = p;
    barrier();
    for (int st = 32; st > 0; st >>= 1) {
      if (lid < st) red[lid] += red[lid + st];
      barrier();
    }
    total = total * alpha + red[0];
    int n_j = min(64, Sk - j0);
    for (int t = 0; t < MAXD / 64; t++) {
      int d = lid + 64 * t;
      if (d >= Dv) break;
      float a = acc[t] * alpha;
      for (int jj = 0; jj < n_j; jj++) {
        float w = ps[jj];
        if (w == 0.0) continue;
        int vo = b * PX(AT_V) + (j0 + jj) * PX(AT_V + 1) + kvh * PX(AT_V + 2);
        a = fma(w, ld_f(vdt, voff, vo + d), a);
      }
      acc[t] = a;
    }
    m = new_m;
    barrier();
  }
  int oo = b * PX(AT_O) + i * PX(AT_O + 1) + h * PX(AT_O + 2);
  for (int t = 0; t < MAXD / 64; t++) {
    int d = lid + 64 * t;
    if (d >= Dv) break;
    st_f(v_dt(SO), v_off(SO), oo + d, total > 0.0 ? acc[t] / total : 0.0);
  }
}
