/* Reductions and row ops: Reduce (any axes), ArgMax/ArgMin, Softmax /
 * LogSoftmax, Cumsum, TopK. Semantics follow ref.c exactly: NaN propagates
 * through max/min and softmax, the first NaN wins an arg-reduction, ties keep
 * the lower index, integer sums wrap in int64. Float sums accumulate in
 * double (cheap on this hardware, and it keeps long rows close to the
 * reference's double accumulation). */
#include "common.cuh"

/* ---------------------------------------------------------------- reduce */

struct red_acc {
  double f;
  int64_t i;
  int nan_seen, any;
};

RLXK_DEV void red_init(red_acc& a, int op) {
  a.f = op == RLX_RED_PROD ? 1.0 : 0.0;
  a.i = op == RLX_RED_PROD ? 1 : 0;
  a.nan_seen = 0;
  a.any = 0;
}

RLXK_DEV void red_add(red_acc& a, int op, bool ints, double f, int64_t i) {
  switch (op) {
    case RLX_RED_SUM: case RLX_RED_MEAN:
      a.f += f;
      a.i = (int64_t)((uint64_t)a.i + (uint64_t)i);
      break;
    case RLX_RED_PROD:
      a.f *= f;
      a.i = (int64_t)((uint64_t)a.i * (uint64_t)i);
      break;
    default: { /* max / min; NaN sticks */
      if (!ints && isnan(f)) { a.nan_seen = 1; a.any = 1; break; }
      bool better = ints ? (op == RLX_RED_MAX ? i > a.i : i < a.i)
                         : (op == RLX_RED_MAX ? f > a.f : f < a.f);
      if (!a.any || better) { a.f = f; a.i = i; }
      a.any = 1;
      break;
    }
  }
}

RLXK_DEV void red_merge(red_acc& a, const red_acc& b, int op, bool ints) {
  switch (op) {
    case RLX_RED_SUM: case RLX_RED_MEAN:
      a.f += b.f;
      a.i = (int64_t)((uint64_t)a.i + (uint64_t)b.i);
      break;
    case RLX_RED_PROD:
      a.f *= b.f;
      a.i = (int64_t)((uint64_t)a.i * (uint64_t)b.i);
      break;
    default:
      if (!b.any) break;
      if (b.nan_seen) a.nan_seen = 1;
      if (!a.any) { a.f = b.f; a.i = b.i; a.any = 1; break; }
      if (ints ? (op == RLX_RED_MAX ? b.i > a.i : b.i < a.i)
               : (op == RLX_RED_MAX ? b.f > a.f : b.f < a.f)) { a.f = b.f; a.i = b.i; }
      break;
  }
}

RLXK_DEV void red_store(char* o, int odt, int64_t oi, const red_acc& a, int op, bool ints,
                        int64_t inner) {
  switch (op) {
    case RLX_RED_SUM: case RLX_RED_PROD:
      if (ints) st_i64(o, odt, oi, a.i);
      else st_f64(o, odt, oi, a.f);
      break;
    case RLX_RED_MEAN: st_f64(o, odt, oi, inner ? a.f / (double)inner : nan("")); break;
    default:
      if (!ints && a.nan_seen) st_f64(o, odt, oi, nan(""));
      else if (ints && inner) st_i64(o, odt, oi, a.i);
      else if (inner) st_f64(o, odt, oi, a.f);
      /* empty: -inf / +inf, saturated for integers; bool false / true (as ref.c) */
      else if (odt == RLX_BOOL) st_i64(o, odt, oi, op == RLX_RED_MIN ? 1 : 0);
      else st_f64(o, odt, oi, op == RLX_RED_MAX ? -INFINITY : INFINITY);
      break;
  }
}

/* The host merges contiguous dims, so one kept / one reduced dim is the
 * common case: no 64-bit divisions for it. */
RLXK_DEV int64_t keep_offset(const rlxk_reduce& p, int64_t oi) {
  if (p.n_keep == 1) return oi * p.stride[0];
  int64_t base = 0, rem = oi;
  for (int d = p.n_keep - 1; d >= 0; d--) {
    base += (rem % p.shape[d]) * p.stride[d];
    rem /= p.shape[d];
  }
  return base;
}

RLXK_DEV int64_t red_offset(const rlxk_reduce& p, int64_t r) {
  if (p.n_red == 1) return r * p.stride[p.n_keep];
  int64_t e = 0, rem = r;
  for (int d = p.n_keep + p.n_red - 1; d >= p.n_keep; d--) {
    e += (rem % p.shape[d]) * p.stride[d];
    rem /= p.shape[d];
  }
  return e;
}

