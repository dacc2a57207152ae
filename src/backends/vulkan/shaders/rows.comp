#version 450
// Softmax / log-softmax (inner == 1) and LayerNorm / RmsNorm over contiguous
// rows, picked by vk_fast.c for long rows whose length is a multiple of 4
// and whose views are 4-element aligned (f32 / f16 / bf16). One 256-wide
// workgroup per row; every access moves 4 elements. Rows of up to
// 256 * CACHED * 4 = 4096 elements stay in registers and are read once; longer
// rows are read again per pass. Same formulas as softmax.comp / norm.comp
// (max, sum of exp; mean, sum of squared deviations about it); reductions
// through subgroup arithmetic with RLX_SUBGROUP, a shared-memory tree
// otherwise, both in a fixed order.
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
#ifdef RLX_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_vote : require
#endif
#include "vec4io.glsl"
layout(local_size_x = 256) in;

const uint WG = 256u;
// Quads per invocation kept in registers (rows up to 4096 elements); the
// loops over them are unrolled so the arrays stay in registers (a spilled
// array would put the row in local memory).
const int CACHED = 4;
shared float part[WG];

float fmax_nan(float a, float b) { return (isnan(a) || isnan(b)) ? NAN_F : max(a, b); }

// Workgroup sum (is_max false) or NaN-propagating max, seen by everyone.
float reduce_wg(float v, bool is_max) {
#ifdef RLX_SUBGROUP
  float s;
  if (is_max) {
    bool any_nan = subgroupAny(isnan(v));
    s = any_nan ? NAN_F : subgroupMax(isnan(v) ? -INF_F : v);
  } else {
    s = subgroupAdd(v);
  }
  if (subgroupElect()) part[gl_SubgroupID] = s;
  barrier();
  float r = is_max ? -INF_F : 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; i++) r = is_max ? fmax_nan(r, part[i]) : r + part[i];
  barrier();
  return r;
#else
  uint lid = gl_LocalInvocationID.x;
  part[lid] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (lid < s) part[lid] = is_max ? fmax_nan(part[lid], part[lid + s]) : part[lid] + part[lid + s];
    barrier();
  }
  float r = part[0];
  barrier();
  return r;
#endif
}

