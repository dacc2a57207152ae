/* Decode-shaped kernels: a few query rows against a long KV cache, and the
 * in-place cache update that precedes it.
 *
 * rlx_attn_dec_*: flash-decoding. One block per (batch, head, query row,
 * key slice); 8 groups of 16 lanes walk the slice's keys, 4 keys per group
 * at a time with every K and V row load issued before any math, so the
 * cache is streamed with many loads in flight (one query row has too
 * little math to hide latency any other way). Lane l of a group holds dims
 * [64c + 4l, 64c + 4l + 4) of each 64-wide chunk c < NC, so a group reads a
 * row with 16-byte coalesced loads. Keys a causal / sliding mask hides are
 * never visited, and a custom mask is read before the key's rows are
 * loaded, so a cache padded to its bound costs only its visible keys. The
 * block's 8 groups merge through shared memory; with several slices the
 * partials (m, l, acc) go to rlx_attn_combine (attention.cu).
 *
 * rlx_where_rows: Where(cond, x, y) whose output is planned in y's own
 * bytes (a device-state KV cache): elements where cond is false already
 * hold y, so only selected rows are written. One block per cond element. */
#include "attention_common.cuh"

#define DEC_GROUPS 8
#define DEC_UNROLL 4

/* Loads dims [64c + 4*lane, +4) of each chunk of one row (zeros past dims). */
template <int NC, bool VEC>
RLXK_DEV void dec_load_row(float (*dst)[4], const char* base, int dt, int64_t row_off, int64_t dims,
                           int lane) {
#pragma unroll
  for (int c = 0; c < NC; c++) {
    int64_t d0 = 64 * c + 4 * lane;
    if (VEC) {
      float4 v = d0 < dims ? __ldg((const float4*)((const float*)base + row_off + d0))
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      dst[c][0] = v.x;
      dst[c][1] = v.y;
      dst[c][2] = v.z;
      dst[c][3] = v.w;
    } else {
#pragma unroll
      for (int e = 0; e < 4; e++) dst[c][e] = d0 + e < dims ? ld_f32(base, dt, row_off + d0 + e) : 0.0f;
    }
  }
}

