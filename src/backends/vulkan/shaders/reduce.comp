#version 450
// Reduce {sum, mean, max, min, prod}: one workgroup per output element; the
// input view is [keep dims..., reduced dims...]. Float sums carry an error
// term (TwoSum, per invocation and through the tree), so long sums with
// cancellation stay within 1e-5 of the f64 reference; integers are exact
// int64 with wrap-around.
#include "common.glsl"
layout(local_size_x = 64) in;

shared float sf[64];
shared float sc[64]; // compensation of sf (sum / mean)
shared int64_t si[64];
shared uint shas[64];

float comb_f(int op, float a, float b) {
  if (op == RLX_RED_SUM || op == RLX_RED_MEAN) return a + b;
  if (op == RLX_RED_PROD) return a * b;
  if (isnan(a) || isnan(b)) return NAN_F;
  return op == RLX_RED_MAX ? max(a, b) : min(a, b);
}

int64_t comb_i(int op, int64_t a, int64_t b) {
  if (op == RLX_RED_SUM || op == RLX_RED_MEAN) return a + b;
  if (op == RLX_RED_PROD) return a * b;
  return op == RLX_RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

// s + c += v, keeping the rounding error of the addition in c.
void two_sum_add(inout float s, inout float c, float v) {
  precise float t = s + v;
  precise float bv = t - s;
  precise float e = (s - (t - bv)) + (v - bv);
  s = t;
  c += e;
}

void main() {
  const int X = RLXVK_SLOT_IN0, O = RLXVK_SLOT_OUT0;
  uint oi = group_linear();
  if (oi >= PU(RLXVK_COUNT)) return;
  int op = P(RLXVK_OP), nk = PX(RD_NKEEP), nr = PX(RD_NRED), inner = PX(RD_INNER);
  uint lid = gl_LocalInvocationID.x;
  int base = 0;
  uint rem = oi;
  for (int d = nk - 1; d >= 0; d--) {
    uint n = uint(v_shape(X, d));
    base += int(rem % n) * v_stride(X, d);
    rem /= n;
  }
  uint xdt = v_dt(X), xo = v_off(X);
  bool ints = is_intlike(xdt);
  float af = (op == RLX_RED_PROD) ? 1.0 : 0.0, ac = 0.0;
  int64_t ai = (op == RLX_RED_PROD) ? 1L : 0L;
  bool has = false;
  for (int r = int(lid); r < inner; r += 64) {
    int e = base;
    uint q = uint(r);
    for (int d = nk + nr - 1; d >= nk; d--) {
      uint n = uint(v_shape(X, d));
      e += int(q % n) * v_stride(X, d);
      q /= n;
    }
    if (ints) {
      int64_t v = ld_i(xdt, xo, e);
      ai = has || op < RLX_RED_MAX || op == RLX_RED_PROD ? comb_i(op, ai, v) : v;
    } else {
      float v = ld_f(xdt, xo, e);
      if (op < RLX_RED_MAX) two_sum_add(af, ac, v);
      else af = has || op == RLX_RED_PROD ? comb_f(op, af, v) : v;
    }
    has = true;
  }
  sf[lid] = af;
  sc[lid] = ac;
  si[lid] = ai;
  shas[lid] = has ? 1u : 0u;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (lid < s && shas[lid + s] != 0u) {
      if (shas[lid] != 0u) {
        if (op < RLX_RED_MAX) {
          float a = sf[lid], c = sc[lid] + sc[lid + s];
          two_sum_add(a, c, sf[lid + s]);
          sf[lid] = a;
          sc[lid] = c;
        } else {
          sf[lid] = comb_f(op, sf[lid], sf[lid + s]);
        }
        si[lid] = comb_i(op, si[lid], si[lid + s]);
      } else {
        sf[lid] = sf[lid + s];
        sc[lid] = sc[lid + s];
        si[lid] = si[lid + s];
        shas[lid] = 1u;
      }
    }
    barrier();
  }
  if (lid != 0u) return;
  uint odt = v_dt(O), oo = v_off(O);
  bool any = shas[0] != 0u;
  if (op < RLX_RED_MAX) sf[0] = sf[0] + sc[0];
  if (op == RLX_RED_MEAN) {
    float sum = ints ? float(si[0]) : sf[0];
    st_f(odt, oo, int(oi), inner > 0 ? sum / float(inner) : NAN_F);
  } else if (op == RLX_RED_SUM || op == RLX_RED_PROD) {
    if (ints) st_i(odt, oo, int(oi), si[0]);
    else st_f(odt, oo, int(oi), sf[0]);
  } else if (!any) { /* empty: -inf / +inf, saturated for integers; bool false / true (as ref.c) */
    if (odt == RLXVK_BOOL) st_i(odt, oo, int(oi), op == RLX_RED_MIN ? 1L : 0L);
    else st_f(odt, oo, int(oi), op == RLX_RED_MAX ? -INF_F : INF_F);
  } else {
    if (ints) st_i(odt, oo, int(oi), si[0]);
    else st_f(odt, oo, int(oi), sf[0]);
  }
}
