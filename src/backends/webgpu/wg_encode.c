/* Step -> parameter record + kernel + grid. Kernels address their arena
 * window with 32-bit byte offsets and element indices, so every size, stride
 * and offset must fit; a step that does not, or that computes in f64 (WGSL
 * has no f64) or needs 64-bit integer division, runs on the host fallback
 * rather than computing something wrong. Elementwise steps get their dims
 * coalesced (size-1 dims dropped, runs contiguous in every view merged), so
 * the common dense case unravels one dim per element instead of eight.
 *
 * Fast kernels are picked here from the views, never re-derived by the
 * kernels: dense f32 elementwise (vec4 accesses), contiguous f32 rows
 * (softmax, norms), the register-blocked matmul and flash attention.
 * RLX_WG_NO_FAST=1 keeps every step on the general kernels. */
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "backends/common/common.h"
#include "backends/webgpu/wg_internal.h"
#include "ir/quant.h"

typedef struct encoder {
  uint32_t* w;
  int ok; /* cleared when a value does not fit 32 bits */
} encoder;

static void put(encoder* e, uint32_t idx, int64_t v) {
  if (v < INT32_MIN || v > (int64_t)UINT32_MAX) e->ok = 0;
  e->w[idx] = (uint32_t)v;
}
static void put_x(encoder* e, uint32_t idx, int64_t v) { put(e, WG_R_X + idx, v); }
static void put_float(encoder* e, uint32_t idx, float v) { memcpy(&e->w[WG_R_X + idx], &v, 4); }

static void put_view(encoder* e, int slot, const rlx_view* v, uint64_t base, uint64_t window) {
  uint32_t at = WG_R_VIEW0 + (uint32_t)slot * WG_R_VIEW_WORDS;
  if (v->rank < 0) {
    e->w[at + 2] = (uint32_t)-1;
    return;
  }
  if (v->offset < base || v->offset - base > window) e->ok = 0;
  e->w[at + 0] = (uint32_t)(v->offset - base);
  e->w[at + 1] = (uint32_t)v->dtype;
  e->w[at + 2] = (uint32_t)v->rank;
  for (int32_t d = 0; d < v->rank && d < RLX_MAX_RANK; d++) {
    put(e, at + 3 + (uint32_t)d, v->shape[d]);
    if (v->stride[d] < INT32_MIN || v->stride[d] > INT32_MAX) e->ok = 0;
    e->w[at + 11 + (uint32_t)d] = (uint32_t)(int32_t)v->stride[d];
  }
}

static int is_int(rlx_dtype t) {
  return t == RLX_I8 || t == RLX_U8 || t == RLX_I32 || t == RLX_I64 || t == RLX_BOOL;
}

/* 64-bit integer division and power are not emulated. */
static int needs_i64_divpow(const rlx_step* s) {
  return s->kernel == RLX_K_BINARY && (s->op == RLX_BIN_DIV || s->op == RLX_BIN_POW) &&
         is_int(s->in[0].dtype) && s->out[0].dtype == RLX_I64;
}

static int stores_subword(const rlx_step* s) {
  for (int32_t i = 0; i < s->n_out; i++)
    if (s->out[i].rank >= 0 && rlx_dtype_size(s->out[i].dtype) < 4) return 1;
  return 0;
}

/* Generic kernel per kernel kind (RLX_WG_KIND_* rows in wg_internal.h;
 * RLX_WG_KERNEL_COUNT: none, the step goes to the host fallback). */
static const rlx_wg_kernel k_kind_kernel[RLX_K_COUNT] = {
#define RLX_KERNEL(id, name, params, meaning) [RLX_K_##id] = RLX_WG_KIND_##id,
#include "backends/kernels.def"
#undef RLX_KERNEL
};

/* The step's generic kernel and work items. Work items come from the
 * shared lowering (step->work): one invocation each (64 per workgroup) or
 * one workgroup each. -1: no kernel for this kind. */
/* DequantMatMul (dequant.wgsl): the GEMV for up to 4 rows of x (a
 * workgroup per W row), 64 x 64 tiles above that (a workgroup each), the
 * transposed role an invocation per 4 rows of x and one column of y. */
static int64_t dqmm_items(const rlx_step* s, int* per_group, rlx_wg_kernel* k) {
  const rlx_dqmm_params* p = &s->p.dqmm;
  if (p->transposed) {
    *k = RLX_WG_DQ_T;
    *per_group = 64;
    return (p->M + 3) / 4 * p->K;
  }
  *per_group = 1;
  *k = p->M <= 4 ? RLX_WG_DQ_GEMV : RLX_WG_DQ_TILE;
  return p->M <= 4 ? p->N : ((p->M + 63) / 64) * ((p->N + 63) / 64);
}

/* DequantGroupedMatMul (grouped_dequant.wgsl, both roles): a workgroup
 * per output element for up to 4 rows, 64 x 64 tiles of y above that.
 * Float experts keep grouped.wgsl (the kind's generic kernel). */
static int64_t gqmm_items(const rlx_step* s, int* per_group, rlx_wg_kernel* k) {
  const rlx_gmm_params* p = &s->p.gmm;
  *per_group = 1;
  *k = p->M <= 4 ? RLX_WG_GQ_GEMV : RLX_WG_GQ_TILE;
  return p->M <= 4 ? p->M * p->N : ((p->M + 63) / 64) * ((p->N + 63) / 64);
}

