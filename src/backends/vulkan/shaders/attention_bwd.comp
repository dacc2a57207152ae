#version 450
// Attention backward, one phase per dispatch (RLXVK_OP = RLX_ATTN_BWD_*,
// lower.h), one workgroup per work item, f32 arithmetic:
//   STATS (query row b, h, i): lse over the keys (online, in tiles of 64) and
//          D = d_out . out, written to the stats view [rows, 2];
//   DQ    (query row): its stats again, then per key tile dS into shared
//          memory and dq = sum dS k;
//   DV/DK (key row b, kvh, j): per tile of 64 query rows (over the kv head's
//          query heads) P or dS into shared memory, then dv = sum P d_out or
//          dk = sum dS q.
// Scores never leave the workgroup. d_out, the step's sixth input, rides in
// the out1 slot (the record has five input slots). Head dims up to 256.
#include "common.glsl"
layout(local_size_x = 64) in;

#define MAXD 256
shared float rowv[MAXD]; // q (query items) or k (key items)
shared float row2[MAXD]; // d_out (query items) or v (key items)
shared float w[64];
shared float red[64];

const int SQ = RLXVK_SLOT_IN0, SK = RLXVK_SLOT_IN0 + 1, SV = RLXVK_SLOT_IN0 + 2,
          SM = RLXVK_SLOT_IN0 + 3, S4 = RLXVK_SLOT_IN0 + 4, SDO = RLXVK_SLOT_OUT1,
          SO = RLXVK_SLOT_OUT0;
int lid;

