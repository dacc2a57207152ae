/* Rows-interleaved Q4_0 / Q8_0 weights, in place (the CPU backend's own layout).
 *
 * A Q4_0 / Q8_0 DequantMatMul's decode GEMV is bound by the work per block when W
 * is stored row after row (a SIMD lane per element: widen, convert, FMA,
 * then horizontal sums). Stored with 8 rows interleaved, a lane is a row
 * and one VPDPBUSD covers 8 rows x 4 elements (fast_quant.c; measured in
 * bench/kernels/dequant_gemv_cpu.c, 2.5x on one core). The layout of a
 * group of 8 rows r0 .. r0 + 7 (the same bytes the 8 rows occupy, so no
 * second copy of W), per block b of 32 elements (8 x 18 bytes for Q4_0,
 * 8 x 34 for Q8_0):
 *   the 8 rows' f16 scales d (16 bytes), then for each 4 code bytes c of a
 *   block (4 for Q4_0, 8 for Q8_0) those 4 bytes of each row (32 bytes).
 *   Q4_0's code byte e holds element e in its low nibble and 16 + e in its
 *   high one; Q8_0's is element e.
 * Rows past the last full group keep the plain layout.
 *
 * Which W: those of Q4_0 / Q8_0 DequantMatMul steps that the fast path always runs
 * (not transposed, x f32 / f16 / bf16), at least 8 rows, and that no other
 * step of the compiled list reads or writes. Before a run the backend packs
 * every such W that is plain (cpu.c); upload, download and copy unpack a W
 * they touch first, so the outside world only ever sees the plain bytes. A
 * step list other than the compiled one (an active-extent lowering) packs
 * only W its steps agree with, and unpacks the rest it touches. Off without
 * AVX-512 VNNI, with options.reference, below RLX_CPU_SIMD's level 2, or
 * with RLX_CPU_NO_REPACK. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "base/env.h"

/* Bytes of a block of the schemes packed here: f16 d, then the codes. */
static int64_t block_bytes(int32_t scheme) { return scheme == RLX_QUANT_Q4_0 ? 18 : 34; }

int rlx_cpu_repack_available(void) {
#if defined(__x86_64__)
  static atomic_int vnni = -1; /* every thread computes the same value */
  if (atomic_load(&vnni) < 0) {
    __builtin_cpu_init();
    /* F16C (the scales' conversion) comes with every AVX-512 CPU; clang
     * 14's __builtin_cpu_supports does not know its name. */
    atomic_store(&vnni, __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl") &&
                            __builtin_cpu_supports("avx512vnni"));
  }
  return atomic_load(&vnni) && rlx_cpu_simd_level() >= 2 && !rlx_env_flag(RLX_ENV_CPU_NO_REPACK);
#else
  return 0;
#endif
}

/* The W (offset, rows, row bytes) of step s if the packed kernel can run
 * it, else 0. */
static int packable_w(const rlx_step* s, uint64_t* offset, int64_t* N, int64_t* row_bytes,
                      int32_t* scheme) {
  if (s->kernel != RLX_K_DEQUANT_MATMUL) return 0;
  const rlx_dqmm_params* p = &s->p.dqmm;
  rlx_dtype xt = s->in[0].dtype;
  if ((p->scheme != RLX_QUANT_Q4_0 && p->scheme != RLX_QUANT_Q8_0) || p->transposed || p->N < 8 ||
      xt != s->out[0].dtype ||
      !(xt == RLX_F32 || xt == RLX_F16 || xt == RLX_BF16))
    return 0;
  const rlx_view* w = &s->in[1];
  if (w->rank != 2 || w->shape[0] != p->N || w->shape[1] != p->row_bytes ||
      w->stride[0] != p->row_bytes || w->stride[1] != 1 ||
      p->row_bytes != p->K / 32 * block_bytes(p->scheme))
    return 0;
  *offset = w->offset, *N = p->N, *row_bytes = p->row_bytes, *scheme = p->scheme;
  return 1;
}

static uint64_t region_end(const rlx_cpu_packed* r) {
  return r->offset + (uint64_t)(r->N * r->row_bytes);
}

static int overlaps(const rlx_cpu_packed* r, uint64_t begin, uint64_t end) {
  return begin < region_end(r) && r->offset < end;
}

/* Does step s touch region r other than as a packable DequantMatMul of it? */
static int conflicts(const rlx_cpu_packed* r, const rlx_step* s) {
  uint64_t off;
  int64_t N, rb;
  int32_t scheme;
  int reads_as_w = packable_w(s, &off, &N, &rb, &scheme) && off == r->offset && N == r->N &&
                   rb == r->row_bytes && scheme == r->scheme;
  for (int32_t k = 0; k < s->n_writes; k++)
    if (overlaps(r, s->writes[k].begin, s->writes[k].end)) return 1;
  for (int32_t k = 0; k < s->n_reads; k++)
    if (overlaps(r, s->reads[k].begin, s->reads[k].end) && !reads_as_w) return 1;
  return 0;
}