static int64_t work_items(const rlx_step* s, int* per_group, rlx_wg_kernel* k) {
  if ((unsigned)s->kernel >= RLX_K_COUNT || k_kind_kernel[s->kernel] == RLX_WG_KERNEL_COUNT)
    return -1;
  if (s->kernel == RLX_K_DEQUANT_MATMUL) return dqmm_items(s, per_group, k);
  if (s->kernel == RLX_K_GROUPED_MATMUL && s->p.gmm.scheme >= 0)
    return gqmm_items(s, per_group, k);
  if (s->work.unit == RLX_WORK_NONE) return -1;
  *k = k_kind_kernel[s->kernel];
  *per_group = s->work.unit == RLX_WORK_GROUP ? 1 : 64;
  return s->work.items;
}

static void encode_matmul(encoder* e, const rlx_matmul_params* p) {
  put_x(e, WG_MM_M, p->M);
  put_x(e, WG_MM_N, p->N);
  put_x(e, WG_MM_K, p->K);
  put_x(e, WG_MM_BATCH, p->batch);
  put_x(e, WG_MM_BRANK, p->batch_rank);
  for (int32_t d = 0; d < p->batch_rank && d < RLX_MAX_RANK; d++) {
    put_x(e, WG_MM_BSHAPE + (uint32_t)d, p->batch_shape[d]);
    put_x(e, WG_MM_ABS + (uint32_t)d, p->a_bstride[d]);
    put_x(e, WG_MM_BBS + (uint32_t)d, p->b_bstride[d]);
    put_x(e, WG_MM_CBS + (uint32_t)d, p->c_bstride[d]);
  }
  put_x(e, WG_MM_ARS, p->a_rs);
  put_x(e, WG_MM_ACS, p->a_cs);
  put_x(e, WG_MM_BRS, p->b_rs);
  put_x(e, WG_MM_BCS, p->b_cs);
  put_x(e, WG_MM_CRS, p->c_rs);
  put_x(e, WG_MM_HAS_BIAS, p->has_bias);
  put_x(e, WG_MM_ACT, p->act);
}

static void encode_attention(encoder* e, const rlx_attention_params* p);

/* The forward's words, d_out's strides and the phase's output strides
 * (attention_bwd.wgsl). The FULL phase (three outputs) has no kernel. */
static void encode_attention_bwd(encoder* e, const rlx_step* s) {
  const rlx_attention_bwd_params* p = &s->p.attn_bwd;
  encode_attention(e, &p->a);
  put_x(e, WG_AB_DO, p->do_sb);
  put_x(e, WG_AB_DO + 1, p->do_ss);
  put_x(e, WG_AB_DO + 2, p->do_sh);
  const int64_t* g = s->op == RLX_ATTN_BWD_DQ   ? &p->dq_sb
                     : s->op == RLX_ATTN_BWD_DK ? &p->dk_sb
                                                : &p->dv_sb;
  for (uint32_t i = 0; i < 3; i++) put_x(e, WG_AB_G + i, g[i]);
  if (s->op == RLX_ATTN_BWD_FULL || s->n_out != 1 || p->a.D > 256) e->ok = 0;
}

static void encode_attention(encoder* e, const rlx_attention_params* p) {
  const int64_t v[] = {p->B,    p->H,    p->Hkv,  p->Sq,   p->Sk,   p->D,    p->Dv,
                       p->q_sb, p->q_ss, p->q_sh, p->k_sb, p->k_ss, p->k_sh, p->v_sb,
                       p->v_ss, p->v_sh, p->o_sb, p->o_ss, p->o_sh, p->m_sb, p->m_sh,
                       p->m_sq, p->m_sk, p->mask, p->window};
  for (uint32_t i = 0; i < sizeof v / sizeof v[0]; i++) put_x(e, i, v[i]);
  put_float(e, WG_AT_SCALE, p->scale);
  put_float(e, WG_AT_SOFTCAP, p->softcap);
  /* Each invocation owns up to 4 output dims of the 64-wide workgroup. */
  if (p->Dv > 256 || p->Hkv <= 0 || p->H % p->Hkv != 0) e->ok = 0;
}

/* Conv geometry (conv.wgsl). The kernels index x, w and y with 32-bit
 * element offsets: a step whose tensors do not fit goes to the host. */
static void encode_conv(encoder* e, const rlx_step* s) {
  const rlx_conv_params* p = &s->p.conv;
  int64_t taps = p->kernel[0] * p->kernel[1] * p->kernel[2];
  int64_t area = p->out[0] * p->out[1] * p->out[2];
  put_x(e, WG_CV_N, p->N);
  put_x(e, WG_CV_C, p->C);
  put_x(e, WG_CV_OC, p->OC);
  put_x(e, WG_CV_GROUPS, p->groups);
  put_x(e, WG_CV_LAYOUT, p->layout);
  put_x(e, WG_CV_ACT, p->act);
  put_x(e, WG_CV_HAS_BIAS, p->has_bias);
  put_x(e, WG_CV_HAS_RES, p->has_residual);
  put_x(e, WG_CV_TAPS, taps);
  put_x(e, WG_CV_M, p->N * area);
  put_x(e, WG_CV_K, p->groups > 0 ? p->C / p->groups * taps : 0);
  for (uint32_t d = 0; d < 3; d++) {
    put_x(e, WG_CV_IN + d, p->in[d]);
    put_x(e, WG_CV_OUT + d, p->out[d]);
    put_x(e, WG_CV_KERNEL + d, p->kernel[d]);
    put_x(e, WG_CV_STRIDE + d, p->stride[d]);
    put_x(e, WG_CV_PAD + d, p->pad[d]);
    put_x(e, WG_CV_DIL + d, p->dilation[d]);
  }
  if (p->groups < 1 || p->C % p->groups || p->OC % p->groups || p->n_spatial > 3) e->ok = 0;
  for (int i = 0; i < 2; i++)
    if (rlx_view_numel(&s->in[i]) > INT32_MAX) e->ok = 0;
  if (rlx_view_numel(&s->out[0]) > INT32_MAX) e->ok = 0;
}

