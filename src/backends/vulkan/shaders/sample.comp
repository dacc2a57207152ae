#version 450
// Sample: one workgroup per row. softmax(logits / T), keep the top_k most
// likely, then the smallest prefix reaching top_p of that mass, then draw
// u = rlx_rand_uniform(seed, row) (splitmix64, as in ref.c) and pick by
// cumulative probability in sorted order. The sorted order (probability
// descending, lower index first on ties) is walked one element at a time
// with a workgroup arg-max, so nothing is ever sorted.
#include "common.glsl"
layout(local_size_x = 64) in;

shared float rp[64];
shared int ri[64];

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15UL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9UL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBUL;
  return x ^ (x >> 31);
}

uint L_DT, L_OFF;
int VOCAB, BASE;
float TEMP, MX;

float logit(int j) { return ld_f(L_DT, L_OFF, BASE + j); }
float prob(int j) {
  float x = logit(j);
  return isnan(x) ? 0.0 : exp(x / TEMP - MX);
}

// Is (p, j) before (q, k) in the sorted order?
bool before(float p, int j, float q, int k) { return p > q || (p == q && j < k); }

// Workgroup arg-best over elements strictly after (pv, pi) in sorted order;
// (pv, pi) = (+inf, -1) starts at the beginning. Returns the index (-1: none).
int next_after(float pv, int pi, out float p_out) {
  int lid = int(gl_LocalInvocationID.x);
  float bp = -1.0;
  int bi = -1;
  for (int j = lid; j < VOCAB; j += 64) {
    float p = prob(j);
    if (!before(pv, pi, p, j)) continue;
    if (bi < 0 || before(p, j, bp, bi)) { bp = p; bi = j; }
  }
  rp[lid] = bp;
  ri[lid] = bi;
  barrier();
  for (int s = 32; s > 0; s >>= 1) {
    if (lid < s && ri[lid + s] >= 0 && (ri[lid] < 0 || before(rp[lid + s], ri[lid + s], rp[lid], ri[lid]))) {
      rp[lid] = rp[lid + s];
      ri[lid] = ri[lid + s];
    }
    barrier();
  }
  p_out = rp[0];
  int r = ri[0];
  barrier();
  return r;
}

// First maximum, skipping NaN unless all are NaN (ref.c argmax_row).
int argmax_row() {
  int lid = int(gl_LocalInvocationID.x);
  float bv = 0.0;
  int bi = -1;
  for (int j = lid; j < VOCAB; j += 64) {
    float x = logit(j);
    if (bi < 0 || x > bv || (isnan(bv) && !isnan(x))) { bv = x; bi = j; }
  }
  rp[lid] = bv;
  ri[lid] = bi;
  barrier();
  for (int s = 32; s > 0; s >>= 1) {
    if (lid < s && ri[lid + s] >= 0) {
      float a = rp[lid], b = rp[lid + s];
      int ia = ri[lid], ib = ri[lid + s];
      bool take = ia < 0 || (isnan(a) && !isnan(b)) ||
                  (!isnan(a) && !isnan(b) && (b > a || (b == a && ib < ia))) ||
                  (isnan(a) && isnan(b) && ib < ia);
      if (take) { rp[lid] = b; ri[lid] = ib; }
    }
    barrier();
  }
  int r = ri[0];
  barrier();
  return r;
}

float wg_max(float v) {
  int lid = int(gl_LocalInvocationID.x);
  rp[lid] = v;
  barrier();
  for (int s = 32; s > 0; s >>= 1) {
    if (lid < s) rp[lid] = max(rp[lid], rp[lid + s]);
    barrier();
  }
  float r = rp[0];
  barrier();
  return r;
}

float wg_sum(float v) {
  int lid = int(gl_LocalInvocationID.x);
  rp[lid] = v;
  barrier();
  for (int s = 32; s > 0; s >>= 1) {
    if (lid < s) rp[lid] += rp[lid + s];
    barrier();
  }
  float r = rp[0];
  barrier();
  return r;
}

void main() {
  const int SL = RLXVK_SLOT_IN0, SO = RLXVK_SLOT_OUT0;
  uint row = group_linear();
  if (row >= PU(RLXVK_COUNT)) return;
  int lid = int(gl_LocalInvocationID.x);
  VOCAB = PX(SM_VOCAB);
  BASE = int(row) * VOCAB;
  L_DT = v_dt(SL);
  L_OFF = v_off(SL);
  float T = PF(RLXVK_X + SM_TEMP);
  int token;
  if (!(T > 0.0)) {
    token = argmax_row();
  } else {
    TEMP = T;
    float mx = -INF_F;
    for (int j = lid; j < VOCAB; j += 64) {
      float x = logit(j);
      if (!isnan(x)) mx = max(mx, x / TEMP);
    }
    mx = wg_max(mx);
    if (!(mx > -INF_F) || isinf(mx)) {
      token = argmax_row();
    } else {
      MX = mx;
      int top_k = PX(SM_TOPK);
      int keep = (top_k > 0 && top_k < VOCAB) ? top_k : VOCAB;
      float mass = 0.0, p;
      if (keep == VOCAB) {
        float s = 0.0;
        for (int j = lid; j < VOCAB; j += 64) s += prob(j);
        mass = wg_sum(s);
      } else {
        float pv = INF_F;
        int pi = -1;
        for (int n = 0; n < keep; n++) { pi = next_after(pv, pi, p); pv = p; mass += p; }
      }
      float top_p = PF(RLXVK_X + SM_TOPP);
      float target = top_p * mass, cum = 0.0;
      int n = 0;
      if (keep == VOCAB && top_p >= 1.0) {
        n = keep;
        cum = mass;
      } else {
        float pv = INF_F;
        int pi = -1;
        while (n < keep) {
          pi = next_after(pv, pi, p);
          pv = p;
          cum += p;
          n++;
          if (cum >= target) break;
        }
      }
      uint64_t seed = uint64_t(run[RLXVK_RUN_SEED_LO]) | (uint64_t(run[RLXVK_RUN_SEED_HI]) << 32);
      uint64_t x = splitmix64(seed ^ splitmix64(uint64_t(row)));
      float u = float(x >> 11) * (1.0 / 9007199254740992.0) * cum;
      float pv = INF_F, run_ = 0.0;
      int pi = -1;
      token = -1;
      for (int q = 0; q < n; q++) {
        pi = next_after(pv, pi, p);
        pv = p;
        run_ += p;
        if (u < run_) { token = pi; break; }
      }
      if (token < 0) token = pi;
    }
  }
  if (lid == 0) st_i(v_dt(SO), v_off(SO), int(row), int64_t(token));
}
