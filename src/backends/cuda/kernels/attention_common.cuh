/* The attention score rule shared by the SIMT and tensor-core flash kernels:
 * scale, logit softcap, then the mask (causal / sliding / custom / bias),
 * exactly as the CPU reference applies them. -inf marks a masked score. */
#pragma once

#include "common.cuh"

/* The score before masking: scale, then the logit softcap. */
RLXK_DEV float capped_score(const rlxk_attn& p, float dot) {
  float s = dot * p.scale;
  return p.softcap > 0.0f ? p.softcap * tanhf(s / p.softcap) : s;
}

/* d score / d dot of capped_score (backward): the scale, through the softcap. */
RLXK_DEV float score_slope(const rlxk_attn& p, float dot) {
  if (p.softcap <= 0.0f) return p.scale;
  float t = tanhf(dot * p.scale / p.softcap);
  return p.scale * (1.0f - t * t);
}

RLXK_DEV float masked_score(const rlxk_attn& p, const char* mask, float dot, int64_t b, int64_t h,
                            int64_t i, int64_t j) {
  if (i >= p.Sq || j >= p.Sk) return -INFINITY;
  float s = capped_score(p, dot);
  int64_t last = i + p.Sk - p.Sq;
  switch (p.mask) {
    case RLX_MASK_CAUSAL:
      if (j > last) return -INFINITY;
      break;
    case RLX_MASK_SLIDING:
      if (j > last || j <= last - p.window) return -INFINITY;
      break;
    case RLX_MASK_CUSTOM:
      if (!(ld_f32(mask, p.mdt, b * p.m_sb + h * p.m_sh + i * p.m_sq + j * p.m_sk) > 0.5f))
        return -INFINITY;
      break;
    case RLX_MASK_BIAS:
      s += ld_f32(mask, p.mdt, b * p.m_sb + h * p.m_sh + i * p.m_sq + j * p.m_sk);
      break;
    default: break;
  }
  return s;
}


/* Keys [*k_begin, *k_end) that some query row of [q0, q0 + rows_in_tile) can
 * see under a causal or sliding mask (all keys otherwise): fully masked key
 * tiles are never loaded. */
RLXK_DEV void attn_key_range(const rlxk_attn& p, int64_t q0, int64_t tile_rows, int64_t* k_begin,
                             int64_t* k_end) {
  *k_begin = 0;
  *k_end = p.Sk;
  if (p.mask != RLX_MASK_CAUSAL && p.mask != RLX_MASK_SLIDING) return;
  int64_t q_last = q0 + tile_rows - 1 < p.Sq ? q0 + tile_rows - 1 : p.Sq - 1;
  int64_t last_key = q_last + p.Sk - p.Sq;
  *k_end = last_key + 1 < p.Sk ? last_key + 1 : p.Sk;
  if (*k_end < 0) *k_end = 0;
  if (p.mask == RLX_MASK_SLIDING) {
    int64_t first = q0 + p.Sk - p.Sq - p.window + 1;
    *k_begin = first > 0 ? first : 0;
  }
}

/* Whether every (query, key) pair of the tile [q0, q0+nq) x [k0, k0+nk) is
 * visible with in-range keys, so per-element masking can be skipped. Query
 * rows past Sq are never stored, so they do not matter. */
RLXK_DEV bool attn_tile_open(const rlxk_attn& p, int64_t q0, int64_t nq, int64_t k0, int64_t nk) {
  if (k0 + nk > p.Sk) return false;
  if (p.mask == RLX_MASK_CUSTOM || p.mask == RLX_MASK_BIAS) return false;
  if (p.mask == RLX_MASK_CAUSAL || p.mask == RLX_MASK_SLIDING) {
    int64_t shift = p.Sk - p.Sq;
    if (k0 + nk - 1 > q0 + shift) return false; /* some key after the first row's last */
    if (p.mask == RLX_MASK_SLIDING && k0 <= q0 + nq - 1 + shift - p.window) return false;
  }
  return true;
}

/* Query rows [*lo, *hi) that see some key of [k0, k0 + nk) under a causal
 * or sliding mask (all rows otherwise): the backward's key-tile blocks skip
 * the rest. Row i sees key j iff i + shift - window < j <= i + shift,
 * shift = Sk - Sq. */
RLXK_DEV void attn_query_range(const rlxk_attn& p, int64_t k0, int64_t nk, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = p.Sq;
  if (p.mask != RLX_MASK_CAUSAL && p.mask != RLX_MASK_SLIDING) return;
  int64_t shift = p.Sk - p.Sq;
  *lo = k0 - shift > 0 ? k0 - shift : 0;
  if (p.mask == RLX_MASK_SLIDING) {
    int64_t end = k0 + nk - 1 - shift + p.window; /* past the last key's last row */
    if (end < *hi) *hi = end;
  }
  if (*hi < *lo) *hi = *lo;
}
