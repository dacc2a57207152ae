/* CPU fast path of GroupedMatMul (RLX_K_GROUPED_MATMUL), f32 x and y.
 *
 * Rows are sorted by expert (a counting sort of idx, stable), each
 * expert's rows of x gathered into one block and multiplied by that
 * expert's W in one SGEMM, the result rows scattered back: E SGEMMs of
 * (rows of e) x N x K instead of M GEMVs. Float W is read in place; a
 * quantized W (rows along K) is dequantized RLX_GMM_TILE rows at a time
 * (threaded) into a tile that feeds the SGEMM, never a whole expert.
 * Declines (the reference runs) on a bad index, other dtypes, and the
 * quantized transposed role.
 *
 * An expert with at most RLX_GMM_GEMV_ROWS rows (decode, and the sparse
 * experts of short prompts) and a quantized W: each of its rows is one
 * DequantMatMul GEMV (fast_quant.c's fused block dots, threaded over W's
 * rows), handed a step whose views point at that expert's W and scales
 * and at the row's x and y; the k experts of a token read only their own
 * weights. With q4_k, E 8, N 4096, K 2048 on this 2-core machine, 16 rows
 * (T 8, k 2) took 98 ms through dequantized tiles + SGEMM and ~1 ms per
 * row as GEMVs. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "ir/dtype.h"

#define RLX_GMM_TILE 64     /* quantized W rows dequantized per SGEMM */
#define RLX_GMM_GEMV_ROWS 8 /* rows of y up to which each is one GEMV (decode) */

typedef struct gmm_tile_job {
  uint8_t* arena;
  const rlx_step* s;
  int64_t e, n0;
  float* tile;
} gmm_tile_job;

static void tile_range(void* ctx, int64_t begin, int64_t end) {
  const gmm_tile_job* j = ctx;
  rlx_gmm_dequant_rows(j->arena, j->s, j->e, j->n0 + begin, end - begin,
                       j->tile + begin * j->s->p.gmm.K);
}

/* yg [cnt, N] = xg [cnt, K] . W[e]. */
static void expert_gemm(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s, int64_t e,
                        int64_t cnt, const float* xg, float* yg, float* tile) {
  const rlx_gmm_params* p = &s->p.gmm;
  if (p->scheme < 0) {
    const float* w = (const float*)(arena + s->in[1].offset) + e * p->N * p->K;
    rlx_cpu_sgemm(f->pool, 0, p->wt, cnt, p->N, p->K, xg, p->K, w, p->wt ? p->K : p->N, yg,
                  p->N);
    return;
  }
  gmm_tile_job j = {arena, s, e, 0, tile};
  for (int64_t n0 = 0; n0 < p->N; n0 += RLX_GMM_TILE) {
    int64_t rows = p->N - n0 < RLX_GMM_TILE ? p->N - n0 : RLX_GMM_TILE;
    j.n0 = n0;
    rlx_cpu_parallel_for(f->pool, rows, 4, tile_range, &j);
    rlx_cpu_sgemm(f->pool, 0, 1, cnt, rows, p->K, xg, p->K, tile, p->K, yg + n0, p->N);
  }
}

/* order: the rows of y grouped by expert (stable); start[e]..start[e+1]. */
static int sort_rows(uint8_t* arena, const rlx_step* s, int64_t* order, int64_t* start) {
  const rlx_gmm_params* p = &s->p.gmm;
  memset(start, 0, sizeof(int64_t) * (size_t)(p->E + 1));
  for (int64_t r = 0; r < p->M; r++) {
    int64_t e = rlx_load_i64(arena + s->in[2].offset, s->in[2].dtype, r);
    if (e < 0 || e >= p->E) return 0; /* the reference reports it */
    start[e + 1]++;
  }
  for (int64_t e = 0; e < p->E; e++) start[e + 1] += start[e];
  int64_t* fill = order + p->M; /* scratch: next free slot per expert */
  memcpy(fill, start, sizeof(int64_t) * (size_t)p->E);
  for (int64_t r = 0; r < p->M; r++)
    order[fill[rlx_load_i64(arena + s->in[2].offset, s->in[2].dtype, r)]++] = r;
  return 1;
}