float max4(vec4 v) { return fmax_nan(fmax_nan(v.x, v.y), fmax_nan(v.z, v.w)); }
float sum4(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
vec4 exp4(vec4 v) { return vec4(exp(v.x), exp(v.y), exp(v.z), exp(v.w)); }

const int O_SLOT = RLXVK_SLOT_OUT0;

// ------------------------------------------------------------ softmax

vec4 softmax_out(vec4 x, float m, float sum, float log_sum, bool logsm) {
  return logsm ? (x - m) - log_sum : exp4(x - m) / sum;
}

void softmax_row(uint row) {
  const int X = RLXVK_SLOT_IN0;
  uint n = PU(RLXVK_X + RW_N), nq = n / 4u, lid = gl_LocalInvocationID.x;
  uint xdt = v_dt(X), odt = v_dt(O_SLOT), xo = v_off(X), oo = v_off(O_SLOT);
  uint base = row * n;
  bool logsm = P(RLXVK_OP) != 0;
  if (nq <= WG * uint(CACHED)) {
    vec4 v[CACHED];
    float m = -INF_F;
    [[unroll]] for (int k = 0; k < CACHED; k++) {
      uint q = lid + uint(k) * WG;
      v[k] = q < nq ? ld4(xdt, at4(xdt, xo, base + q * 4u)) : vec4(-INF_F);
      m = fmax_nan(m, max4(v[k]));
    }
    m = reduce_wg(m, true);
    float sum = 0.0;
    vec4 e[CACHED]; // exp(x - m), reused by softmax's output
    [[unroll]] for (int k = 0; k < CACHED; k++) {
      e[k] = vec4(0.0);
      if (lid + uint(k) * WG < nq) {
        e[k] = exp4(v[k] - m);
        sum += sum4(e[k]);
      }
    }
    sum = reduce_wg(sum, false);
    float log_sum = log(sum);
    [[unroll]] for (int k = 0; k < CACHED; k++) {
      uint q = lid + uint(k) * WG;
      vec4 y = logsm ? (v[k] - m) - log_sum : e[k] / sum;
      if (q < nq) st4(odt, at4(odt, oo, base + q * 4u), y);
    }
    return;
  }
  float m = -INF_F;
  for (uint q = lid; q < nq; q += WG) m = fmax_nan(m, max4(ld4(xdt, at4(xdt, xo, base + q * 4u))));
  m = reduce_wg(m, true);
  float sum = 0.0;
  for (uint q = lid; q < nq; q += WG) sum += sum4(exp4(ld4(xdt, at4(xdt, xo, base + q * 4u)) - m));
  sum = reduce_wg(sum, false);
  float log_sum = log(sum);
  for (uint q = lid; q < nq; q += WG) {
    vec4 x = ld4(xdt, at4(xdt, xo, base + q * 4u));
    st4(odt, at4(odt, oo, base + q * 4u), softmax_out(x, m, sum, log_sum, logsm));
  }
}

// ------------------------------------------------------------ norms

const int SX = RLXVK_SLOT_IN0, SR = RLXVK_SLOT_IN0 + 1, SB = RLXVK_SLOT_IN0 + 2,
          SG = RLXVK_SLOT_IN0 + 3, SBETA = RLXVK_SLOT_IN0 + 4;

vec4 round4(uint dt, vec4 x) {
  if (dt == RLXVK_F32) return x;
  vec4 r;
  for (int i = 0; i < 4; i++)
    r[i] = dt == RLXVK_F16 ? f16_to_f32(f32_to_f16(x[i])) : bf16_to_f32(f32_to_bf16(x[i]));
  return r;
}

vec4 ld_view4(int slot, uint e) {
  uint dt = v_dt(slot);
  return ld4(dt, at4(dt, v_off(slot), e));
}

// The value normalised at columns [c, c+4) of row r: x, or x + residual
// (+ bias) rounded to the output dtype (the reference normalises the very
// value it stores).
vec4 pre4(uint r, uint c, uint cols, bool res, bool bias) {
  vec4 x = ld_view4(SX, r * cols + c);
  if (!res) return x;
  x += ld_view4(SR, r * cols + c);
  if (bias) x += ld_view4(SB, c);
  return round4(v_dt(O_SLOT), x);
}

vec4 sq4(vec4 d) { return d * d; }

void norm_out(uint r, uint c, uint cols, vec4 v, float mean, float inv, bool sum_out) {
  if (sum_out) {
    uint dt = v_dt(RLXVK_SLOT_OUT1);
    st4(dt, at4(dt, v_off(RLXVK_SLOT_OUT1), r * cols + c), v);
  }
  vec4 y = (v - mean) * inv;
  if (PX(NM_HAS_GAMMA) != 0) y *= ld_view4(SG, c);
  if (PX(NM_HAS_BETA) != 0) y += ld_view4(SBETA, c);
  uint dt = v_dt(O_SLOT);
  st4(dt, at4(dt, v_off(O_SLOT), r * cols + c), y);
}

void norm_row(uint r) {
  uint cols = PU(RLXVK_X + NM_COLS), nq = cols / 4u, lid = gl_LocalInvocationID.x;
  bool rms = PX(NM_RMS) != 0, res = PX(NM_HAS_RES) != 0, bias = PX(NM_HAS_BIAS) != 0;
  bool sum_out = PX(NM_WRITES_SUM) != 0 && res;
  float eps = PF(RLXVK_X + NM_EPS);
  if (nq <= WG * uint(CACHED)) {
    vec4 v[CACHED];
    float s = 0.0;
    [[unroll]] for (int k = 0; k < CACHED; k++) {
      uint q = lid + uint(k) * WG;
      v[k] = q < nq ? pre4(r, q * 4u, cols, res, bias) : vec4(0.0);
      s += sum4(v[k]);
    }
    float mean = rms ? 0.0 : reduce_wg(s, false) / float(cols);
    float ss = 0.0;
    [[unroll]] for (int k = 0; k < CACHED; k++)
      if (lid + uint(k) * WG < nq) ss += sum4(sq4(v[k] - mean));
    float inv = 1.0 / sqrt(reduce_wg(ss, false) / float(cols) + eps);
    [[unroll]] for (int k = 0; k < CACHED; k++) {
      uint q = lid + uint(k) * WG;
      if (q < nq) norm_out(r, q * 4u, cols, v[k], mean, inv, sum_out);
    }
    return;
  }
  float mean = 0.0;
  if (!rms) {
    float s = 0.0;
    for (uint q = lid; q < nq; q += WG) s += sum4(pre4(r, q * 4u, cols, res, bias));
    mean = reduce_wg(s, false) / float(cols);
  }
  float ss = 0.0;
  for (uint q = lid; q < nq; q += WG) ss += sum4(sq4(pre4(r, q * 4u, cols, res, bias) - mean));
  float inv = 1.0 / sqrt(reduce_wg(ss, false) / float(cols) + eps);
  for (uint q = lid; q < nq; q += WG) norm_out(r, q * 4u, cols, pre4(r, q * 4u, cols, res, bias), mean, inv, sum_out);
}

void main() {
  uint row = group_linear();
  if (row >= PU(RLXVK_COUNT)) return;
  if (P(RLXVK_KIND) == RLXVK_K_NORM) norm_row(row);
  else softmax_row(row);
}