/* One block per output element (grid-strided); for long reductions. */
extern "C" __global__ void rlx_reduce_block(char* arena, rlxk_reduce p, rlxk_state* st) {
  __shared__ red_acc sh[256];
  const char* x = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  bool ints = is_intlike(p.idt);
  for (int64_t oi = blockIdx.x; oi < p.outer; oi += gridDim.x) {
    int64_t base = keep_offset(p, oi);
    red_acc a;
    red_init(a, p.op);
    for (int64_t r = threadIdx.x; r < p.inner; r += blockDim.x) {
      int64_t e = base + red_offset(p, r);
      red_add(a, p.op, ints, ints ? 0.0 : ld_f64(x, p.idt, e), ints ? ld_i64(x, p.idt, e) : 0);
    }
    sh[threadIdx.x] = a;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if ((int)threadIdx.x < s) red_merge(sh[threadIdx.x], sh[threadIdx.x + s], p.op, ints);
      __syncthreads();
    }
    if (threadIdx.x == 0) red_store(o, p.odt, oi, sh[0], p.op, ints, p.inner);
    __syncthreads();
  }
}

/* One thread per output element; for short reductions over many outputs. */
extern "C" __global__ void rlx_reduce_thread(char* arena, rlxk_reduce p, rlxk_state* st) {
  const char* x = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  bool ints = is_intlike(p.idt);
  for (int64_t oi = grid_index(); oi < p.outer; oi += grid_stride()) {
    int64_t base = keep_offset(p, oi);
    red_acc a;
    red_init(a, p.op);
    for (int64_t r = 0; r < p.inner; r++) {
      int64_t e = base + red_offset(p, r);
      red_add(a, p.op, ints, ints ? 0.0 : ld_f64(x, p.idt, e), ints ? ld_i64(x, p.idt, e) : 0);
    }
    red_store(o, p.odt, oi, a, p.op, ints, p.inner);
  }
}

/* ---------------------------------------------------------------- column sums */

/* VEC consecutive elements of a row as doubles: 16-byte loads where the
 * host found the rows aligned (VEC 4: f32, VEC 8: f16 / bf16), else one
 * element of any float dtype. */