/* A step list's conflicts with r (0: r may be packed while it runs). */
int rlx_cpu_repack_conflicts(const rlx_cpu_packed* r, const rlx_step_list* steps) {
  for (int32_t i = 0; i < steps->n; i++)
    if (conflicts(r, &steps->steps[i])) return 1;
  return 0;
}

static int find(const rlx_cpu_packed* rs, int32_t n, uint64_t offset) {
  for (int32_t i = 0; i < n; i++)
    if (rs[i].offset == offset) return i;
  return -1;
}

rlx_status rlx_cpu_repack_plan(const rlx_step_list* steps, rlx_cpu_packed** out, int32_t* out_n) {
  *out = NULL, *out_n = 0;
  rlx_cpu_packed* rs = NULL;
  int32_t n = 0;
  for (int32_t i = 0; i < steps->n; i++) {
    uint64_t off;
    int64_t N, rb;
    int32_t scheme;
    if (!packable_w(&steps->steps[i], &off, &N, &rb, &scheme) || find(rs, n, off) >= 0) continue;
    rlx_cpu_packed* grown = realloc(rs, sizeof *rs * (size_t)(n + 1));
    if (!grown) {
      free(rs);
      return RLX_RESOURCE_EXHAUSTED;
    }
    rs = grown;
    rs[n++] = (rlx_cpu_packed){off, N, rb, scheme, 0};
  }
  int32_t kept = 0;
  for (int32_t i = 0; i < n; i++)
    if (!rlx_cpu_repack_conflicts(&rs[i], steps)) rs[kept++] = rs[i];
  if (!kept) {
    free(rs);
    rs = NULL;
  }
  *out = rs, *out_n = kept;
  return RLX_OK;
}

/* Group g of r between the plain layout (pack 0) and the interleaved one,
 * through tmp (8 row_bytes: rlx_cpu_repack_tmp_bytes). */
static void convert_group(uint8_t* arena, const rlx_cpu_packed* r, int64_t g, int pack,
                          uint8_t* tmp) {
  int64_t rb = r->row_bytes, bb = block_bytes(r->scheme), nb = rb / bb;
  uint8_t* base = arena + r->offset + (uint64_t)(g * 8 * rb);
  memcpy(tmp, base, (size_t)(8 * rb));
  for (int64_t b = 0; b < nb; b++) {
    uint8_t* grp = (pack ? base : tmp) + b * 8 * bb;
    for (int row = 0; row < 8; row++) {
      uint8_t* plain = (pack ? tmp : base) + row * rb + b * bb;
      uint8_t* d = grp + 2 * row;
      if (pack) memcpy(d, plain, 2);
      else memcpy(plain, d, 2);
      for (int c = 0; c < (bb - 2) / 4; c++) {
        uint8_t* chunk = grp + 16 + 32 * c + 4 * row;
        if (pack) memcpy(chunk, plain + 2 + 4 * c, 4);
        else memcpy(plain + 2 + 4 * c, chunk, 4);
      }
    }
  }
}

uint64_t rlx_cpu_repack_tmp_bytes(const rlx_cpu_packed* rs, int32_t n) {
  uint64_t most = 0;
  for (int32_t i = 0; i < n; i++)
    if ((uint64_t)(8 * rs[i].row_bytes) > most) most = (uint64_t)(8 * rs[i].row_bytes);
  return most;
}

void rlx_cpu_repack_set(uint8_t* arena, rlx_cpu_packed* r, int pack, uint8_t* tmp) {
  if (r->packed == pack) return;
  for (int64_t g = 0; g < r->N / 8; g++) convert_group(arena, r, g, pack, tmp);
  r->packed = pack;
}

void rlx_cpu_repack_unpack_range(uint8_t* arena, rlx_cpu_packed* rs, int32_t n, uint64_t begin,
                                 uint64_t end, uint8_t* tmp) {
  for (int32_t i = 0; i < n; i++)
    if (rs[i].packed && overlaps(&rs[i], begin, end)) rlx_cpu_repack_set(arena, &rs[i], 0, tmp);
}

rlx_cpu_packed* rlx_cpu_packed_w(const rlx_cpu_fast* f, uint64_t offset) {
  for (int32_t i = 0; i < f->n_packed; i++)
    if (f->packed[i].offset == offset) return f->packed[i].packed ? &f->packed[i] : NULL;
  return NULL;
}
