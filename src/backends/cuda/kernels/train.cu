/* Training kernels: cross-entropy (per-row partials, their mean, the
 * backward), gather backward and the fused optimizer updates. Semantics
 * follow src/backends/cpu/ref_train.c; every sum runs in a fixed order (no
 * float atomics), so repeated runs give the same bits. Bad targets and
 * indices record a run-time error the host reports naming the node. */
#include "common.cuh"
#include "vec16.cuh"

enum { XENT_ROWS = 0, XENT_MEAN = 1, XENT_BACKWARD = 2 }; /* RLX_XENT_* */
enum { OPT_SGD = 0, OPT_ADAM = 1 };                       /* RLX_OPT_* */
enum { H_LR = 0, H_GRAD_SCALE = 1, H_STEP = 2, H_APPLY = 3 }; /* RLX_HYPER_* */

/* ---------------------------------------------------------------- cross-entropy */

/* The row's target, -1 when ignored; an out-of-range one is reported. */
RLXK_DEV int64_t xent_target(const char* arena, const rlxk_xent& p, int64_t r, rlxk_state* st) {
  int64_t t = ld_i64(at(arena, p.toff), p.tdt, r);
  if (t == p.ignore_index) return -1;
  if (t < 0 || t >= p.vocab) {
    if (threadIdx.x == 0) report_error(st, p.step, RLXK_ERR_XENT, t, p.vocab);
    return -1;
  }
  return t;
}

/* log-sum-exp in one pass: m the largest value so far, s the sum of
 * exp(v - m), rescaled when m grows. A NaN makes s NaN (and so the loss),
 * as the reference's max-then-sum does. */
RLXK_DEV void lse_add(float& m, float& s, float v) {
  if (v > m) {
    s = s * expf(m - v) + 1.0f;
    m = v;
  } else {
    s += expf(v - m);
  }
}

RLXK_DEV void lse_merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return; /* nothing seen there (s2 is 0) */
  if (m2 > m) {
    s = s * expf(m - m2) + s2;
    m = m2;
  } else {
    s += s2 * expf(m2 - m);
  }
}

/* Block-wide (m, s) merge in a fixed order; every thread gets the result. */
RLXK_DEV void block_lse(float& m, float& s, float* sm, float* ss) {
  for (int o = 16; o > 0; o >>= 1)
    lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) sm[warp] = m, ss[warp] = s;
  __syncthreads();
  m = sm[0], s = ss[0];
  for (int w = 1; w < nw; w++) lse_merge(m, s, sm[w], ss[w]);
}

/* The row's elements before its first 16-byte boundary (rows of an odd
 * vocabulary start anywhere), at most the row. */
RLXK_DEV int64_t xent_head(const char* row, int elem_bytes, int64_t vocab) {
  int64_t head = (int64_t)(((16u - ((uintptr_t)row & 15u)) & 15u) / (unsigned)elem_bytes);
  return head > vocab ? vocab : head;
}

/* f(j, v) for every element v of a row of W-element 16-byte vectors (W 4:
 * f32, 8: f16 / bf16) between an unaligned head and tail. */
template <int W, typename F>
RLXK_DEV void xent_read_vec(const char* row, int dt, int64_t vocab, F f) {
  const int es = W == 4 ? 4 : 2;
  const int64_t head = xent_head(row, es, vocab), nv = (vocab - head) / W;
  if ((int64_t)threadIdx.x < head) f(threadIdx.x, ld_f32(row, dt, threadIdx.x));
  const char* body = row + head * es;
#pragma unroll 2
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float v[W];
    ldv<W>(body, i, dt, v);
    const int64_t j = head + W * i;
#pragma unroll
    for (int k = 0; k < W; k++) f(j + k, v[k]);
  }
  for (int64_t j = head + W * nv + threadIdx.x; j < vocab; j += blockDim.x) f(j, ld_f32(row, dt, j));
}

/* f(j, v) for every logit v of row r, j its column: 16-byte vectors for
 * f32 / f16 / bf16 rows (a bf16 row read 2 bytes per thread ran at a
 * third of the bandwidth), element by element for other dtypes. */