template <int VEC>
RLXK_DEV void cols_load(const char* x, int t, int64_t e, double* v) {
  if constexpr (VEC == 4) {
    float4 f = *(const float4*)(x + e * 4);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else if constexpr (VEC == 8) {
    uint4 raw = *(const uint4*)(x + e * 2);
    const uint16_t* h = (const uint16_t*)&raw;
#pragma unroll
    for (int k = 0; k < VEC; k++)
      v[k] = t == RLX_BF16 ? (double)__bfloat162float(__ushort_as_bfloat16(h[k]))
                           : (double)__half2float(__ushort_as_half(h[k]));
  } else {
    v[0] = ld_f64(x, t, e);
  }
}

RLXK_DEV void cols_store(char* o, const rlxk_cols& p, int64_t c, double sum) {
  st_f64(o, p.odt, c, p.op == RLX_RED_MEAN ? sum / (double)p.rows : sum);
}

/* The partials of a tile's columns added in chunk order by the block of
 * the tile that counted last (see reduce_cols); the order does not depend
 * on which block that is, so the bits are those of any fixed finisher.
 * Eight loads go out before their adds (the adds keep their order): one
 * block finishes the tile, so its ~100 L2 reads per column would
 * otherwise wait one after another. */
RLXK_DEV void cols_finish(char* arena, const rlxk_cols& p, int64_t c_begin, int64_t c_end) {
  const double* part = (const double*)p.partial;
  char* o = atw(arena, p.ooff);
  for (int64_t c = c_begin + threadIdx.x; c < c_end; c += blockDim.x) {
    double s = 0.0;
    int64_t k = 0;
    for (; k + 8 <= p.chunks; k += 8) {
      double v[8];
#pragma unroll
      for (int u = 0; u < 8; u++) v[u] = __ldcg(&part[(k + u) * p.cols + c]);
#pragma unroll
      for (int u = 0; u < 8; u++) s += v[u];
    }
    for (; k < p.chunks; k++) s += __ldcg(&part[k * p.cols + c]);
    cols_store(o, p, c, s);
  }
}

/* Block: 8 warps over one tile of 32 * VEC columns and one chunk of rows
 * (blockIdx.y); warp w adds rows w, w + 8, ... of the chunk with coalesced
 * (vector) loads, then warp 0 adds the 8 warps' sums in warp order. With
 * several chunks each block leaves its double partials in scratch and
 * counts itself in its tile's counter (after the partials); the block
 * that counts last adds the tile's partials in chunk order and rearms the
 * counter, so no finishing launch (as reduce_mid). The order of every
 * addition is fixed by the launch shape, so runs repeat. */
template <int VEC>
__device__ void reduce_cols(char* arena, const rlxk_cols& p) {
  __shared__ double sh[8][32 * VEC];
  __shared__ int last;
  const char* x = at(arena, p.ioff);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t tile0 = (int64_t)blockIdx.x * 32 * VEC, c0 = tile0 + (int64_t)lane * VEC;
  const int64_t r0 = (int64_t)blockIdx.y * p.rows_per_chunk;
  int64_t r1 = r0 + p.rows_per_chunk;
  if (r1 > p.rows) r1 = p.rows;
  double acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; k++) acc[k] = 0.0;
  if (c0 < p.cols) {
#pragma unroll 4
    for (int64_t r = r0 + warp; r < r1; r += 8) {
      double v[VEC];
      cols_load<VEC>(x, p.idt, r * p.row_stride + c0, v);
#pragma unroll
      for (int k = 0; k < VEC; k++) acc[k] += v[k];
    }
  }
#pragma unroll
  for (int k = 0; k < VEC; k++) sh[warp][lane * VEC + k] = acc[k];
  __syncthreads();
  /* Warp 0's lanes write 32 * VEC columns, VEC per lane, as they were read. */
  char* o = atw(arena, p.ooff);
  double* part = (double*)p.partial;
  if (warp == 0 && c0 < p.cols) {
#pragma unroll
    for (int k = 0; k < VEC; k++) {
      double s = sh[0][lane * VEC + k];
      for (int w = 1; w < 8; w++) s += sh[w][lane * VEC + k];
      if (p.chunks == 1) cols_store(o, p, c0 + k, s);
      else part[blockIdx.y * p.cols + c0 + k] = s;
    }
  }
  if (p.chunks == 1) return;
  __threadfence(); /* each writer's partials are visible before its block counts */
  __syncthreads();
  unsigned* counter = (unsigned*)(part + p.chunks * p.cols) + blockIdx.x;
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == (unsigned)(p.chunks - 1);
    if (last) *counter = 0; /* every block of this tile has counted */
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  int64_t tile1 = tile0 + 32 * VEC < p.cols ? tile0 + 32 * VEC : p.cols;
  cols_finish(arena, p, tile0, tile1);
}

extern "C" __global__ void rlx_reduce_cols_v1(char* a, rlxk_cols p, rlxk_state* s) { reduce_cols<1>(a, p); }
extern "C" __global__ void rlx_reduce_cols_v4(char* a, rlxk_cols p, rlxk_state* s) { reduce_cols<4>(a, p); }
extern "C" __global__ void rlx_reduce_cols_v8(char* a, rlxk_cols p, rlxk_state* s) { reduce_cols<8>(a, p); }

/* ---------------------------------------------------------------- kept middle axis */

/* Four halves (8 bytes) as doubles; the 16-byte f32 / half loads and the
 * single element of any float dtype are the column kernel's cols_load. */
RLXK_DEV void mid_load_h4(const char* x, int t, int64_t e, double* v) {
  uint2 raw = *(const uint2*)(x + e * 2);
  const uint16_t* h = (const uint16_t*)&raw;
#pragma unroll
  for (int k = 0; k < 4; k++)
    v[k] = t == RLX_BF16 ? (double)__bfloat162float(__ushort_as_bfloat16(h[k]))
                         : (double)__half2float(__ushort_as_half(h[k]));
}

RLXK_DEV void mid_store(char* arena, const rlxk_mid& p, int64_t k, double sum) {
  double count = (double)p.outer * (double)p.inner;
  st_f64(atw(arena, p.ooff), p.odt, k, p.op == RLX_RED_MEAN ? sum / count : sum);
}