static void encode_xent(encoder* e, const rlx_xent_params* p) {
  put_x(e, WG_XE_ROWS, p->rows);
  put_x(e, WG_XE_VOCAB, p->vocab);
  e->w[WG_R_X + WG_XE_IGNORE_LO] = (uint32_t)((uint64_t)p->ignore_index & 0xffffffffu);
  e->w[WG_R_X + WG_XE_IGNORE_HI] = (uint32_t)((uint64_t)p->ignore_index >> 32);
  put_float(e, WG_XE_LS, p->label_smoothing);
  if (p->vocab < 1) e->ok = 0;
}

/* The record has two output view slots: Adam's third output (v) goes in
 * kind words, rebased to the window like the views. */
static void encode_opt(encoder* e, const rlx_step* s, uint64_t base, uint64_t window) {
  const rlx_opt_params* p = &s->p.opt;
  put_x(e, WG_OU_N, p->n);
  const float f[] = {p->momentum, p->dampening, p->weight_decay, p->beta1, p->beta2, p->eps};
  for (uint32_t i = 0; i < 6; i++) put_float(e, WG_OU_MOMENTUM + i, f[i]);
  put_x(e, WG_OU_NESTEROV, p->nesterov);
  put_x(e, WG_OU_HAS_BUF, p->has_buf);
  put_x(e, WG_OU_DECOUPLED, p->decoupled);
  if (s->n_out > 2) {
    const rlx_view* v = &s->out[2];
    if (v->offset < base || v->offset - base > window) e->ok = 0;
    e->w[WG_R_X + WG_OU_OUT2_OFF] = (uint32_t)(v->offset - base);
    put_x(e, WG_OU_OUT2_DT, v->dtype);
  }
}

/* The geometry, 32-bit element indices of x and y, W 4-byte aligned in
 * its window (bytes are extracted from its words). */
static void encode_dqmm(encoder* e, const rlx_step* s, uint64_t base) {
  const rlx_dqmm_params* p = &s->p.dqmm;
  const rlx_quant_info* q = &rlx_quant_table[p->scheme];
  put_x(e, WG_DQ_M, p->M);
  put_x(e, WG_DQ_N, p->N);
  put_x(e, WG_DQ_K, p->K);
  put_x(e, WG_DQ_ROW_BYTES, p->row_bytes);
  put_x(e, WG_DQ_SCHEME, p->scheme);
  put_x(e, WG_DQ_GROUP, p->group);
  put_x(e, WG_DQ_HAS_SCALE, p->has_scale);
  put_x(e, WG_DQ_HAS_AUX, p->has_aux);
  put_x(e, WG_DQ_RUNS, (p->K + 15) / 16);
  put_x(e, WG_DQ_TILES_N, (p->N + 63) / 64);
  put_x(e, WG_DQ_BLOCK, q->block);
  put_x(e, WG_DQ_BLOCK_BYTES, q->block_bytes);
  int64_t xn = p->M * (p->transposed ? p->N : p->K), yn = p->M * (p->transposed ? p->K : p->N);
  if (p->group < 1 || xn > INT32_MAX || yn > INT32_MAX || (s->in[1].offset - base) % 4 != 0 ||
      s->in[1].offset - base + (uint64_t)(p->N * p->row_bytes) > UINT32_MAX)
    e->ok = 0;
}

/* The DequantMatMul words quant.wgsl reads (a stored row of cols
 * elements), then the grouped geometry; 32-bit element indices of x, y and
 * the scales, W 4-byte aligned in its window. */
static void encode_gqmm(encoder* e, const rlx_step* s, uint64_t base) {
  const rlx_gmm_params* p = &s->p.gmm;
  int64_t rows, cols;
  if (!rlx_shader_gqmm_geometry(p, s->in[1].offset - base, &rows, &cols)) {
    e->ok = 0;
    return;
  }
  const rlx_quant_info* q = &rlx_quant_table[p->scheme];
  put_x(e, WG_DQ_K, cols);
  put_x(e, WG_DQ_ROW_BYTES, p->row_bytes);
  put_x(e, WG_DQ_SCHEME, p->scheme);
  put_x(e, WG_DQ_GROUP, p->group);
  put_x(e, WG_DQ_HAS_SCALE, p->has_scale);
  put_x(e, WG_DQ_HAS_AUX, p->has_aux);
  put_x(e, WG_DQ_RUNS, (cols + 15) / 16);
  put_x(e, WG_DQ_BLOCK, q->block);
  put_x(e, WG_DQ_BLOCK_BYTES, q->block_bytes);
  put_x(e, WG_GQ_M, p->M);
  put_x(e, WG_GQ_N, p->N);
  put_x(e, WG_GQ_K, p->K);
  put_x(e, WG_GQ_E, p->E);
  put_x(e, WG_GQ_XREP, p->x_rep);
  put_x(e, WG_GQ_WT, p->wt);
  put_x(e, WG_GQ_TILES_N, (p->N + 63) / 64);
}