template <typename F>
RLXK_DEV void xent_read_row(const char* arena, const rlxk_xent& p, int64_t r, F f) {
  const char* x = at(arena, p.xoff);
  if (p.xdt == RLX_F32) return xent_read_vec<4>(x + r * p.vocab * 4, p.xdt, p.vocab, f);
  if (p.xdt == RLX_F16 || p.xdt == RLX_BF16)
    return xent_read_vec<8>(x + r * p.vocab * 2, p.xdt, p.vocab, f);
  for (int64_t j = threadIdx.x; j < p.vocab; j += blockDim.x) f(j, ld_f32(x, p.xdt, r * p.vocab + j));
}

/* out[j] = g(j, row[j]) over rows of one dtype and the same alignment, in
 * W-element 16-byte vectors between the head and tail. */
template <int W, typename G>
RLXK_DEV void xent_write_vec(const char* row, char* orow, int dt, int64_t vocab, G g) {
  const int es = W == 4 ? 4 : 2;
  const int64_t head = xent_head(row, es, vocab), nv = (vocab - head) / W;
  if ((int64_t)threadIdx.x < head) st_f32(orow, dt, threadIdx.x, g(threadIdx.x, ld_f32(row, dt, threadIdx.x)));
  const char* body = row + head * es;
  char* obody = orow + head * es;
#pragma unroll 2
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float v[W];
    ldv<W>(body, i, dt, v);
    const int64_t j = head + W * i;
#pragma unroll
    for (int k = 0; k < W; k++) v[k] = g(j + k, v[k]);
    stv<W>(obody, i, dt, v);
  }
  for (int64_t j = head + W * nv + threadIdx.x; j < vocab; j += blockDim.x)
    st_f32(orow, dt, j, g(j, ld_f32(row, dt, j)));
}

/* out[r, j] = g(j, x[r, j]) for the row; 16-byte vectors both ways when x
 * and out are f32 / f16 / bf16 rows of one dtype and the same alignment,
 * else element by element. */
template <typename G>
RLXK_DEV void xent_write_row(char* arena, const rlxk_xent& p, int64_t r, G g) {
  const int es = p.xdt == RLX_F32 ? 4 : 2;
  const char* row = at(arena, p.xoff) + r * p.vocab * es;
  char* orow = atw(arena, p.ooff) + r * p.vocab * es;
  bool half = p.xdt == RLX_F16 || p.xdt == RLX_BF16;
  if (p.xdt == p.odt && (p.xdt == RLX_F32 || half) && (((uintptr_t)row ^ (uintptr_t)orow) & 15u) == 0) {
    if (half) xent_write_vec<8>(row, orow, p.xdt, p.vocab, g);
    else xent_write_vec<4>(row, orow, p.xdt, p.vocab, g);
    return;
  }
  const char* x = at(arena, p.xoff);
  char* o = atw(arena, p.ooff);
  for (int64_t j = threadIdx.x; j < p.vocab; j += blockDim.x)
    st_f32(o, p.odt, r * p.vocab + j, g(j, ld_f32(x, p.xdt, r * p.vocab + j)));
}

/* log(sum(exp(x))) of row r (block-wide, one read of the row), and the
 * row's sum in *total when label smoothing needs it. */
RLXK_DEV float xent_lse(const char* arena, const rlxk_xent& p, int64_t r, float* red, float* red2,
                        float* total) {
  float m = -INFINITY, s = 0.0f, sum = 0.0f;
  bool want_sum = total != NULL && p.ls != 0.0f;
  xent_read_row(arena, p, r, [&](int64_t, float v) {
    lse_add(m, s, v);
    if (want_sum) sum += v;
  });
  block_lse(m, s, red, red2);
  if (want_sum) *total = block_sum(sum, red);
  return m + logf(s);
}

/* One block per row: out[r] = (loss, 1), or (0, 0) for an ignored row. */
/* Launch bounds: the blocks the host launches (512 rows, 1024 backward),
 * so the vector paths' registers fit them. */
extern "C" __global__ void __launch_bounds__(512) rlx_xent_rows(char* arena, rlxk_xent p, rlxk_state* st) {
  __shared__ float red[32], red2[32];
  char* o = atw(arena, p.ooff);
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    int64_t t = xent_target(arena, p, r, st);
    if (t < 0) {
      if (threadIdx.x == 0) {
        st_f32(o, p.odt, 2 * r, 0.0f);
        st_f32(o, p.odt, 2 * r + 1, 0.0f);
      }
      continue;
    }
    float total = 0.0f;
    float lse = xent_lse(arena, p, r, red, red2, &total);
    if (threadIdx.x != 0) continue;
    float loss = (1.0f - p.ls) * (lse - ld_f32(at(arena, p.xoff), p.xdt, r * p.vocab + t));
    if (p.ls != 0.0f) loss += p.ls * (lse - total / (float)p.vocab);
    st_f32(o, p.odt, 2 * r, loss);
    st_f32(o, p.odt, 2 * r + 1, 1.0f);
  }
}