/* Sum / mean of [outer, keep, inner] over outer and inner (BatchNorm
 * statistics of NCHW over N, H, W). Block (k, chunk) adds keep index k's
 * vectors [chunk * per_chunk, ...) of its outer * inner / VEC, thread t
 * taking every blockDim.x-th one: consecutive threads read consecutive
 * vectors of a run, so loads coalesce even when a run is short. A thread
 * tracks its (run, position) pair by adding the block's fixed step instead
 * of dividing per vector. With several chunks each block leaves its double
 * partial in scratch and counts itself in k's counter (after the
 * partials); the block that counts last adds the partials in a fixed
 * order and rearms the counter, so no finishing launch. Every addition's
 * order is fixed by the launch shape, so runs repeat bit for bit. 8
 * blocks of 256 per SM: the host sizes the grid as one such wave. */
template <int VEC, bool H4>
__device__ void reduce_mid(char* arena, const rlxk_mid& p) {
  __shared__ double red[32];
  __shared__ int last;
  const int64_t k = blockIdx.x;
  const char* x = at(arena, p.ioff) + k * p.keep_stride * (p.idt == RLX_F32 ? 4 : 2);
  /* 32-bit vector counts (the host checks outer * inner fits); 64-bit
   * element offsets, the run's start advanced by steps, not products. */
  const int32_t runs = (int32_t)(p.inner / VEC), total = (int32_t)(p.outer * runs);
  const int32_t v0 = (int32_t)(blockIdx.y * p.per_chunk);
  const int32_t v1 = total - v0 > (int32_t)p.per_chunk ? v0 + (int32_t)p.per_chunk : total;
  const int32_t step_j = (int32_t)blockDim.x % runs;
  const int64_t step_row = (int64_t)((int32_t)blockDim.x / runs) * p.outer_stride;
  int32_t v = v0 + (int32_t)threadIdx.x, j = v % runs;
  int64_t row = (int64_t)(v / runs) * p.outer_stride;
  double acc = 0.0;
#pragma unroll 4
  for (; v < v1; v += blockDim.x) {
    double e[VEC];
    if constexpr (H4) mid_load_h4(x, p.idt, row + j * VEC, e);
    else cols_load<VEC>(x, p.idt, row + j * VEC, e);
#pragma unroll
    for (int u = 0; u < VEC; u++) acc += e[u];
    row += step_row;
    j += step_j;
    if (j >= runs) {
      j -= runs;
      row += p.outer_stride;
    }
  }
  acc = block_sum(acc, red);
  if (p.chunks == 1) {
    if (threadIdx.x == 0) mid_store(arena, p, k, acc);
    return;
  }
  double* part = (double*)p.partial;
  unsigned* counter = (unsigned*)(part + p.chunks * p.keep) + k;
  if (threadIdx.x == 0) {
    part[blockIdx.y * p.keep + k] = acc;
    __threadfence(); /* the partial is visible before the count says so */
    last = atomicAdd(counter, 1u) == (unsigned)(p.chunks - 1);
    if (last) *counter = 0; /* every block of this launch has counted */
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < p.chunks; c += blockDim.x) s += __ldcg(&part[c * p.keep + k]);
  s = block_sum(s, red);
  if (threadIdx.x == 0) mid_store(arena, p, k, s);
}

#define RLX_REDUCE_MID(name, vec, h4)                                              \
  extern "C" __global__ void __launch_bounds__(256, 8)                              \
      name(char* a, rlxk_mid p, rlxk_state* s) { reduce_mid<vec, h4>(a, p); }
RLX_REDUCE_MID(rlx_reduce_mid_v1, 1, false)
RLX_REDUCE_MID(rlx_reduce_mid_v4, 4, false)
RLX_REDUCE_MID(rlx_reduce_mid_v8, 8, false)
RLX_REDUCE_MID(rlx_reduce_mid_h4, 4, true)

/* ---------------------------------------------------------------- arg reduce */

struct arg_best {
  double f;
  int64_t i, idx;
  int nan_, valid;
};

/* Is a better than b? First NaN wins, then the larger (smaller) value, then
 * the lower index. */
RLXK_DEV bool arg_better(const arg_best& a, const arg_best& b, int op, bool ints) {
  if (!a.valid) return false;
  if (!b.valid) return true;
  if (!ints) {
    if (a.nan_ || b.nan_) return a.nan_ && (!b.nan_ || a.idx < b.idx);
    if (a.f != b.f) return op == 0 ? a.f > b.f : a.f < b.f;
  } else if (a.i != b.i) {
    return op == 0 ? a.i > b.i : a.i < b.i;
  }
  return a.idx < b.idx;
}