static void encode_kind(encoder* e, const rlx_step* s, uint64_t base, uint64_t window) {
  switch (s->kernel) {
    case RLX_K_DEQUANT_MATMUL: encode_dqmm(e, s, base); break;
    case RLX_K_MATMUL: encode_matmul(e, &s->p.mm); break;
    case RLX_K_REDUCE:
      put_x(e, WG_RD_NKEEP, s->p.reduce.n_keep);
      put_x(e, WG_RD_NRED, s->p.reduce.n_red);
      put_x(e, WG_RD_OUTER, s->p.reduce.outer);
      put_x(e, WG_RD_INNER, s->p.reduce.inner);
      break;
    case RLX_K_ARG_REDUCE: case RLX_K_SOFTMAX: case RLX_K_CUMSUM: case RLX_K_TOPK:
    case RLX_K_SOFTMAX_BWD:
      put_x(e, WG_RW_OUTER, s->p.rowop.row.outer);
      put_x(e, WG_RW_N, s->p.rowop.row.n);
      put_x(e, WG_RW_INNER, s->p.rowop.row.inner);
      put_x(e, WG_RW_EXCLUSIVE, s->p.rowop.exclusive);
      put_x(e, WG_RW_REVERSE, s->p.rowop.reverse);
      put_x(e, WG_RW_K, s->p.rowop.k);
      put_x(e, WG_RW_LARGEST, s->p.rowop.largest);
      if (s->p.rowop.row.n <= 0 || s->p.rowop.row.inner <= 0) e->ok = 0;
      break;
    case RLX_K_XENT: encode_xent(e, &s->p.xent); break;
    case RLX_K_OPT_UPDATE: encode_opt(e, s, base, window); break;
    case RLX_K_GATHER_BACKWARD:
      /* the kernel divides by axis_len; then the gather words */
      if (s->p.gather.axis_len < 1) e->ok = 0;
      /* fall through */
    case RLX_K_GATHER:
      put_x(e, WG_GA_OUTER, s->p.gather.outer);
      put_x(e, WG_GA_AXIS_LEN, s->p.gather.axis_len);
      put_x(e, WG_GA_INNER, s->p.gather.inner);
      put_x(e, WG_GA_NIDX, s->p.gather.n_idx);
      if (s->p.gather.inner <= 0 || s->p.gather.n_idx <= 0) e->ok = 0;
      break;
    case RLX_K_GROUPED_MATMUL:
      if (s->p.gmm.scheme >= 0) {
        encode_gqmm(e, s, base);
        break;
      }
      put_x(e, WG_GM_N, s->p.gmm.N);
      put_x(e, WG_GM_K, s->p.gmm.K);
      put_x(e, WG_GM_E, s->p.gmm.E);
      put_x(e, WG_GM_XREP, s->p.gmm.x_rep);
      put_x(e, WG_GM_WT, s->p.gmm.wt);
      /* the kernel divides by N and x_rep; quantized experts have no shader */
      if (s->p.gmm.N < 1 || s->p.gmm.x_rep < 1) e->ok = 0;
      break;
    case RLX_K_SCATTER_ADD: {
      const rlx_scatter_params* p = &s->p.scatter;
      put_x(e, WG_SC_RANK, p->rank);
      put_x(e, WG_SC_AXIS, p->axis);
      for (int32_t d = 0; d < p->rank && d < RLX_MAX_RANK; d++) {
        put_x(e, WG_SC_SHAPE + (uint32_t)d, p->shape[d]);
        put_x(e, WG_SC_OSTRIDE + (uint32_t)d, p->out_stride[d]);
      }
      put_x(e, WG_SC_AXIS_LEN, p->axis_len);
      break;
    }
    case RLX_K_NORM: case RLX_K_NORM_BWD: {
      const rlx_norm_params* p = &s->p.norm;
      put_x(e, WG_NM_ROWS, p->rows);
      put_x(e, WG_NM_COLS, p->cols);
      put_float(e, WG_NM_EPS, p->eps);
      put_x(e, WG_NM_RMS, p->rms);
      put_x(e, WG_NM_HAS_RES, p->has_residual);
      put_x(e, WG_NM_HAS_BIAS, p->has_bias);
      put_x(e, WG_NM_HAS_GAMMA, p->has_gamma);
      put_x(e, WG_NM_HAS_BETA, p->has_beta);
      put_x(e, WG_NM_WRITES_SUM, p->writes_sum);
      break;
    }
    case RLX_K_ATTENTION: encode_attention(e, &s->p.attn); break;
    case RLX_K_ATTENTION_BWD: encode_attention_bwd(e, s); break;
    case RLX_K_POOL:
    case RLX_K_POOL_BACKWARD: {
      const rlx_pool_params* p = &s->p.pool;
      put_x(e, WG_PL_RANK, p->rank);
      put_x(e, WG_PL_CIP, p->count_include_pad);
      put_float(e, WG_PL_VALUE, p->value);
      put_x(e, WG_PL_TAPS, p->taps);
      put_x(e, WG_PL_INDEX_OUT, p->index_out);
      for (int32_t d = 0; d < p->rank && d < RLX_MAX_RANK; d++) {
        put_x(e, WG_PL_KERNEL + (uint32_t)d, p->kernel[d]);
        put_x(e, WG_PL_STRIDE + (uint32_t)d, p->stride[d]);
        put_x(e, WG_PL_DIL + (uint32_t)d, p->dilation[d]);
        put_x(e, WG_PL_PAD + (uint32_t)d, p->pad[d]);
        put_x(e, WG_PL_PAD_END + (uint32_t)d, p->pad_end[d]);
      }
      break;
    }
    case RLX_K_RESIZE: {
      const rlx_resize_params* p = &s->p.resize;
      put_x(e, WG_RZ_RANK, p->rank);
      put_x(e, WG_RZ_NDIMS, p->n_dims);
      put_x(e, WG_RZ_NEAREST, p->nearest);
      put_x(e, WG_RZ_EXCL, p->exclude_outside);
      put_float(e, WG_RZ_CUBIC_A, p->cubic_a);
      put_float(e, WG_RZ_EXTRAP, p->extrapolation);
      put_x(e, WG_RZ_CROP, p->coord == RLX_COORD_TF_CROP_AND_RESIZE);
      for (int32_t i = 0; i < p->n_dims && i < RLX_RESIZE_MAX_DIMS; i++) {
        put_x(e, WG_RZ_DIM + (uint32_t)i, p->dim[i]);
        put_x(e, WG_RZ_IN + (uint32_t)i, p->in_size[i]);
        put_float(e, WG_RZ_COEF_A + (uint32_t)i, p->coef_a[i]);
        put_float(e, WG_RZ_COEF_B + (uint32_t)i, p->coef_b[i]);
      }
      break;
    }
    case RLX_K_SAMPLER: {
      const rlx_sampler_params* p = &s->p.sampler;
      put_x(e, WG_SP_MODE, p->mode);
      put_x(e, WG_SP_PADDING, p->padding);
      put_x(e, WG_SP_ALIGN, p->align_corners);
      put_x(e, WG_SP_RATIO, p->sampling_ratio);
      put_float(e, WG_SP_SCALE, p->spatial_scale);
      break;
    }
    case RLX_K_GROUP_NORM: {
      const rlx_gnorm_params* p = &s->p.gnorm;
      put_x(e, WG_GN_N, p->n);
      put_x(e, WG_GN_INNER, p->inner);
      put_x(e, WG_GN_GROUPS, p->groups);
      put_x(e, WG_GN_CDIV, p->cdiv);
      put_float(e, WG_GN_EPS, p->eps);
      put_x(e, WG_GN_HAS_GAMMA, p->has_gamma);
      put_x(e, WG_GN_HAS_BETA, p->has_beta);
      put_x(e, WG_GN_HAS_STATS, p->has_stats);
      break;
    }
    case RLX_K_CONV: encode_conv(e, s); break;
    case RLX_K_ROPE: {
      const rlx_rope_params* p = &s->p.rope;
      const int64_t v[] = {p->B,    p->S,    p->H,    p->D,     p->x_sb, p->x_ss, p->x_sh,
                           p->o_sb, p->o_ss, p->o_sh, p->n_rot, p->style, p->per_token,
                           p->inverse};
      for (uint32_t i = 0; i < sizeof v / sizeof v[0]; i++) put_x(e, i, v[i]);
      break;
    }
    default: break;
  }
}