/* One block: the partials' sums in a fixed order, then loss / count. */
extern "C" __global__ void rlx_xent_mean(char* arena, rlxk_xent p, rlxk_state* st) {
  __shared__ float red[32];
  const char* part = at(arena, p.xoff);
  float loss = 0.0f, count = 0.0f;
  for (int64_t r = threadIdx.x; r < p.rows; r += blockDim.x) {
    loss += ld_f32(part, p.xdt, 2 * r);
    count += ld_f32(part, p.xdt, 2 * r + 1);
  }
  loss = block_sum(loss, red);
  count = block_sum(count, red);
  if (threadIdx.x == 0) st_f32(atw(arena, p.ooff), p.odt, 0, count == 0.0f ? NAN : loss / count);
}

/* A block per row (grid-strided; the host launches few enough blocks that
 * a row's second read mostly hits L2): d_loss / count * (softmax -
 * smoothed one-hot). Each block counts the counted rows itself (no
 * cross-block state). */
extern "C" __global__ void __launch_bounds__(1024) rlx_xent_backward(char* arena, rlxk_xent p, rlxk_state* st) {
  __shared__ float red[32], red2[32];
  float count = 0.0f;
  for (int64_t q = threadIdx.x; q < p.rows; q += blockDim.x)
    count += ld_i64(at(arena, p.toff), p.tdt, q) != p.ignore_index ? 1.0f : 0.0f;
  count = block_sum(count, red);
  float scale = ld_f32(at(arena, p.doff), p.ddt, 0) / count, smooth = p.ls / (float)p.vocab;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    int64_t t = xent_target(arena, p, r, st);
    if (t < 0) {
      xent_write_row(arena, p, r, [](int64_t, float) { return 0.0f; });
      continue;
    }
    /* block_lse's barriers: every logit of the row is read before a
     * gradient is written (dx may be x's own bytes) */
    float lse = xent_lse(arena, p, r, red, red2, NULL);
    xent_write_row(arena, p, r, [&](int64_t j, float v) {
      float onehot = smooth + (j == t ? 1.0f - p.ls : 0.0f);
      return scale * (expf(v - lse) - onehot);
    });
  }
}

/* ---------------------------------------------------------------- gather backward */

/* One block per dx row (o, a): the threads own columns and add the dy rows
 * whose index is a, in position order. Indices come 256 at a time; the
 * positions of a tile that gather row a are first compacted in order
 * (warp ballots, then the warps' counts in order) into `hit_at`, so the
 * column sums touch only the dy rows that belong to this row: with an
 * embedding's 50k rows and 4k positions, scanning every position per
 * column cost 86 ms of a GPT-2 step. Same sums in the same order as that
 * scan, so still deterministic. blockDim.x is 256 (build_gather_backward). */
extern "C" __global__ void rlx_gather_bwd(char* arena, rlxk_gather p, rlxk_state* st) {
  __shared__ int32_t hit_at[256];
  __shared__ int32_t warp_hits[8];
  const char* dy = at(arena, p.doff);
  const char* idx = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t row = blockIdx.x; row < p.outer * p.axis_len; row += gridDim.x) {
    int64_t a = row % p.axis_len, oi = row / p.axis_len;
    for (int64_t j0 = 0; j0 < p.inner; j0 += blockDim.x) {
      int64_t j = j0 + threadIdx.x;
      float acc = 0.0f;
      for (int64_t q0 = 0; q0 < p.n_idx; q0 += 256) {
        bool hit = false;
        if (q0 + threadIdx.x < p.n_idx) {
          int64_t raw = ld_i64(idx, p.idt, q0 + threadIdx.x), v = raw < 0 ? raw + p.axis_len : raw;
          bool bad = v < 0 || v >= p.axis_len;
          if (bad && row == 0 && j0 == 0) report_error(st, p.step, RLXK_ERR_GATHER, raw, p.axis_len);
          hit = !bad && v == a;
        }
        unsigned ballot = __ballot_sync(0xffffffffu, hit);
        __syncthreads(); /* the previous tile's hit_at is consumed */
        if (lane == 0) warp_hits[warp] = __popc(ballot);
        __syncthreads();
        int before = 0, n_hits = 0;
        for (int w = 0; w < 8; w++) {
          before += w < warp ? warp_hits[w] : 0;
          n_hits += warp_hits[w];
        }
        if (hit) hit_at[before + __popc(ballot & ((1u << lane) - 1u))] = (int32_t)threadIdx.x;
        __syncthreads();
        if (j < p.inner)
          for (int k = 0; k < n_hits; k++)
            acc += ld_f32(dy, p.ddt, (oi * p.n_idx + q0 + hit_at[k]) * p.inner + j);
      }
      if (j < p.inner) st_f32(o, p.odt, (oi * p.axis_len + a) * p.inner + j, acc);
    }
  }
}