/* One warp per (outer, inner) position. */
extern "C" __global__ void rlx_arg_reduce(char* arena, rlxk_row p, rlxk_state* st) {
  const char* x = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  bool ints = is_intlike(p.idt);
  int lane = threadIdx.x & 31;
  int64_t warps = grid_stride() / 32, total = p.outer * p.inner;
  for (int64_t w = grid_index() / 32; w < total; w += warps) {
    int64_t oi = w / p.inner, j = w % p.inner;
    arg_best best;
    best.valid = 0;
    for (int64_t i = lane; i < p.n; i += 32) {
      int64_t e = (oi * p.n + i) * p.inner + j;
      arg_best c;
      c.valid = 1;
      c.idx = i;
      c.f = ints ? 0.0 : ld_f64(x, p.idt, e);
      c.i = ints ? ld_i64(x, p.idt, e) : 0;
      c.nan_ = !ints && isnan(c.f);
      if (arg_better(c, best, p.op, ints)) best = c;
    }
    for (int s = 16; s > 0; s >>= 1) {
      arg_best c;
      c.f = __shfl_xor_sync(0xffffffffu, best.f, s);
      c.i = __shfl_xor_sync(0xffffffffu, best.i, s);
      c.idx = __shfl_xor_sync(0xffffffffu, best.idx, s);
      c.nan_ = __shfl_xor_sync(0xffffffffu, best.nan_, s);
      c.valid = __shfl_xor_sync(0xffffffffu, best.valid, s);
      if (arg_better(c, best, p.op, ints)) best = c;
    }
    if (lane == 0) st_i64(o, p.odt, w, best.valid ? best.idx : 0);
  }
}

/* ---------------------------------------------------------------- softmax */

/* Rows with inner == 1: one block per row, three passes over the row. */
extern "C" __global__ void rlx_softmax_rows(char* arena, rlxk_row p, rlxk_state* st) {
  __shared__ float red[32];
  const char* x = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  for (int64_t row = blockIdx.x; row < p.outer; row += gridDim.x) {
    int64_t base = row * p.n;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) m = nanmax_f(m, ld_f32(x, p.idt, base + i));
    m = block_max_nan(m, red);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) s += expf(ld_f32(x, p.idt, base + i) - m);
    s = block_sum(s, red);
    float ls = logf(s);
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      float v = ld_f32(x, p.idt, base + i);
      st_f32(o, p.odt, base + i, p.op == 0 ? expf(v - m) / s : v - m - ls);
    }
  }
}

/* Rows with inner > 1: one thread per (outer, inner) column. */
extern "C" __global__ void rlx_softmax_cols(char* arena, rlxk_row p, rlxk_state* st) {
  const char* x = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  for (int64_t c = grid_index(); c < p.outer * p.inner; c += grid_stride()) {
    int64_t oi = c / p.inner, j = c % p.inner, base = oi * p.n * p.inner + j;
    float m = -INFINITY;
    for (int64_t i = 0; i < p.n; i++) m = nanmax_f(m, ld_f32(x, p.idt, base + i * p.inner));
    float s = 0.0f;
    for (int64_t i = 0; i < p.n; i++) s += expf(ld_f32(x, p.idt, base + i * p.inner) - m);
    float ls = logf(s);
    for (int64_t i = 0; i < p.n; i++) {
      float v = ld_f32(x, p.idt, base + i * p.inner);
      st_f32(o, p.odt, base + i * p.inner, p.op == 0 ? expf(v - m) / s : v - m - ls);
    }
  }
}

/* f32 rows held in registers: one read and one write of every element.
 * n % 4 == 0, n <= 4 * VPT * blockDim.x, 16-byte aligned rows. */
template <int VPT>
__device__ void softmax_f32_reg(char* arena, const rlxk_row& p) {
  __shared__ float red[32];
  int64_t n4 = p.n / 4;
  for (int64_t row = blockIdx.x; row < p.outer; row += gridDim.x) {
    const float4* x = (const float4*)at(arena, p.ioff) + row * n4;
    float4* o = (float4*)atw(arena, p.ooff) + row * n4;
    float4 v[VPT];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
      v[k] = i < n4 ? x[i] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      m = nanmax_f(nanmax_f(m, v[k].x), nanmax_f(v[k].y, nanmax_f(v[k].z, v[k].w)));
    }
    m = block_max_nan(m, red);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
      if (i < n4) {
        float4 e = make_float4(expf(v[k].x - m), expf(v[k].y - m), expf(v[k].z - m), expf(v[k].w - m));
        s += (e.x + e.y) + (e.z + e.w);
        if (p.op == 0) v[k] = e;
      }
    }
    s = block_sum(s, red);
    float ls = logf(s), inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
      if (i >= n4) continue;
      float4 r = v[k];
      if (p.op == 0) r = make_float4(r.x * inv, r.y * inv, r.z * inv, r.w * inv);
      else r = make_float4(r.x - m - ls, r.y - m - ls, r.z - m - ls, r.w - m - ls);
      o[i] = r;
    }
  }
}