/* ------------------------------------------------------------ fast paths */

static int dense(const rlx_view* v) {
  int64_t want = 1;
  for (int32_t d = v->rank - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->stride[d] != want) return 0;
    want *= v->shape[d];
  }
  return 1;
}

static int all_zero_strides(const rlx_view* v) {
  for (int32_t d = 0; d < v->rank; d++)
    if (v->shape[d] != 1 && v->stride[d] != 0) return 0;
  return 1;
}

static int at16(const rlx_view* v, uint64_t base) { return (v->offset - base) % 16 == 0; }

/* How eltwise_vec_main reads input `in` (aligned to the dense output `out`,
 * both coalesced): 0 contiguous, 1 scalar, 2 a row repeated (i % p), 3 a
 * column repeated (i / p); -1 when none fits. */
static int vec_mode(const rlx_view* in, const rlx_view* out, uint64_t base, int64_t* period) {
  *period = 1;
  if (in->offset % 4 != 0) return -1;
  if (all_zero_strides(in)) return 1;
  if (!at16(in, base) && !(in->rank == 2 && in->stride[0] == 1 && in->stride[1] == 0)) return -1;
  if (dense(in)) return 0;
  if (in->rank == 2 && out->shape[1] % 4 == 0) {
    *period = out->shape[1];
    if (in->stride[0] == 0 && in->stride[1] == 1) return 2;
    if (in->stride[0] == 1 && in->stride[1] == 0) return 3;
  }
  return -1;
}

/* Dense f32 (or same-dtype 4-byte copy) elementwise steps: eltwise_vec_main. */
static int pick_eltwise_vec(encoder* e, const rlx_step* s, const rlx_view* views, int n_views,
                            uint64_t base) {
  const rlx_view* out = &views[0];
  int n_in = s->kernel == RLX_K_BINARY ? 2 : 1;
  if (s->kernel == RLX_K_BINARY || s->kernel == RLX_K_UNARY) {
    if (out->dtype != RLX_F32) return 0;
    for (int k = 1; k <= n_in; k++)
      if (views[k].dtype != RLX_F32) return 0;
  } else if (s->kernel == RLX_K_COPY) {
    if (views[1].dtype != out->dtype || rlx_dtype_size(out->dtype) != 4) return 0;
  } else {
    return 0;
  }
  if (n_views < 1 + n_in || !dense(out) || !at16(out, base) || out->rank > 2) return 0;
  for (int k = 1; k <= n_in; k++) {
    int64_t period;
    int mode = vec_mode(&views[k], out, base, &period);
    if (mode < 0) return 0;
    put_x(e, WG_EV_MODE + (uint32_t)(k - 1), mode);
    put_x(e, WG_EV_PERIOD + (uint32_t)(k - 1), period);
  }
  return 1;
}

/* Contiguous f32 rows of at most 8192 elements: softmax_row_main. */
static int pick_softmax_row(const rlx_step* s, uint64_t base) {
  const rlx_row_params* r = &s->p.rowop.row;
  return r->inner == 1 && r->n % 4 == 0 && r->n <= 8192 && s->in[0].dtype == RLX_F32 &&
         s->out[0].dtype == RLX_F32 && at16(&s->in[0], base) && at16(&s->out[0], base);
}