/* Gather backward for one index list (outer == 1, an embedding), n_idx <=
 * GATHER_BWD_MAX_HITS: block b owns output rows [b R, b R + R) and finds
 * their hits in one pass over the indices, as keys (row - first row) << 13
 * | position in shared memory; a bitonic sort orders them by row, then by
 * position; each warp then writes whole rows: the dy rows of the row's hits
 * summed in position order (the order rlx_gather_bwd sums in, so both give
 * the same bits), zeros where no index hit. One read of the indices per
 * block instead of per row; the output is written once. */
#define GATHER_BWD_MAX_HITS 8192
#define GATHER_BWD_POS_BITS 13

RLXK_DEV void bitonic_sort_shared(uint32_t* keys, int n) {
  int size = 1;
  while (size < n) size <<= 1;
  for (int i = n + threadIdx.x; i < size; i += blockDim.x) keys[i] = 0xffffffffu; /* pad last */
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < size; i += blockDim.x) {
        int partner = i ^ j;
        if (partner > i) {
          bool up = (i & k) == 0;
          uint32_t a = keys[i], b = keys[partner];
          if ((a > b) == up) {
            keys[i] = b;
            keys[partner] = a;
          }
        }
      }
      __syncthreads();
    }
}

/* First k in [0, n) with keys[k] >= want (keys sorted). */
RLXK_DEV int lower_bound_shared(const uint32_t* keys, int n, uint32_t want) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (keys[mid] < want) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

extern "C" __global__ void rlx_gather_bwd_sorted(char* arena, rlxk_gather p, rlxk_state* st) {
  __shared__ uint32_t keys[GATHER_BWD_MAX_HITS];
  __shared__ int n_hits;
  const char* dy = at(arena, p.doff);
  const char* idx = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  const int64_t rows_per_block = (p.axis_len + gridDim.x - 1) / gridDim.x;
  const int64_t r0 = blockIdx.x * rows_per_block;
  const int64_t r1 = min(r0 + rows_per_block, p.axis_len);
  if (threadIdx.x == 0) n_hits = 0;
  __syncthreads();
  for (int64_t q = threadIdx.x; q < p.n_idx; q += blockDim.x) {
    int64_t raw = ld_i64(idx, p.idt, q), v = raw < 0 ? raw + p.axis_len : raw;
    if (v < 0 || v >= p.axis_len) {
      if (blockIdx.x == 0) report_error(st, p.step, RLXK_ERR_GATHER, raw, p.axis_len);
      continue;
    }
    if (v >= r0 && v < r1)
      keys[atomicAdd(&n_hits, 1)] = (uint32_t)((v - r0) << GATHER_BWD_POS_BITS) | (uint32_t)q;
  }
  __syncthreads();
  const int n = n_hits;
  bitonic_sort_shared(keys, n);
  const uint32_t pos_mask = (1u << GATHER_BWD_POS_BITS) - 1u;
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int64_t r = r0 + (threadIdx.x >> 5); r < r1; r += warps) {
    uint32_t local = (uint32_t)(r - r0);
    int lo = lower_bound_shared(keys, n, local << GATHER_BWD_POS_BITS);
    int hi = lower_bound_shared(keys, n, (local + 1) << GATHER_BWD_POS_BITS);
    for (int64_t j = lane; j < p.inner; j += 32) {
      float acc = 0.0f;
      for (int k = lo; k < hi; k++) acc += ld_f32(dy, p.ddt, (int64_t)(keys[k] & pos_mask) * p.inner + j);
      st_f32(o, p.odt, r * p.inner + j, acc);
    }
  }
}

