/* Training kernels: cross-entropy (per-row partials, their mean, the
 * backward), gather backward and the fused optimizer updates. Semantics
 * follow src/backends/cpu/ref_train.c; every sum runs in a fixed order (no
 * float atomics), so repeated runs give the same bits. Bad targets and
 * indices record a run-time error the host reports naming the node. */
#include "common.cuh"

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

/* log(sum(exp(x))) of row r (block-wide), and the row's sum in *total. */
RLXK_DEV float xent_lse(const char* arena, const rlxk_xent& p, int64_t r, float* red,
                        float* total) {
  const char* x = at(arena, p.xoff);
  float mx = -INFINITY, s = 0.0f, sum = 0.0f;
  for (int64_t j = threadIdx.x; j < p.vocab; j += blockDim.x)
    mx = nanmax_f(mx, ld_f32(x, p.xdt, r * p.vocab + j));
  mx = block_max_nan(mx, red);
  for (int64_t j = threadIdx.x; j < p.vocab; j += blockDim.x) {
    float v = ld_f32(x, p.xdt, r * p.vocab + j);
    s += expf(v - mx);
    sum += v;
  }
  *total = block_sum(sum, red);
  return mx + logf(block_sum(s, red));
}

/* One block per row: out[r] = (loss, 1), or (0, 0) for an ignored row. */
extern "C" __global__ void rlx_xent_rows(char* arena, rlxk_xent p, rlxk_state* st) {
  __shared__ float red[32];
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
    float total;
    float lse = xent_lse(arena, p, r, red, &total);
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

/* One block per row: d_loss / count * (softmax - smoothed one-hot); each
 * block counts the counted rows itself (no cross-block state). */
extern "C" __global__ void rlx_xent_backward(char* arena, rlxk_xent p, rlxk_state* st) {
  __shared__ float red[32];
  char* o = atw(arena, p.ooff);
  const char* x = at(arena, p.xoff);
  float count = 0.0f;
  for (int64_t q = threadIdx.x; q < p.rows; q += blockDim.x)
    count += ld_i64(at(arena, p.toff), p.tdt, q) != p.ignore_index ? 1.0f : 0.0f;
  count = block_sum(count, red);
  float scale = ld_f32(at(arena, p.doff), p.ddt, 0) / count;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    int64_t t = xent_target(arena, p, r, st);
    if (t < 0) {
      for (int64_t j = threadIdx.x; j < p.vocab; j += blockDim.x) st_f32(o, p.odt, r * p.vocab + j, 0.0f);
      continue;
    }
    float total;
    float lse = xent_lse(arena, p, r, red, &total);
    __syncthreads(); /* every logit of the row is read before a gradient is written */
    for (int64_t j = threadIdx.x; j < p.vocab; j += blockDim.x) {
      float soft = expf(ld_f32(x, p.xdt, r * p.vocab + j) - lse);
      float onehot = p.ls / (float)p.vocab + (j == t ? 1.0f - p.ls : 0.0f);
      st_f32(o, p.odt, r * p.vocab + j, scale * (soft - onehot));
    }
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

/* PyTorch's Adam / AdamW; the bias corrections come in from the caller. */
RLXK_DEV void adam_element(char* arena, const rlxk_opt& p, const float* h, float bc1, float bc2,
                           int64_t e) {
  float w = ld_in(arena, p, 0, e), m = ld_in(arena, p, 2, e), v = ld_in(arena, p, 3, e);
  if (h[H_APPLY] != 0.0f) {
    float g = ld_in(arena, p, 1, e) * h[H_GRAD_SCALE], lr = h[H_LR];
    if (p.decoupled) w *= 1.0f - lr * p.weight_decay;
    else g += p.weight_decay * w;
    m = p.beta1 * m + (1.0f - p.beta1) * g;
    v = p.beta2 * v + (1.0f - p.beta2) * g * g;
    w -= lr * (m / bc1) / (sqrtf(v / bc2) + p.eps);
  }
  st_out(arena, p, 0, e, w);
  st_out(arena, p, 1, e, m);
  st_out(arena, p, 2, e, v);
}

/* One element per thread (grid-stride); hyper read from the arena. */
extern "C" __global__ void rlx_opt_update(char* arena, rlxk_opt p, rlxk_state* st) {
  int hs = p.op == OPT_SGD ? 3 : 4;
  float h[4];
  for (int k = 0; k < 4; k++) h[k] = ld_f32(at(arena, p.off[hs]), p.dt[hs], k);
  /* in double: 1 - beta^t loses digits in f32 when beta^t is near 1 */
  float bc1 = (float)(1.0 - pow((double)p.beta1, (double)h[H_STEP]));
  float bc2 = (float)(1.0 - pow((double)p.beta2, (double)h[H_STEP]));
  for (int64_t e = grid_index(); e < p.n; e += grid_stride()) {
    if (p.op == OPT_SGD) sgd_element(arena, p, h, e);
    else adam_element(arena, p, h, bc1, bc2, e);
  }
}