/* Norms without a residual over contiguous f32 rows: norm_row_main. */
static int pick_norm_row(const rlx_step* s, uint64_t base) {
  const rlx_norm_params* p = &s->p.norm;
  if (p->has_residual || p->writes_sum || p->cols % 4 != 0 || p->cols > 8192) return 0;
  if (s->out[0].dtype != RLX_F32 || !at16(&s->out[0], base)) return 0;
  const int slots[3] = {0, 3, 4}; /* x, gamma, beta */
  for (int k = 0; k < 3; k++) {
    const rlx_view* v = &s->in[slots[k]];
    if (v->rank >= 0 && (v->dtype != RLX_F32 || !at16(v, base))) return 0;
  }
  return 1;
}

/* quad4 can read this view: f32 at 16 bytes, f16 / bf16 at 8 (element
 * indices of the quads are multiples of 4: callers check strides). */
static int quad_view(const rlx_view* v, uint64_t base) {
  if (v->dtype == RLX_F32) return at16(v, base);
  return (v->dtype == RLX_F16 || v->dtype == RLX_BF16) && (v->offset - base) % 8 == 0;
}

static int strides4(const int64_t* st, int n) {
  for (int i = 0; i < n; i++)
    if (st[i] % 4 != 0) return 0;
  return 1;
}

/* Register-blocked matmul: quad tile loads where an operand (f32, f16,
 * bf16) has aligned quads; outputs of 4 bytes, or 2 bytes in whole words.
 * Returns 2 for the f32 form (f32 throughout, quads on both sides), 1 for
 * the general one, 0 when the step does not fit. */
static int pick_matmul_tiled(encoder* e, const rlx_step* s, uint64_t base) {
  const rlx_matmul_params* p = &s->p.mm;
  if (p->M < 32 || p->N < 32 || p->K < 16) return 0;
  const rlx_view *a = &s->in[0], *b = &s->in[1], *c = &s->out[0];
  int pair = 0;
  if (c->dtype == RLX_F32 && at16(c, base) && p->N % 4 == 0 && strides4(p->c_bstride, p->batch_rank))
    pair = 2;
  else if (rlx_dtype_size(c->dtype) == 2 && (c->offset - base) % 4 == 0 && p->N % 2 == 0)
    pair = 1;
  else if (rlx_dtype_size(c->dtype) != 4)
    return 0;
  int fa = 0, fb = 0;
  if (quad_view(a, base) && strides4(p->a_bstride, p->batch_rank)) {
    if (p->a_cs == 1 && p->a_rs % 4 == 0 && p->K % 4 == 0) fa = 1;
    else if (p->a_rs == 1 && p->a_cs % 4 == 0 && p->M % 4 == 0) fa = 2;
  }
  if (quad_view(b, base) && strides4(p->b_bstride, p->batch_rank)) {
    if (p->b_cs == 1 && p->b_rs % 4 == 0 && p->N % 4 == 0) fb = 1;
    else if (p->b_rs == 1 && p->b_cs % 4 == 0 && p->K % 4 == 0) fb = 2;
  }
  put_x(e, WG_MM_FAST_A, fa);
  put_x(e, WG_MM_FAST_B, fb);
  put_x(e, WG_MM_PAIR_OUT, pair);
  return a->dtype == RLX_F32 && b->dtype == RLX_F32 && pair == 2 && fa && fb ? 2 : 1;
}

/* Decode-shaped f32 matmul (M <= 4, one batch) whose weight loads as
 * vec4: gemv.wgsl, MM_FAST_B = 1 for B[K, N], 2 for B[N, K]. Returns the
 * columns one workgroup owns, 0 when the step does not fit. */
static int pick_gemv(encoder* e, const rlx_step* s, uint64_t base) {
  const rlx_matmul_params* p = &s->p.mm;
  const rlx_view *a = &s->in[0], *b = &s->in[1], *c = &s->out[0];
  if (p->M < 1 || p->M > 4 || p->batch != 1 || p->K < 1) return 0;
  if (a->dtype != RLX_F32 || b->dtype != RLX_F32 || c->dtype != RLX_F32 || !at16(b, base))
    return 0;
  int layout = 0;
  if (p->b_cs == 1 && p->b_rs % 4 == 0 && p->N % 4 == 0) layout = 1;
  else if (p->b_rs == 1 && p->b_cs % 4 == 0 && p->K % 4 == 0) layout = 2;
  if (!layout) return 0;
  put_x(e, WG_MM_FAST_B, layout);
  /* B[K, N] with A's rows as 16-byte quads: one activation load per four
   * weight rows (f32 1x4096x4096 on the H100: 0.079 -> 0.064 ms) */
  int a_quads = layout == 1 && at16(a, base) && p->a_cs == 1 && p->K % 4 == 0 &&
                (p->M == 1 || p->a_rs % 4 == 0);
  put_x(e, WG_MM_FAST_A, a_quads);
  return layout == 1 ? 16 : 8;
}

/* Flash attention for query blocks (Sq >= 16), head dims <= 64, or <= 128
 * on a GPU adapter: q and the accumulator live in registers. The 128-dim
 * build is left to GPUs because lavapipe's LLVM compiles it for minutes
 * (RLX_WG_FLASH128=1 forces it there, for testing; =0 keeps wider heads on
 * the one-row kernel everywhere). */
static int flash128_allowed(void) {
  const char* env = rlx_env_str(RLX_ENV_WG_FLASH128);
  if (env) return strcmp(env, "1") == 0;
  rlx_wg_context* c = rlx_wg_context_get(NULL, 0);
  return c && !c->cpu_adapter;
}