/* ---------------------------------------------------------------- optimizer updates */

RLXK_DEV float ld_in(const char* arena, const rlxk_opt& p, int slot, int64_t e) {
  return ld_f32(at(arena, p.off[slot]), p.dt[slot], e);
}

RLXK_DEV void st_out(char* arena, const rlxk_opt& p, int slot, int64_t e, float v) {
  st_f32(atw(arena, p.ooff[slot]), p.odt[slot], e, v);
}

/* PyTorch's SGD (buf = g at step 1); APPLY 0 writes the inputs back. */
RLXK_DEV void sgd_element(char* arena, const rlxk_opt& p, const float* h, int64_t e) {
  float w = ld_in(arena, p, 0, e), buf = p.has_buf ? ld_in(arena, p, 2, e) : 0.0f;
  if (h[H_APPLY] != 0.0f) {
    float g = ld_in(arena, p, 1, e) * h[H_GRAD_SCALE];
    if (p.weight_decay != 0.0f) g += p.weight_decay * w;
    if (p.momentum != 0.0f) {
      buf = h[H_STEP] <= 1.0f ? g : p.momentum * buf + (1.0f - p.dampening) * g;
      g = p.nesterov ? g + p.momentum * buf : buf;
    }
    w -= h[H_LR] * g;
  }
  st_out(arena, p, 0, e, w);
  if (p.has_buf) st_out(arena, p, 1, e, buf);
}

/* PyTorch's Adam / AdamW step of one element (w, m, v updated in place);
 * the bias corrections come in from the caller. The one definition both
 * the element and the vector paths use, so they give the same bits. */
RLXK_DEV void adam_math(const rlxk_opt& p, const float* h, float bc1, float bc2, float graw,
                        float& w, float& m, float& v) {
  float g = graw * h[H_GRAD_SCALE], lr = h[H_LR];
  if (p.decoupled) w *= 1.0f - lr * p.weight_decay;
  else g += p.weight_decay * w;
  m = p.beta1 * m + (1.0f - p.beta1) * g;
  v = p.beta2 * v + (1.0f - p.beta2) * g * g;
  w -= lr * (m / bc1) / (sqrtf(v / bc2) + p.eps);
}

RLXK_DEV void adam_element(char* arena, const rlxk_opt& p, const float* h, float bc1, float bc2,
                           int64_t e) {
  float w = ld_in(arena, p, 0, e), m = ld_in(arena, p, 2, e), v = ld_in(arena, p, 3, e);
  if (h[H_APPLY] != 0.0f) adam_math(p, h, bc1, bc2, ld_in(arena, p, 1, e), w, m, v);
  st_out(arena, p, 0, e, w);
  st_out(arena, p, 1, e, m);
  st_out(arena, p, 2, e, v);
}

/* Whether an Adam entry is f32 at 16-byte aligned offsets but for the
 * gradient, which may be f16 / bf16 at an 8-byte aligned one (mixed
 * precision): the float4 path of rlx_opt_multi. */
RLXK_DEV bool adam_f32x4(const rlxk_opt& p) {
  if (p.op != OPT_ADAM) return false;
  for (int k = 0; k < 4; k++) {
    bool half_grad = k == 1 && (p.dt[1] == RLX_F16 || p.dt[1] == RLX_BF16) && (p.off[1] & 7u) == 0;
    if (!half_grad && (p.dt[k] != RLX_F32 || (p.off[k] & 15u) != 0)) return false;
  }
  for (int k = 0; k < 3; k++)
    if (p.odt[k] != RLX_F32 || (p.ooff[k] & 15u) != 0) return false;
  return true;
}

