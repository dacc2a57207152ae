/* CPU reference of GroupedMatMul and DequantGroupedMatMul
 * (RLX_K_GROUPED_MATMUL): per output row r the expert e = idx[r], its W
 * expanded to f64 (quantized rows dequantized with src/ir/quant.h, the one
 * definition of every scheme), then y[r, n] = sum_k x[r / x_rep, k] *
 * W[e](k, n) in double. The oracle of the fast path and of every GPU
 * backend (their host fallback runs this). */
#include <stdlib.h>

#include "backends/common/common.h"
#include "backends/cpu/cpu.h"
#include "base/scalar_math.h"
#include "ir/dtype.h"
#include "ir/quant.h"

/* Stored rows per expert and elements per stored row: W[e] is kept as
 * [N, K] (wt) or [K, N]. */
static void stored_dims(const rlx_gmm_params* p, int64_t* rows, int64_t* cols) {
  *rows = p->wt ? p->N : p->K;
  *cols = p->wt ? p->K : p->N;
}

void rlx_gmm_dequant_rows(const uint8_t* arena, const rlx_step* s, int64_t e, int64_t row0,
                          int64_t n_rows, float* out) {
  const rlx_gmm_params* p = &s->p.gmm;
  int64_t rows, cols;
  stored_dims(p, &rows, &cols);
  int64_t groups = cols / p->group, gb = rlx_quant_group_bytes(p->scheme, p->group);
  float global = p->scheme == RLX_QUANT_NVFP4 && p->has_aux
                     ? (float)rlx_load_f64(arena + s->in[4].offset, s->in[4].dtype, 0)
                     : 1.0f;
  for (int64_t r = row0; r < row0 + n_rows; r++) {
    const uint8_t* w = arena + s->in[1].offset + (e * rows + r) * p->row_bytes;
    for (int64_t g = 0; g < groups; g++) {
      int64_t at = (e * rows + r) * groups + g;
      float scale = 1.0f;
      int32_t zero = 0;
      if (p->has_scale) {
        double sv = rlx_load_f64(arena + s->in[3].offset, s->in[3].dtype, at);
        scale = p->scheme == RLX_QUANT_NVFP4 ? rlx_quant_nvfp4_scale((uint8_t)sv, global)
                                             : (float)sv;
      }
      if (p->has_aux && p->scheme != RLX_QUANT_NVFP4)
        zero = (int32_t)rlx_load_f64(arena + s->in[4].offset, s->in[4].dtype, at);
      rlx_dequant_group(p->scheme, w + g * gb, p->group, scale, zero,
                        out + (r - row0) * cols + g * p->group);
    }
  }
}

/* Expert e's W in f64, as stored ([rows, cols]). */
static void expert_f64(uint8_t* arena, const rlx_step* s, int64_t e, float* tmp, double* w) {
  const rlx_gmm_params* p = &s->p.gmm;
  int64_t rows, cols;
  stored_dims(p, &rows, &cols);
  if (p->scheme >= 0) {
    rlx_gmm_dequant_rows(arena, s, e, 0, rows, tmp);
    for (int64_t i = 0; i < rows * cols; i++) w[i] = (double)tmp[i];
    return;
  }
  for (int64_t i = 0; i < rows * cols; i++)
    w[i] = rlx_load_f64(arena + s->in[1].offset, s->in[1].dtype, e * rows * cols + i);
}

rlx_status rlx_ref_grouped(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                           rlx_error* err) {
  const rlx_gmm_params* p = &s->p.gmm;
  const rlx_view *x = &s->in[0], *idx = &s->in[2], *y = &s->out[0];
  size_t n = (size_t)(p->N * p->K + 1);
  double* w = malloc(sizeof(double) * n);
  float* tmp = p->scheme >= 0 ? malloc(sizeof(float) * n) : NULL;
  if (!w || (p->scheme >= 0 && !tmp)) {
    free(w);
    free(tmp);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory running node %d", s->node);
  }
  rlx_status st = RLX_OK;
  int64_t have = -1; /* the expert whose W is in w */
  for (int64_t r = 0; r < p->M && st == RLX_OK; r++) {
    int64_t e = rlx_load_i64(arena + idx->offset, idx->dtype, r);
    if (e < 0 || e >= p->E) {
      st = rlx_fail_index(err, ctx, s->node, "grouped_matmul expert", e, p->E);
      break;
    }
    if (e != have) expert_f64(arena, s, e, tmp, w);
    have = e;
    int64_t xr = r / p->x_rep;
    for (int64_t j = 0; j < p->N; j++) {
      double a = 0.0;
      for (int64_t k = 0; k < p->K; k++)
        a += rlx_load_f64(arena + x->offset, x->dtype, xr * p->K + k) *
             (p->wt ? w[j * p->K + k] : w[k * p->N + j]);
      rlx_store_f64(arena + y->offset, y->dtype, r * p->N + j, a);
    }
  }
  free(w);
  free(tmp);
  return st;
}
