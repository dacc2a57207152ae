/* RoPE (NeoX rotate-half or GPT-J interleaved pairs, partial rotary) and
 * Sample (top-k / top-p / temperature with the reference's counter-based
 * random numbers, so a seed draws the same token on every backend). */
#include "common.cuh"

/* One thread per rotated pair or passed-through dim of one (b, s, h) head.
 * Both elements of a pair are read before either is written (in place ok). */
extern "C" __global__ void rlx_rope(char* arena, rlxk_rope p, rlxk_state* st) {
  int64_t half = p.n_rot / 2, per_head = half + (p.D - p.n_rot);
  int64_t total = p.B * p.S * p.H * per_head;
  const char* x = at(arena, p.xoff);
  const char* cs = at(arena, p.coff);
  const char* sn = at(arena, p.soff);
  char* o = atw(arena, p.ooff);
  for (int64_t t = grid_index(); t < total; t += grid_stride()) {
    int64_t i = t % per_head, h = (t / per_head) % p.H, s = (t / (per_head * p.H)) % p.S;
    int64_t b = t / (per_head * p.H * p.S);
    int64_t xo = b * p.x_sb + s * p.x_ss + h * p.x_sh, oo = b * p.o_sb + s * p.o_ss + h * p.o_sh;
    if (i >= half) { /* pass-through tail */
      int64_t d = p.n_rot + (i - half);
      st_f32(o, p.odt, oo + d, ld_f32(x, p.xdt, xo + d));
      continue;
    }
    int64_t row = p.per_token ? b * p.S + s : s;
    int64_t i1 = p.style == RLX_ROPE_GPTJ ? 2 * i : i;
    int64_t i2 = p.style == RLX_ROPE_GPTJ ? 2 * i + 1 : i + half;
    float c = ld_f32(cs, p.cdt, row * half + i), sv = ld_f32(sn, p.sdt, row * half + i);
    if (p.inverse) sv = -sv; /* RopeBackward: the transposed rotation */
    float x1 = ld_f32(x, p.xdt, xo + i1), x2 = ld_f32(x, p.xdt, xo + i2);
    st_f32(o, p.odt, oo + i1, x1 * c - x2 * sv);
    st_f32(o, p.odt, oo + i2, x2 * c + x1 * sv);
  }
}

/* ---------------------------------------------------------------- sample */

RLXK_DEV uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

RLXK_DEV double rand_uniform(uint64_t seed, uint64_t counter) {
  uint64_t x = splitmix64(seed ^ splitmix64(counter));
  return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

struct cand {
  double p;
  int64_t idx;
};

/* Descending probability, ties by lower index (padding sorts last). */
RLXK_DEV bool cand_before(const cand& a, const cand& b) {
  if (a.p != b.p) return a.p > b.p;
  return a.idx < b.idx;
}

/* Greedy: first index of the maximum, NaN never wins over a number. */
RLXK_DEV int64_t argmax_block(const char* L, int dt, int64_t base, int64_t vocab, double* sv,
                              int64_t* si) {
  double bv = -INFINITY;
  int64_t bi = -1;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    double x = ld_f64(L, dt, base + j);
    if (isnan(x)) continue;
    if (bi < 0 || x > bv) { bv = x; bi = j; }
  }
  sv[threadIdx.x] = bv;
  si[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      double ov = sv[threadIdx.x + s];
      int64_t oi = si[threadIdx.x + s];
      int64_t mi = si[threadIdx.x];
      if (oi >= 0 && (mi < 0 || ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < mi))) {
        sv[threadIdx.x] = ov;
        si[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  int64_t r = si[0] < 0 ? 0 : si[0]; /* all NaN: index 0, as the reference */
  __syncthreads();
  return r;
}

/* Bitonic sort of pow2 candidates in global scratch by one block. */
RLXK_DEV void bitonic_sort(cand* c, int64_t n) {
  for (int64_t k = 2; k <= n; k <<= 1) {
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        int64_t l = i ^ j;
        if (l <= i) continue;
        bool up = (i & k) == 0;
        cand a = c[i], b = c[l];
        if (up ? cand_before(b, a) : cand_before(a, b)) { c[i] = b; c[l] = a; }
      }
      __syncthreads();
    }
  }
}