RLXK_DEV float group16_sum(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* Whether key j can be skipped before loading it (custom mask says drop). */
RLXK_DEV bool dec_key_dropped(const rlxk_attn& p, const char* mask, int64_t b, int64_t h, int64_t i,
                              int64_t j) {
  if (p.mask != RLX_MASK_CUSTOM) return false;
  return !(ld_f32(mask, p.mdt, b * p.m_sb + h * p.m_sh + i * p.m_sq + j * p.m_sk) > 0.5f);
}

template <int NC, bool VEC>
__device__ void attn_decode(char* arena, const rlxk_attn& p) {
  __shared__ float sm_m[DEC_GROUPS], sm_l[DEC_GROUPS];
  __shared__ float sm_acc[DEC_GROUPS][NC * 64];
  const int lane = threadIdx.x & 15, grp = threadIdx.x >> 4;
  int64_t blk = blockIdx.x;
  const int64_t split = blk % p.k_split;
  blk /= p.k_split;
  const int64_t qi = blk % p.Sq, bh = blk / p.Sq;
  const int64_t h = bh % p.H, b = bh / p.H, kvh = h / (p.H / p.Hkv);
  const char* q = at(arena, p.qoff);
  const char* k = at(arena, p.koff);
  const char* v = at(arena, p.voff);
  const char* mask = at(arena, p.moff);

  int64_t k_begin, k_end;
  attn_key_range(p, qi, 1, &k_begin, &k_end);
  int64_t n_keys = k_end > k_begin ? k_end - k_begin : 0;
  int64_t per = (n_keys + p.k_split - 1) / p.k_split;
  int64_t lo = k_begin + split * per, hi = lo + per < k_end ? lo + per : k_end;

  float qv[NC][4], acc[NC][4];
  dec_load_row<NC, VEC>(qv, q, p.qdt, b * p.q_sb + qi * p.q_ss + h * p.q_sh, p.D, lane);
#pragma unroll
  for (int c = 0; c < NC; c++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[c][e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int64_t kbase = b * p.k_sb + kvh * p.k_sh, vbase = b * p.v_sb + kvh * p.v_sh;

  /* The trip count is the same for every group, so the two groups of a
   * warp always meet at the shuffles. */
  for (int64_t j0 = lo; j0 < hi; j0 += DEC_GROUPS * DEC_UNROLL) {
    float kr[DEC_UNROLL][NC][4], vr[DEC_UNROLL][NC][4];
    bool live[DEC_UNROLL];
#pragma unroll
    for (int u = 0; u < DEC_UNROLL; u++) {
      int64_t j = j0 + (int64_t)u * DEC_GROUPS + grp;
      live[u] = j < hi && !dec_key_dropped(p, mask, b, h, qi, j);
      if (live[u]) {
        dec_load_row<NC, VEC>(kr[u], k, p.kdt, kbase + j * p.k_ss, p.D, lane);
        dec_load_row<NC, VEC>(vr[u], v, p.vdt, vbase + j * p.v_ss, p.Dv, lane);
      }
    }
    float s[DEC_UNROLL], tmax = -INFINITY;
#pragma unroll
    for (int u = 0; u < DEC_UNROLL; u++) {
      float dot = 0.0f;
      if (live[u])
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
          for (int e = 0; e < 4; e++) dot = fmaf(qv[c][e], kr[u][c][e], dot);
      dot = group16_sum(dot); /* every lane takes part: the shuffle needs them */
      int64_t j = j0 + (int64_t)u * DEC_GROUPS + grp;
      s[u] = live[u] ? masked_score(p, mask, dot, b, h, qi, j) : -INFINITY;
      tmax = fmaxf(tmax, s[u]);
    }
    if (tmax == -INFINITY) continue;
    float m_new = fmaxf(m, tmax);
    float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    l *= alpha;
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[c][e] *= alpha;
#pragma unroll
    for (int u = 0; u < DEC_UNROLL; u++) {
      if (s[u] == -INFINITY) continue;
      float w = expf(s[u] - m_new);
      l += w;
#pragma unroll
      for (int c = 0; c < NC; c++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[c][e] = fmaf(w, vr[u][c][e], acc[c][e]);
    }
    m = m_new;
  }

  /* Merge the groups: rescale each to the block's max. */
  if (lane == 0) {
    sm_m[grp] = m;
    sm_l[grp] = l;
  }
#pragma unroll
  for (int c = 0; c < NC; c++)
#pragma unroll
    for (int e = 0; e < 4; e++) sm_acc[grp][64 * c + 4 * lane + e] = acc[c][e];
  __syncthreads();
  float bm = -INFINITY;
  for (int g = 0; g < DEC_GROUPS; g++) bm = fmaxf(bm, sm_m[g]);
  float bl = 0.0f, wg[DEC_GROUPS];
  for (int g = 0; g < DEC_GROUPS; g++) {
    wg[g] = sm_m[g] == -INFINITY ? 0.0f : expf(sm_m[g] - bm);
    bl += wg[g] * sm_l[g];
  }
  char* o = atw(arena, p.ooff);
  float* part = (float*)(uintptr_t)p.partial;
  float* row = part + (((b * p.H + h) * p.Sq + qi) * p.k_split + split) * (p.Dv + 2);
  if (p.k_split > 1 && threadIdx.x == 0) {
    row[0] = bm;
    row[1] = bl;
  }
  float inv = bl > 0.0f ? 1.0f / bl : 0.0f;
  int64_t ob = b * p.o_sb + qi * p.o_ss + h * p.o_sh;
  for (int d = threadIdx.x; d < p.Dv; d += blockDim.x) {
    float a = 0.0f;
    for (int g = 0; g < DEC_GROUPS; g++) a = fmaf(wg[g], sm_acc[g][d], a);
    if (p.k_split > 1) row[2 + d] = a;
    else st_f32(o, p.odt, ob + d, a * inv);
  }
}

#define DECODE(name, nc, vec) \
  extern "C" __global__ void __launch_bounds__(128) name(char* a, rlxk_attn p, rlxk_state* s) { attn_decode<nc, vec>(a, p); }
DECODE(rlx_attn_dec_1v, 1, true)
DECODE(rlx_attn_dec_2v, 2, true)
DECODE(rlx_attn_dec_4v, 4, true)
DECODE(rlx_attn_dec_1g, 1, false)
DECODE(rlx_attn_dec_2g, 2, false)
DECODE(rlx_attn_dec_4g, 4, false)

/* ---------------------------------------------------------------- in-place Where */

/* p.aux leading dims are where cond varies (the outer index, one block per
 * element, grid-strided); the rest (cond broadcast) are the row the block
 * writes when cond holds. Out aliases in2 with the same strides, so
 * unselected rows stay. A whole block per row: one warp copying a row with
 * 64-bit index math was latency bound (20 us for a 768-float row on the
 * H100); a row that is one strided dim needs no division at all. */
extern "C" __global__ void rlx_where_rows(char* arena, rlxk_ew p, rlxk_state* st) {
  const int split = p.aux;
  int64_t n_outer = 1;
  for (int d = 0; d < split; d++) n_outer *= p.shape[d];
  const int64_t inner = n_outer > 0 ? p.n / n_outer : 0;
  char* o = atw(arena, p.ooff);
  const char* cond = at(arena, p.ioff[0]);
  const char* x = at(arena, p.ioff[1]);
  const bool one_dim = p.rank == split + 1;
  for (int64_t w = blockIdx.x; w < n_outer; w += gridDim.x) {
    int64_t rem = w, oi = 0, ci = 0, xi = 0;
    for (int d = split - 1; d >= 0; d--) {
      int64_t idx = rem % p.shape[d];
      rem /= p.shape[d];
      oi += idx * p.ostride[d];
      ci += idx * p.istride[0][d];
      xi += idx * p.istride[1][d];
    }
    if (ld_i64(cond, p.idt[0], ci) == 0) continue;
    if (one_dim) {
      const int64_t os = p.ostride[split], xs = p.istride[1][split];
      for (int64_t r = threadIdx.x; r < inner; r += blockDim.x) copy_elem(o, p.odt, oi + r * os, x, p.idt[1], xi + r * xs);
      continue;
    }
    for (int64_t r = threadIdx.x; r < inner; r += blockDim.x) {
      int64_t rr = r, ro = oi, rx = xi;
      for (int d = p.rank - 1; d >= split; d--) {
        int64_t idx = rr % p.shape[d];
        rr /= p.shape[d];
        ro += idx * p.ostride[d];
        rx += idx * p.istride[1][d];
      }
      copy_elem(o, p.odt, ro, x, p.idt[1], rx);
    }
  }
}