/* Elements [4 * i, 4 * i + 4) of an adam_f32x4 entry. */
RLXK_DEV void adam_f32x4_step(char* arena, const rlxk_opt& p, const float* h, float bc1, float bc2,
                              int64_t i) {
  float4 w = ((const float4*)at(arena, p.off[0]))[i], m = ((const float4*)at(arena, p.off[2]))[i];
  float4 v = ((const float4*)at(arena, p.off[3]))[i];
  if (h[H_APPLY] != 0.0f) {
    float4 g;
    if (p.dt[1] == RLX_F32) {
      g = ((const float4*)at(arena, p.off[1]))[i];
    } else { /* four halves; converting them is exact, as ld_f32's */
      uint2 raw = ((const uint2*)at(arena, p.off[1]))[i];
      g = make_float4(h16_to_f32((uint16_t)(raw.x & 0xffffu), p.dt[1]), h16_to_f32((uint16_t)(raw.x >> 16), p.dt[1]),
                      h16_to_f32((uint16_t)(raw.y & 0xffffu), p.dt[1]), h16_to_f32((uint16_t)(raw.y >> 16), p.dt[1]));
    }
    adam_math(p, h, bc1, bc2, g.x, w.x, m.x, v.x);
    adam_math(p, h, bc1, bc2, g.y, w.y, m.y, v.y);
    adam_math(p, h, bc1, bc2, g.z, w.z, m.z, v.z);
    adam_math(p, h, bc1, bc2, g.w, w.w, m.w, v.w);
  }
  ((float4*)atw(arena, p.ooff[0]))[i] = w;
  ((float4*)atw(arena, p.ooff[1]))[i] = m;
  ((float4*)atw(arena, p.ooff[2]))[i] = v;
}

/* The hyper tensor's values and Adam's bias corrections for them. */
RLXK_DEV void opt_hypers(const char* arena, const rlxk_opt& p, float* h, float* bc1, float* bc2) {
  int hs = p.op == OPT_SGD ? 3 : 4;
  for (int k = 0; k < 4; k++) h[k] = ld_f32(at(arena, p.off[hs]), p.dt[hs], k);
  /* in double: 1 - beta^t loses digits in f32 when beta^t is near 1 */
  *bc1 = (float)(1.0 - pow((double)p.beta1, (double)h[H_STEP]));
  *bc2 = (float)(1.0 - pow((double)p.beta2, (double)h[H_STEP]));
}

RLXK_DEV void opt_element(char* arena, const rlxk_opt& p, const float* h, float bc1, float bc2,
                          int64_t e) {
  if (p.op == OPT_SGD) sgd_element(arena, p, h, e);
  else adam_element(arena, p, h, bc1, bc2, e);
}

/* One element per thread (grid-stride); hyper read from the arena. */
extern "C" __global__ void rlx_opt_update(char* arena, rlxk_opt p, rlxk_state* st) {
  float h[4], bc1, bc2;
  opt_hypers(arena, p, h, &bc1, &bc2);
  for (int64_t e = grid_index(); e < p.n; e += grid_stride()) opt_element(arena, p, h, bc1, bc2, e);
}

/* Many params' updates in one launch (multi-tensor apply): a block takes
 * one chunk of one entry's elements, found by binary search over the chunk
 * starts. Each element goes through opt_element as in rlx_opt_update, so
 * the results are the same bits; the launch saves the per-param launch gap
 * (GPT-2 has 148 params, most a few thousand elements). */
extern "C" __global__ void rlx_opt_multi(char* arena, rlxk_opt_multi m, rlxk_state* st) {
  const rlxk_opt* table = (const rlxk_opt*)m.table;
  const int64_t* start = (const int64_t*)(table + m.count);
  float h[4], bc1, bc2;
  opt_hypers(arena, table[0], h, &bc1, &bc2); /* the entries share the hyper tensor */
  for (int64_t c = blockIdx.x; c < m.total_chunks; c += gridDim.x) {
    int lo = 0, hi = m.count - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) >> 1;
      if (start[mid] <= c) lo = mid;
      else hi = mid - 1;
    }
    const rlxk_opt p = table[lo]; /* a copy: the arena stores cannot alias it */
    int64_t e0 = (c - start[lo]) * m.chunk, e1 = e0 + m.chunk < p.n ? e0 + m.chunk : p.n;
    if (adam_f32x4(p)) { /* chunk is a multiple of 4: e0 starts a float4 */
      int64_t v1 = e0 / 4 + (e1 - e0) / 4;
      for (int64_t i = e0 / 4 + threadIdx.x; i < v1; i += blockDim.x) adam_f32x4_step(arena, p, h, bc1, bc2, i);
      e0 = v1 * 4; /* the tail (n % 4 elements) element by element */
    }
    for (int64_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) opt_element(arena, p, h, bc1, bc2, e);
  }
}