static int pick_flash(encoder* e, const rlx_step* s, uint64_t base, rlx_wg_kernel* k) {
  const rlx_attention_params* p = &s->p.attn;
  int dims = p->D > p->Dv ? (int)p->D : (int)p->Dv;
  if (p->Sq < 16 || p->D <= 0 || p->Dv <= 0 || dims > 128 || (dims > 64 && !flash128_allowed())) return 0;
  const rlx_view *kv = &s->in[1], *vv = &s->in[2], *o = &s->out[0];
  int pair = 0;
  if (rlx_dtype_size(o->dtype) == 2) {
    const int64_t st[3] = {p->o_sb, p->o_ss, p->o_sh};
    if ((o->offset - base) % 4 != 0 || p->Dv % 2 != 0) return 0;
    for (int i = 0; i < 3; i++)
      if (st[i] % 2 != 0) return 0;
    pair = 1;
  } else if (rlx_dtype_size(o->dtype) != 4) {
    return 0;
  }
  const int64_t kst[6] = {p->k_sb, p->k_ss, p->k_sh, p->v_sb, p->v_ss, p->v_sh};
  int fast = quad_view(kv, base) && quad_view(vv, base) && strides4(kst, 6) && p->D % 4 == 0 &&
             p->Dv % 4 == 0;
  put_x(e, WG_AT_PAIR_OUT, pair);
  put_x(e, WG_AT_FAST_KV, fast);
  *k = dims > 64 ? RLX_WG_ATTN_FLASH128 : RLX_WG_ATTN_FLASH;
  return 1;
}

/* Conv with more than one input channel per group: the implicit GEMM
 * (conv.wgsl tiled_main). Depthwise convs (one input channel per group)
 * stay on the direct kernel, whose invocations each own one output, and so
 * do kernels past the tiled one's tap table (256 taps, offsets of 10 bits).
 * Returns the workgroups, 0 to keep the direct kernel. */
static int64_t pick_conv_tiled(encoder* e, const rlx_step* s) {
  const rlx_conv_params* p = &s->p.conv;
  if (p->C / p->groups < 2 || p->kernel[0] * p->kernel[1] * p->kernel[2] > 256) return 0;
  for (int d = 0; d < 3; d++)
    if ((p->kernel[d] - 1) * p->dilation[d] >= 1024) return 0;
  int64_t area = p->out[0] * p->out[1] * p->out[2];
  int64_t tiles_m = (p->N * area + 63) / 64, tiles_n = (p->OC / p->groups + 63) / 64;
  put_x(e, WG_CV_TILES_M, tiles_m);
  put_x(e, WG_CV_TILES_N, tiles_n);
  return p->groups * tiles_m * tiles_n;
}

/* Upgrades the step to a fast kernel where its views allow: kernel, work
 * items and invocations per item group change; the fast kernels other than
 * the tiled conv never need the atomic arena. */
static void pick_fast(encoder* e, const rlx_step* s, const rlx_view* views, int n_views,
                      uint64_t base, rlx_wg_dispatch* d, int64_t* items, int* per_group) {
  rlx_wg_kernel k = d->kernel;
  int cols, tiled;
  int64_t conv_groups;
  if (d->kernel == RLX_WG_ELTWISE && pick_eltwise_vec(e, s, views, n_views, base)) {
    k = RLX_WG_ELTWISE_VEC;
    *items = (rlx_view_numel(&views[0]) + 3) / 4;
    *per_group = 256;
  } else if (d->kernel == RLX_WG_SOFTMAX && pick_softmax_row(s, base)) {
    k = s->p.rowop.row.n > 4096 ? RLX_WG_SOFTMAX_ROW_LONG : RLX_WG_SOFTMAX_ROW;
  } else if (d->kernel == RLX_WG_NORM && pick_norm_row(s, base)) {
    k = s->p.norm.cols > 4096 ? RLX_WG_NORM_ROW_LONG : RLX_WG_NORM_ROW;
  } else if (d->kernel == RLX_WG_MATMUL && (cols = pick_gemv(e, s, base)) > 0) {
    k = RLX_WG_GEMV;
    *items = (s->p.mm.N + cols - 1) / cols;
  } else if (d->kernel == RLX_WG_MATMUL && (tiled = pick_matmul_tiled(e, s, base)) > 0) {
    const rlx_matmul_params* p = &s->p.mm;
    k = tiled == 2 ? RLX_WG_MATMUL_TILED_F32 : RLX_WG_MATMUL_TILED;
    *items = p->batch * ((p->M + 127) / 128) * ((p->N + 127) / 128);
  } else if (d->kernel == RLX_WG_ATTENTION && pick_flash(e, s, base, &k)) {
    const rlx_attention_params* p = &s->p.attn;
    *items = p->B * p->H * ((p->Sq + 63) / 64);
  } else if (d->kernel == RLX_WG_CONV && (conv_groups = pick_conv_tiled(e, s)) > 0) {
    k = RLX_WG_CONV_TILED; /* stores through st_f: keeps the atomic arena if needed */
    *items = conv_groups;
    *per_group = 1;
  }
  if (k != d->kernel) {
    d->atomic = k == RLX_WG_CONV_TILED ? d->atomic : 0;
    d->kernel = k;
  }
}