/* Row r of y as a DequantMatMul step over expert e's stored rows. */
static rlx_step row_as_dqmm(const rlx_step* s, int64_t r, int64_t e) {
  const rlx_gmm_params* p = &s->p.gmm;
  int64_t groups = p->K / p->group;
  rlx_step d;
  memset(&d, 0, sizeof d);
  d.kernel = RLX_K_DEQUANT_MATMUL;
  d.node = s->node;
  d.n_in = 4;
  d.n_out = 1;
  d.in[0] = s->in[0];
  d.in[0].offset += (uint64_t)(r / p->x_rep * p->K) * rlx_dtype_size(s->in[0].dtype);
  d.in[1] = s->in[1];
  d.in[1].offset += (uint64_t)(e * p->N * p->row_bytes);
  d.in[2] = s->in[3]; /* scale [E, N, groups] */
  if (p->has_scale) d.in[2].offset += (uint64_t)(e * p->N * groups) * rlx_dtype_size(d.in[2].dtype);
  d.in[3] = s->in[4]; /* zero points [E, N, groups], or NVFP4's one global scale */
  if (p->has_aux && p->scheme != RLX_QUANT_NVFP4)
    d.in[3].offset += (uint64_t)(e * p->N * groups) * rlx_dtype_size(d.in[3].dtype);
  d.out[0] = s->out[0];
  d.out[0].offset += (uint64_t)(r * p->N) * rlx_dtype_size(s->out[0].dtype);
  rlx_dqmm_params* q = &d.p.dqmm;
  q->M = 1, q->N = p->N, q->K = p->K, q->row_bytes = p->row_bytes;
  q->scheme = p->scheme, q->group = p->group, q->transposed = 0;
  q->has_scale = p->has_scale, q->has_aux = p->has_aux;
  return d;
}

/* Expert e's rows as fused GEMVs; 0 when one declines (the caller then
 * takes the tiled path for this expert). */
static int expert_gemvs(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s, int64_t e,
                        const int64_t* rows, int64_t cnt) {
  for (int64_t i = 0; i < cnt; i++) {
    rlx_step d = row_as_dqmm(s, rows[i], e);
    if (!rlx_cpu_fast_dequant_matmul(f, arena, &d)) return 0;
  }
  return 1;
}

int rlx_cpu_fast_grouped_matmul(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_gmm_params* p = &s->p.gmm;
  if (s->in[0].dtype != RLX_F32 || s->out[0].dtype != RLX_F32) return 0;
  if (p->scheme < 0 ? s->in[1].dtype != RLX_F32 : !p->wt) return 0;
  if (p->M == 0 || p->N == 0) return 1;
  int64_t* order = malloc(sizeof(int64_t) * (size_t)(p->M + (p->M > p->E ? p->M : p->E) + 1));
  int64_t* start = malloc(sizeof(int64_t) * (size_t)(p->E + 1));
  float* xg = malloc(sizeof(float) * (size_t)(p->M * p->K + 1));
  float* yg = malloc(sizeof(float) * (size_t)(p->M * p->N));
  float* tile = p->scheme >= 0 ? malloc(sizeof(float) * (size_t)(RLX_GMM_TILE * p->K)) : NULL;
  int ok = order && start && xg && yg && (p->scheme < 0 || tile) &&
           sort_rows(arena, s, order, start);
  const float* x = (const float*)(arena + s->in[0].offset);
  float* y = (float*)(arena + s->out[0].offset);
  for (int64_t e = 0; ok && e < p->E; e++) {
    int64_t cnt = start[e + 1] - start[e];
    if (cnt == 0) continue;
    const int64_t* rows = order + start[e];
    if (p->scheme >= 0 && cnt <= RLX_GMM_GEMV_ROWS && expert_gemvs(f, arena, s, e, rows, cnt))
      continue;
    for (int64_t i = 0; i < cnt; i++)
      memcpy(xg + i * p->K, x + rows[i] / p->x_rep * p->K, sizeof(float) * (size_t)p->K);
    expert_gemm(f, arena, s, e, cnt, xg, yg, tile);
    for (int64_t i = 0; i < cnt; i++)
      memcpy(y + rows[i] * p->N, yg + i * p->N, sizeof(float) * (size_t)p->N);
  }
  free(order);
  free(start);
  free(xg);
  free(yg);
  free(tile);
  return ok;
}