/* One block per row (grid-strided), 256 threads. */
extern "C" __global__ void rlx_sample(char* arena, rlxk_sample p, rlxk_state* st) {
  __shared__ double sv[256];
  __shared__ int64_t si[256];
  __shared__ int64_t pick;
  const char* L = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  cand* c = (cand*)(uintptr_t)p.scratch + (int64_t)blockIdx.x * p.pow2;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    int64_t base = row * p.vocab;
    int64_t greedy = argmax_block(L, p.idt, base, p.vocab, sv, si);
    double mx = -INFINITY;
    if (p.temperature > 0.0f) {
      for (int64_t j = threadIdx.x; j < p.vocab; j += blockDim.x) {
        double x = ld_f64(L, p.idt, base + j);
        double v = isnan(x) ? -INFINITY : x / (double)p.temperature;
        mx = v > mx ? v : mx;
      }
      sv[threadIdx.x] = mx;
      __syncthreads();
      for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s && sv[threadIdx.x + s] > sv[threadIdx.x]) sv[threadIdx.x] = sv[threadIdx.x + s];
        __syncthreads();
      }
      mx = sv[0];
      __syncthreads();
    }
    if (!(p.temperature > 0.0f) || !(mx > -INFINITY) || isinf(mx)) {
      if (threadIdx.x == 0) st_i64(o, p.odt, row, greedy);
      __syncthreads();
      continue;
    }
    for (int64_t j = threadIdx.x; j < p.pow2; j += blockDim.x) {
      if (j < p.vocab) {
        double x = ld_f64(L, p.idt, base + j);
        double v = isnan(x) ? -INFINITY : x / (double)p.temperature;
        c[j].p = exp(v - mx);
      } else {
        c[j].p = -1.0; /* padding sorts after every real candidate */
      }
      c[j].idx = j;
    }
    __syncthreads();
    bitonic_sort(c, p.pow2);
    /* The walk is sequential, in sorted order, exactly as the reference sums. */
    if (threadIdx.x == 0) {
      int64_t keep = (p.top_k > 0 && p.top_k < p.vocab) ? p.top_k : p.vocab;
      double mass = 0.0;
      for (int64_t j = 0; j < keep; j++) mass += c[j].p;
      double target = (double)p.top_p * mass, cum = 0.0;
      int64_t n = 0;
      while (n < keep) {
        cum += c[n++].p;
        if (cum >= target) break;
      }
      double u = rand_uniform(st->seed, (uint64_t)row) * cum, run = 0.0;
      int64_t tok = c[n - 1].idx;
      for (int64_t j = 0; j < n; j++) {
        run += c[j].p;
        if (u < run) { tok = c[j].idx; break; }
      }
      pick = tok;
      st_i64(o, p.odt, row, pick);
    }
    __syncthreads();
  }
}

/* Greedy Sample (temperature 0): the first index of each row's maximum, NaN
 * never winning over a number, index 0 for a row of NaN (as the
 * reference). One block of 1024 threads per row (grid-strided): f32 rows
 * read as float4 when the row is 16-byte aligned, 4 loads in flight per
 * thread; values compare in f32 (exact for f32 / f16 / bf16 logits; f64
 * logits take rlx_sample). rlx_sample's one 256-thread block walking the
 * row through the generic f64 load took ~200 us for a 128256-word vocab. */
RLXK_DEV void better(float v, int64_t i, float& bv, int64_t& bi) {
  if (isnan(v)) return;
  if (bi < 0 || v > bv || (v == bv && i < bi)) { bv = v; bi = i; }
}

extern "C" __global__ void __launch_bounds__(1024)
    rlx_sample_greedy(char* arena, rlxk_sample p, rlxk_state* st) {
  __shared__ float wv[32];
  __shared__ int64_t wi[32];
  const char* L = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t base = row * p.vocab;
    float bv = -INFINITY;
    int64_t bi = -1, j0 = 0;
    if (p.idt == RLX_F32 && ((uintptr_t)(L + 4 * base) & 15) == 0) {
      const float4* v4 = (const float4*)(L + 4 * base);
      const int64_t n4 = p.vocab / 4;
      for (int64_t q = threadIdx.x; q < n4; q += 4 * (int64_t)blockDim.x) {
        float4 r[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
          int64_t qq = q + u * (int64_t)blockDim.x;
          r[u] = qq < n4 ? __ldg(v4 + qq) : make_float4(NAN, NAN, NAN, NAN);
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
          int64_t k = 4 * (q + u * (int64_t)blockDim.x);
          better(r[u].x, k, bv, bi), better(r[u].y, k + 1, bv, bi);
          better(r[u].z, k + 2, bv, bi), better(r[u].w, k + 3, bv, bi);
        }
      }
      j0 = n4 * 4;
    }
    for (int64_t j = j0 + threadIdx.x; j < p.vocab; j += blockDim.x) better(ld_f32(L, p.idt, base + j), j, bv, bi);
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) {
      float ov = __shfl_down_sync(0xffffffffu, bv, s);
      int64_t oi = __shfl_down_sync(0xffffffffu, bi, s);
      if (oi >= 0) better(ov, oi, bv, bi);
    }
    if (lane == 0) wv[warp] = bv, wi[warp] = bi;
    __syncthreads();
    if (warp == 0) {
      int nw = (int)(blockDim.x / 32);
      bv = lane < nw ? wv[lane] : -INFINITY;
      bi = lane < nw ? wi[lane] : -1;
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) {
        float ov = __shfl_down_sync(0xffffffffu, bv, s);
        int64_t oi = __shfl_down_sync(0xffffffffu, bi, s);
        if (oi >= 0) better(ov, oi, bv, bi);
      }
      if (lane == 0) st_i64(o, p.odt, row, bi < 0 ? 0 : bi);
    }
    __syncthreads();
  }
}