int rlx_wg_encode_step(const rlx_step* s, int32_t index, uint64_t base, uint64_t window,
                       uint32_t max_groups, uint32_t* words, rlx_wg_dispatch* out) {
  memset(words, 0, sizeof(uint32_t) * RLX_WG_REC_WORDS);
  memset(out, 0, sizeof *out);
  if (s->kernel == RLX_K_HOST || rlx_step_computes_in_f64(s) || needs_i64_divpow(s)) return 1;
  int per_group;
  int64_t items = work_items(s, &per_group, &out->kernel);
  if (items < 0) return 1;
  out->atomic = stores_subword(s);
  encoder e = {words, 1};
  put(&e, WG_R_KIND, s->kernel);
  put(&e, WG_R_OP, s->op);
  put(&e, WG_R_COUNT, items);
  put(&e, WG_R_STEP, index);
  words[WG_R_INF] = 0x7f800000u;
  words[WG_R_NAN] = 0x7fc00000u;
  rlx_view views[RLX_STEP_MAX_IN + 1];
  int n_views = 0;
  views[n_views++] = s->out[0];
  for (int32_t i = 0; i < s->n_in && i < RLX_STEP_MAX_IN; i++) views[n_views++] = s->in[i];
  if (rlx_kernel_is_elementwise(s->kernel)) rlx_views_coalesce(views, n_views);
  put_view(&e, 0, &views[0], base, window);
  rlx_view absent;
  memset(&absent, 0, sizeof absent);
  absent.rank = -1;
  put_view(&e, 1, s->n_out > 1 ? &s->out[1] : &absent, base, window);
  /* The record has five input slots; a sixth input rides in the out1 slot
   * of a one-output step (AttentionBackward's d_out). */
  const int in_slots = 5;
  for (int k = 1; k < n_views && k <= in_slots; k++) put_view(&e, 1 + k, &views[k], base, window);
  for (int32_t i = s->n_in; i < in_slots; i++) put_view(&e, 2 + i, &absent, base, window);
  if (s->n_in > in_slots + 1 || (s->n_in > in_slots && s->n_out > 1)) return 1;
  if (s->n_in > in_slots) put_view(&e, 1, &s->in[in_slots], base, window);
  encode_kind(&e, s, base, window);
  if (!e.ok) return 1;
  if (!rlx_env_flag(RLX_ENV_WG_NO_FAST)) {
    pick_fast(&e, s, views, n_views, base, out, &items, &per_group); /* R_COUNT stays */
    if (!e.ok) return 1;
  }
  if (items == 0) return 0;
  uint64_t groups = ((uint64_t)items + (uint64_t)per_group - 1) / (uint64_t)per_group;
  uint64_t gx = groups < max_groups ? groups : max_groups;
  uint64_t gy = (groups + gx - 1) / gx;
  if (gy > max_groups) return 1;
  words[WG_R_GROUPS_X] = (uint32_t)gx;
  out->groups_x = (uint32_t)gx;
  out->groups_y = (uint32_t)gy;
  return 0;
}

/* A Conv that is one plain matmul per image: 1x1 taps, stride 1, no pads. */
static int pointwise_conv(const rlx_graph* g, const rlx_node* n) {
  if (n->op != RLX_OP_CONV) return 0;
  const rlx_type* w = rlx_tensor_type(g, n->in[1]);
  int32_t ns = n->a.strides.n;
  for (int32_t i = 0; i < ns; i++)
    if (w->shape[2 + i] != 1 || n->a.strides.v[i] != 1 || n->a.pads.v[i] || n->a.pads.v[ns + i])
      return 0;
  return w->rank == ns + 2;
}

/* RLX_WG_DECOMPOSE_CONV: "1" every conv, "pointwise" the 1x1 ones go to the
 * decomposition (whose matmul is the register-blocked mmtile), to time
 * both on one build. */
static int conv_decomposed_by_env(const rlx_graph* g, const rlx_node* n) {
  const char* v = rlx_env_str(RLX_ENV_WG_DECOMPOSE_CONV);
  if (!v) return 0;
  return strcmp(v, "pointwise") == 0 ? pointwise_conv(g, n) : strcmp(v, "1") == 0;
}

/* Conv and ConvTranspose run natively (conv.wgsl) in the shader dtypes but
 * f64, which WGSL lacks; checked here because rlx_shader_supports_node
 * still sends every conv to the decompose pass (the Vulkan rule). */
static int conv_supported(const rlx_graph* g, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  if (conv_decomposed_by_env(g, n)) return 0;
  /* conv.wgsl indexes weights [OC, C/g, k...]; the layout pass's OHWI
   * weights go to decompose.c (Im2Col + MatMul, no weight transpose). */
  if (n->a.conv_layout == RLX_CONV_CHANNELS_LAST_OHWI) return 0;
  if (rlx_shader_node_has_newer_dtype(g, ni) || n->a.strides.n < 1 || n->a.strides.n > 3) return 0;
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] != RLX_NONE && rlx_tensor_type(g, n->in[i])->dtype == RLX_F64) return 0;
  return rlx_tensor_type(g, n->out[0])->dtype != RLX_F64;
}

/* Node-level answer for the dispatch report: f64 arithmetic, 64-bit integer
 * division/power, attention heads wider than 256 and Sample go to the host
 * fallback; the rest of Tier 1 runs natively. */
int rlx_wg_supports_node(const rlx_graph* g, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  if (n->op == RLX_OP_SAMPLE) return 0;
  if (n->op == RLX_OP_ELEMENTWISE_REGION) return 0; /* no kernel yet: decompose expands it */
  if (n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_TRANSPOSE) return conv_supported(g, ni);
  if (!rlx_shader_supports_node(g, ni)) return 0;
  if (n->op == RLX_OP_BINARY && (n->a.kind == RLX_BIN_DIV || n->a.kind == RLX_BIN_POW) &&
      rlx_tensor_type(g, n->out[0])->dtype == RLX_I64)
    return 0;
  if (n->op == RLX_OP_ATTENTION) {
    const rlx_type* v = rlx_tensor_type(g, n->in[2]);
    if (v->rank > 0 && v->shape[v->rank - 1] > 256) return 0;
  }
  if (n->op == RLX_OP_ATTENTION_BACKWARD) {
    const rlx_type* v = rlx_tensor_type(g, n->in[2]);
    if (n->a.head_dim > 256 || (v->rank > 0 && v->shape[v->rank - 1] > 256)) return 0;
  }
  return 1;
}