extern "C" __global__ void rlx_softmax_f32_v1(char* a, rlxk_row p, rlxk_state* s) { softmax_f32_reg<1>(a, p); }
extern "C" __global__ void rlx_softmax_f32_v2(char* a, rlxk_row p, rlxk_state* s) { softmax_f32_reg<2>(a, p); }
extern "C" __global__ void rlx_softmax_f32_v4(char* a, rlxk_row p, rlxk_state* s) { softmax_f32_reg<4>(a, p); }
extern "C" __global__ void rlx_softmax_f32_v8(char* a, rlxk_row p, rlxk_state* s) { softmax_f32_reg<8>(a, p); }

/* ---------------------------------------------------------------- cumsum */

extern "C" __global__ void rlx_cumsum(char* arena, rlxk_row p, rlxk_state* st) {
  const char* x = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  bool ints = is_intlike(p.idt);
  for (int64_t c = grid_index(); c < p.outer * p.inner; c += grid_stride()) {
    int64_t oi = c / p.inner, j = c % p.inner, base = oi * p.n * p.inner + j;
    double acc = 0.0;
    uint64_t iacc = 0;
    for (int64_t s = 0; s < p.n; s++) {
      int64_t i = p.reverse ? p.n - 1 - s : s, e = base + i * p.inner;
      double vf = ints ? 0.0 : ld_f64(x, p.idt, e);
      uint64_t vi = ints ? (uint64_t)ld_i64(x, p.idt, e) : 0;
      if (!p.exclusive) { acc += vf; iacc += vi; }
      if (ints) st_i64(o, p.odt, e, (int64_t)iacc);
      else st_f64(o, p.odt, e, acc);
      if (p.exclusive) { acc += vf; iacc += vi; }
    }
  }
}

/* ---------------------------------------------------------------- topk */

/* Total order of the reference (NaN above everything). */
RLXK_DEV int num_cmp(double a, double b, int64_t ai, int64_t bi, bool ints) {
  if (ints) return (ai > bi) - (ai < bi);
  int an = isnan(a), bn = isnan(b);
  if (an || bn) return an - bn;
  return (a > b) - (a < b);
}

/* One thread per element: its rank in the sorted row is the number of
 * elements ordered before it; ranks below k are written. */
extern "C" __global__ void rlx_topk(char* arena, rlxk_row p, rlxk_state* st) {
  const char* x = at(arena, p.ioff);
  char* vals = atw(arena, p.ooff);
  char* idxs = atw(arena, p.ooff2);
  bool ints = is_intlike(p.idt);
  int64_t total = p.outer * p.n * p.inner;
  for (int64_t t = grid_index(); t < total; t += grid_stride()) {
    int64_t j = t % p.inner, i = (t / p.inner) % p.n, oi = t / (p.inner * p.n);
    int64_t base = oi * p.n * p.inner + j;
    double vf = ints ? 0.0 : ld_f64(x, p.idt, base + i * p.inner);
    int64_t vi = ints ? ld_i64(x, p.idt, base + i * p.inner) : 0;
    int64_t rank = 0;
    for (int64_t e = 0; e < p.n && rank < p.k; e++) {
      if (e == i) continue;
      double ef = ints ? 0.0 : ld_f64(x, p.idt, base + e * p.inner);
      int64_t ei = ints ? ld_i64(x, p.idt, base + e * p.inner) : 0;
      int c = num_cmp(ef, vf, ei, vi, ints);
      if (p.largest ? c > 0 : c < 0) rank++;
      else if (c == 0 && e < i) rank++;
    }
    if (rank < p.k) {
      int64_t out = (oi * p.k + rank) * p.inner + j;
      copy_elem(vals, p.odt, out, x, p.idt, base + i * p.inner);
      st_i64(idxs, p.odt2, out, i);
    }
  }
}
