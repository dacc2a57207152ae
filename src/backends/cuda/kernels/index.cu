/* Gather and ScatterAdd. Indices are checked by a validation kernel first;
 * a bad index records a run-time error (reported by the host after the run,
 * naming the node) and the main kernel then leaves its output untouched, as
 * the reference does. */
#include "common.cuh"

RLXK_DEV unsigned long long err_key(int step, int code) {
  return ((unsigned long long)(step + 1) << 8) | (unsigned long long)code;
}

/* ---------------------------------------------------------------- gather */

extern "C" __global__ void rlx_gather_check(char* arena, rlxk_gather p, rlxk_state* st) {
  const char* idx = at(arena, p.ioff);
  for (int64_t q = grid_index(); q < p.n_idx; q += grid_stride()) {
    int64_t raw = ld_i64(idx, p.idt, q), v = raw < 0 ? raw + p.axis_len : raw;
    if (v < 0 || v >= p.axis_len) report_error(st, p.step, RLXK_ERR_GATHER, raw, p.axis_len);
  }
}

extern "C" __global__ void rlx_gather(char* arena, rlxk_gather p, rlxk_state* st) {
  if (st->err_key == err_key(p.step, RLXK_ERR_GATHER)) return;
  const char* data = at(arena, p.doff);
  const char* idx = at(arena, p.ioff);
  char* o = atw(arena, p.ooff);
  int64_t total = p.outer * p.n_idx * p.inner;
  for (int64_t t = grid_index(); t < total; t += grid_stride()) {
    int64_t j = t % p.inner, q = (t / p.inner) % p.n_idx, oi = t / (p.inner * p.n_idx);
    int64_t raw = ld_i64(idx, p.idt, q), v = raw < 0 ? raw + p.axis_len : raw;
    if (v < 0 || v >= p.axis_len) continue;
    copy_elem(o, p.odt, t, data, p.ddt, (oi * p.axis_len + v) * p.inner + j);
  }
}

/* Contiguous rows (inner elements each) of f32: the embedding lookup. */
extern "C" __global__ void rlx_gather_rows_f32(char* arena, rlxk_gather p, rlxk_state* st) {
  if (st->err_key == err_key(p.step, RLXK_ERR_GATHER)) return;
  const float* data = (const float*)at(arena, p.doff);
  const char* idx = at(arena, p.ioff);
  float* o = (float*)atw(arena, p.ooff);
  for (int64_t r = blockIdx.x; r < p.outer * p.n_idx; r += gridDim.x) {
    int64_t q = r % p.n_idx, oi = r / p.n_idx;
    int64_t raw = ld_i64(idx, p.idt, q), v = raw < 0 ? raw + p.axis_len : raw;
    if (v < 0 || v >= p.axis_len) continue;
    const float* src = data + (oi * p.axis_len + v) * p.inner;
    float* dst = o + r * p.inner;
    for (int64_t j = threadIdx.x; j < p.inner; j += blockDim.x) dst[j] = src[j];
  }
}

/* ---------------------------------------------------------------- scatter add */

RLXK_DEV void scatter_offsets(const rlxk_scatter& p, int64_t t, int64_t* ii, int64_t* si,
                              int64_t* oe_wo_axis) {
  int64_t rem = t, a = 0, b = 0, c = 0;
  for (int d = p.rank - 1; d >= 0; d--) {
    int64_t idx = rem % p.shape[d];
    rem /= p.shape[d];
    a += idx * p.idx_stride[d];
    b += idx * p.src_stride[d];
    if (d != p.axis) c += idx * p.out_stride[d];
  }
  *ii = a;
  *si = b;
  *oe_wo_axis = c;
}

extern "C" __global__ void rlx_scatter_check(char* arena, rlxk_scatter p, rlxk_state* st) {
  const char* idx = at(arena, p.ioff);
  for (int64_t t = grid_index(); t < p.n; t += grid_stride()) {
    int64_t ii, si, oe;
    scatter_offsets(p, t, &ii, &si, &oe);
    int64_t raw = ld_i64(idx, p.idt, ii), v = raw < 0 ? raw + p.axis_len : raw;
    if (v < 0 || v >= p.axis_len) report_error(st, p.step, RLXK_ERR_SCATTER, raw, p.axis_len);
  }
}

/* Byte-sized integer add through a CAS on the aligned 32-bit word. */
RLXK_DEV void atomic_add_byte(uint8_t* addr, int64_t v, bool is_bool) {
  uintptr_t a = (uintptr_t)addr;
  unsigned int* word = (unsigned int*)(a & ~(uintptr_t)3);
  unsigned int shift = (unsigned int)(a & 3) * 8u;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    uint8_t cur = (uint8_t)((assumed >> shift) & 0xffu);
    uint8_t nv = is_bool ? (uint8_t)((int64_t)cur + v != 0) : (uint8_t)((int64_t)cur + v);
    unsigned int repl = (assumed & ~(0xffu << shift)) | ((unsigned int)nv << shift);
    old = atomicCAS(word, assumed, repl);
  } while (old != assumed);
}

RLXK_DEV void atomic_add_elem(char* o, int t, int64_t e, const char* src, int stt, int64_t si) {
  switch (t) {
    case RLX_F32: atomicAdd((float*)o + e, ld_f32(src, stt, si)); break;
    case RLX_F64: atomicAdd((double*)o + e, ld_f64(src, stt, si)); break;
    case RLX_F16: atomicAdd((__half*)o + e, __float2half_rn(ld_f32(src, stt, si))); break;
    case RLX_BF16: atomicAdd((__nv_bfloat16*)o + e, __float2bfloat16_rn(ld_f32(src, stt, si))); break;
    case RLX_I32: atomicAdd((int*)o + e, (int)ld_i64(src, stt, si)); break;
    case RLX_U32: atomicAdd((unsigned*)o + e, (unsigned)ld_i64(src, stt, si)); break;
    case RLX_I64: case RLX_U64:
      atomicAdd((unsigned long long*)o + e, (unsigned long long)ld_i64(src, stt, si));
      break;
    default: atomic_add_byte((uint8_t*)o + e, ld_i64(src, stt, si), t == RLX_BOOL); break;
  }
}

extern "C" __global__ void rlx_scatter_add(char* arena, rlxk_scatter p, rlxk_state* st) {
  if (st->err_key == err_key(p.step, RLXK_ERR_SCATTER)) return;
  const char* idx = at(arena, p.ioff);
  const char* src = at(arena, p.soff);
  char* o = atw(arena, p.ooff);
  for (int64_t t = grid_index(); t < p.n; t += grid_stride()) {
    int64_t ii, si, oe;
    scatter_offsets(p, t, &ii, &si, &oe);
    int64_t raw = ld_i64(idx, p.idt, ii), v = raw < 0 ? raw + p.axis_len : raw;
    if (v < 0 || v >= p.axis_len) continue;
    atomic_add_elem(o, p.odt, oe + v * p.out_stride[p.axis], src, p.sdt, si);
  }
}
