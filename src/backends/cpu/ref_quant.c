/* CPU reference of DequantMatMul (RLX_K_DEQUANT_MATMUL): each row of W is
 * dequantized into f32 with src/ir/quant.h (the one definition of every
 * scheme), then dotted with x in double. The oracle of the fast path and of
 * every GPU backend (their host fallback runs this). */
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "base/scalar_math.h"
#include "ir/dtype.h"
#include "ir/quant.h"

static double ld(uint8_t* arena, const rlx_view* v, int64_t i) {
  return rlx_load_f64(arena + v->offset, v->dtype, i);
}

/* Group j's effective scale and zero point in row n. */
static void group_scale(uint8_t* arena, const rlx_step* s, int64_t n, int64_t j, float* scale,
                        int32_t* zero) {
  const rlx_dqmm_params* p = &s->p.dqmm;
  int64_t at = n * (p->K / p->group) + j;
  *scale = 1.0f;
  *zero = 0;
  if (!p->has_scale) return;
  double sv = ld(arena, &s->in[2], at);
  if (p->scheme == RLX_QUANT_NVFP4) {
    *scale = rlx_quant_nvfp4_scale((uint8_t)sv, p->has_aux ? (float)ld(arena, &s->in[3], 0) : 1.0f);
    return;
  }
  *scale = (float)sv;
  if (p->has_aux) *zero = (int32_t)ld(arena, &s->in[3], at);
}

/* Row n of W in f32. */
static void dequant_row(uint8_t* arena, const rlx_step* s, int64_t n, float* row) {
  const rlx_dqmm_params* p = &s->p.dqmm;
  const uint8_t* w = arena + s->in[1].offset + n * p->row_bytes;
  int64_t gb = rlx_quant_group_bytes(p->scheme, p->group);
  for (int64_t j = 0; j < p->K / p->group; j++) {
    float scale;
    int32_t zero;
    group_scale(arena, s, n, j, &scale, &zero);
    rlx_dequant_group(p->scheme, w + j * gb, p->group, scale, zero, row + j * p->group);
  }
}

rlx_status rlx_ref_quant(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                         rlx_error* err) {
  (void)ctx;
  const rlx_dqmm_params* p = &s->p.dqmm;
  const rlx_view *x = &s->in[0], *y = &s->out[0];
  float* row = malloc(sizeof(float) * (size_t)(p->K ? p->K : 1));
  /* the transposed role sums over W's rows: one accumulator per output */
  double* acc = p->transposed ? calloc((size_t)(p->M * p->K + 1), sizeof(double)) : NULL;
  if (!row || (p->transposed && !acc)) {
    free(row);
    free(acc);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory running node %d", s->node);
  }
  for (int64_t n = 0; n < p->N; n++) {
    dequant_row(arena, s, n, row);
    for (int64_t m = 0; m < p->M; m++) {
      if (p->transposed) {
        double xv = ld(arena, x, m * p->N + n);
        for (int64_t k = 0; k < p->K; k++) acc[m * p->K + k] += xv * (double)row[k];
        continue;
      }
      double a = 0.0;
      for (int64_t k = 0; k < p->K; k++) a += ld(arena, x, m * p->K + k) * (double)row[k];
      rlx_store_f64(arena + y->offset, y->dtype, m * p->N + n, a);
    }
  }
  for (int64_t i = 0; acc && i < p->M * p->K; i++)
    rlx_store_f64(arena + y->offset, y->dtype, i, acc[i]);
  free(row);
  free(acc);
  return RLX_OK;
}