float wg_sum(float x) {
  red[lid] = x;
  barrier();
  for (int s = 32; s > 0; s >>= 1) {
    if (lid < s) red[lid] += red[lid + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

float wg_max(float x) {
  red[lid] = x;
  barrier();
  for (int s = 32; s > 0; s >>= 1) {
    if (lid < s) red[lid] = max(red[lid], red[lid + s]);
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

// Score from a dot product, as the forward; dsc = d score / d dot. False
// when masked.
bool score_of(int b, int h, int i, int j, float dot_, out float sc, out float dsc) {
  int Sq = PX(AT_SQ), Sk = PX(AT_SK), mask = PX(AT_MASK);
  int last_visible = i + Sk - Sq;
  if ((mask == RLX_MASK_CAUSAL || mask == RLX_MASK_SLIDING) && j > last_visible) return false;
  if (mask == RLX_MASK_SLIDING && j <= last_visible - PX(AT_WINDOW)) return false;
  int m_at = b * PX(AT_M) + h * PX(AT_M + 1) + i * PX(AT_M + 2) + j * PX(AT_M + 3);
  if (mask == RLX_MASK_CUSTOM && !(ld_f(v_dt(SM), v_off(SM), m_at) > 0.5)) return false;
  float scale = PF(RLXVK_X + AT_SCALE), cap = PF(RLXVK_X + AT_SOFTCAP);
  sc = dot_ * scale;
  dsc = scale;
  if (cap > 0.0) {
    float t = tanh_f(sc / cap);
    sc = cap * t;
    dsc = scale * (1.0 - t * t);
  }
  if (mask == RLX_MASK_BIAS) sc += ld_f(v_dt(SM), v_off(SM), m_at);
  return true;
}

int q_at(int b, int h, int i) { return b * PX(AT_Q) + i * PX(AT_Q + 1) + h * PX(AT_Q + 2); }
int k_at(int b, int g, int j) { return b * PX(AT_K) + j * PX(AT_K + 1) + g * PX(AT_K + 2); }
int v_at(int b, int g, int j) { return b * PX(AT_V) + j * PX(AT_V + 1) + g * PX(AT_V + 2); }
int do_at(int b, int h, int i) { return b * PX(AB_DO) + i * PX(AB_DO + 1) + h * PX(AB_DO + 2); }

// dot of the shared row with row j of `slot` at element offset `at`.
float dot_shared(int slot, int at, int n) {
  uint dt = v_dt(slot), off = v_off(slot);
  float s = 0.0;
  for (int d = 0; d < n; d++) s = fma(rowv[d], ld_f(dt, off, at + d), s);
  return s;
}

// lse of query row (b, h, i) whose q is in rowv; -inf when fully masked.
float row_lse(int b, int h, int i, int kvh) {
  int Sk = PX(AT_SK), D = PX(AT_D);
  float m = -INF_F, l = 0.0;
  for (int j0 = 0; j0 < Sk; j0 += 64) {
    int j = j0 + lid;
    float sc = -INF_F, dsc;
    if (j < Sk && !score_of(b, h, i, j, dot_shared(SK, k_at(b, kvh, j), D), sc, dsc)) sc = -INF_F;
    float tile_max = wg_max(sc);
    if (tile_max == -INF_F) continue; // uniform
    float new_m = max(m, tile_max);
    float part = wg_sum(sc == -INF_F ? 0.0 : exp(sc - new_m));
    l = (m == -INF_F ? 0.0 : l * exp(m - new_m)) + part;
    m = new_m;
  }
  return m == -INF_F ? -INF_F : m + log(l);
}

// D = d_out . out of row (b, h, i); d_out already in row2.
float row_delta(int b, int h, int i) {
  int Dv = PX(AT_DV);
  int oo = b * PX(AT_O) + i * PX(AT_O + 1) + h * PX(AT_O + 2);
  float s = 0.0;
  for (int d = lid; d < Dv; d += 64) s = fma(row2[d], ld_f(v_dt(S4), v_off(S4), oo + d), s);
  return wg_sum(s);
}

void load_query_row(int b, int h, int i) {
  int D = PX(AT_D), Dv = PX(AT_DV);
  for (int d = lid; d < D; d += 64) rowv[d] = ld_f(v_dt(SQ), v_off(SQ), q_at(b, h, i) + d);
  for (int d = lid; d < Dv; d += 64) row2[d] = ld_f(v_dt(SDO), v_off(SDO), do_at(b, h, i) + d);
  barrier();
}

void query_item(uint item, int op) {
  int H = PX(AT_H), Sq = PX(AT_SQ), Sk = PX(AT_SK), D = PX(AT_D), Dv = PX(AT_DV);
  int i = int(item % uint(Sq)), h = int((item / uint(Sq)) % uint(H)), b = int(item / uint(Sq * H));
  int kvh = h / (H / PX(AT_HKV));
  load_query_row(b, h, i);
  float lse = row_lse(b, h, i, kvh);
  float delta = row_delta(b, h, i);
  if (op == AB_STATS) {
    if (lid == 0) {
      st_f(v_dt(SO), v_off(SO), 2 * int(item), lse);
      st_f(v_dt(SO), v_off(SO), 2 * int(item) + 1, delta);
    }
    return;
  }
  float acc[MAXD / 64];
  for (int t = 0; t < MAXD / 64; t++) acc[t] = 0.0;
  uint kdt = v_dt(SK), koff = v_off(SK), vdt = v_dt(SV), voff = v_off(SV);
  for (int j0 = 0; j0 < Sk && lse != -INF_F; j0 += 64) {
    int j = j0 + lid;
    float ds = 0.0, sc, dsc;
    if (j < Sk && score_of(b, h, i, j, dot_shared(SK, k_at(b, kvh, j), D), sc, dsc)) {
      float p = exp(sc - lse), dp = 0.0;
      int vo = v_at(b, kvh, j);
      for (int d = 0; d < Dv; d++) dp = fma(row2[d], ld_f(vdt, voff, vo + d), dp);
      ds = p * (dp - delta) * dsc;
    }
    w[lid] = ds;
    barrier();
    int n_j = min(64, Sk - j0);
    for (int t = 0; t < MAXD / 64; t++) {
      int d = lid + 64 * t;
      if (d >= D) break;
      float a = acc[t];
      for (int jj = 0; jj < n_j; jj++)
        if (w[jj] != 0.0) a = fma(w[jj], ld_f(kdt, koff, k_at(b, kvh, j0 + jj) + d), a);
      acc[t] = a;
    }
    barrier();
  }
  int go = b * PX(AB_G) + i * PX(AB_G + 1) + h * PX(AB_G + 2);
  for (int t = 0; t < MAXD / 64; t++) {
    int d = lid + 64 * t;
    if (d >= D) break;
    st_f(v_dt(SO), v_off(SO), go + d, acc[t]);
  }
}

void key_item(uint item, int op) {
  int H = PX(AT_H), Hkv = PX(AT_HKV), Sq = PX(AT_SQ), Sk = PX(AT_SK), D = PX(AT_D),
      Dv = PX(AT_DV);
  int j = int(item % uint(Sk)), kvh = int((item / uint(Sk)) % uint(Hkv)),
      b = int(item / uint(Sk * Hkv));
  bool dk = op == AB_DK;
  for (int d = lid; d < D; d += 64) rowv[d] = ld_f(v_dt(SK), v_off(SK), k_at(b, kvh, j) + d);
  if (dk)
    for (int d = lid; d < Dv; d += 64) row2[d] = ld_f(v_dt(SV), v_off(SV), v_at(b, kvh, j) + d);
  barrier();
  int width = dk ? D : Dv, group = H / Hkv;
  int src = dk ? SQ : SDO;
  uint sdt = v_dt(src), soff = v_off(src), ddt = v_dt(SDO), doff = v_off(SDO);
  float acc[MAXD / 64];
  for (int t = 0; t < MAXD / 64; t++) acc[t] = 0.0;
  for (int h = kvh * group; h < (kvh + 1) * group; h++)
    for (int i0 = 0; i0 < Sq; i0 += 64) {
      int i = i0 + lid;
      float wt = 0.0, sc, dsc;
      if (i < Sq) {
        int r = (b * H + h) * Sq + i;
        float lse = ld_f(v_dt(S4), v_off(S4), 2 * r);
        if (lse != -INF_F && score_of(b, h, i, j, dot_shared(SQ, q_at(b, h, i), D), sc, dsc)) {
          float p = exp(sc - lse);
          wt = p;
          if (dk) {
            float dp = 0.0;
            int go = do_at(b, h, i);
            for (int d = 0; d < Dv; d++) dp = fma(ld_f(ddt, doff, go + d), row2[d], dp);
            wt = p * (dp - ld_f(v_dt(S4), v_off(S4), 2 * r + 1)) * dsc;
          }
        }
      }
      w[lid] = wt;
      barrier();
      int n_i = min(64, Sq - i0);
      for (int t = 0; t < MAXD / 64; t++) {
        int d = lid + 64 * t;
        if (d >= width) break;
        float a = acc[t];
        for (int ii = 0; ii < n_i; ii++) {
          if (w[ii] == 0.0) continue;
          int at = dk ? q_at(b, h, i0 + ii) : do_at(b, h, i0 + ii);
          a = fma(w[ii], ld_f(sdt, soff, at + d), a);
        }
        acc[t] = a;
      }
      barrier();
    }
  int go = b * PX(AB_G) + j * PX(AB_G + 1) + kvh * PX(AB_G + 2);
  for (int t = 0; t < MAXD / 64; t++) {
    int d = lid + 64 * t;
    if (d >= width) break;
    st_f(v_dt(SO), v_off(SO), go + d, acc[t]);
  }
}

void main() {
  uint item = group_linear();
  if (item >= PU(RLXVK_COUNT)) return;
  lid = int(gl_LocalInvocationID.x);
  int op = P(RLXVK_OP);
  if (op == AB_DV || op == AB_DK)
    key_item(item, op);
  else
    query_item(item, op);
}
