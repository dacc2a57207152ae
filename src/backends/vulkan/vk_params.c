/* Step -> parameter record + pipeline + grid. The shaders address the arena
 * with 32-bit byte offsets and element indices, so every size, stride and
 * offset must fit; a step that does not is sent to the host fallback
 * rather than computed wrong. Elementwise steps get their dims coalesced
 * first (size-1 dims dropped, contiguous runs merged), so the common
 * dense case unravels one or two dims per element instead of eight. */
#ifdef RLX_HAVE_VULKAN
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "backends/common/common.h"
#include "backends/vulkan/shaders/layout.h"
#include "backends/vulkan/vk_internal.h"
#include "ir/quant.h"

typedef struct encoder {
  int32_t* w;
  int ok; /* cleared when a value does not fit 32 bits */
} encoder;

static void put(encoder* e, int idx, int64_t v) {
  if (v < INT32_MIN || v > INT32_MAX) e->ok = 0;
  e->w[idx] = (int32_t)v;
}

static void put_float(encoder* e, int idx, float v) { memcpy(&e->w[idx], &v, 4); }

static void put_view(encoder* e, int slot, const rlx_view* v, uint64_t arena_bytes) {
  int base = RLXVK_VIEW0 + slot * RLXVK_VIEW_WORDS;
  if (v->rank < 0) { e->w[base + RLXVK_V_RANK] = -1; return; }
  if (v->offset > arena_bytes || v->offset > UINT32_MAX) e->ok = 0;
  e->w[base + RLXVK_V_OFFSET] = (int32_t)(uint32_t)v->offset;
  e->w[base + RLXVK_V_DTYPE] = (int32_t)v->dtype;
  e->w[base + RLXVK_V_RANK] = v->rank;
  for (int32_t d = 0; d < v->rank && d < RLX_MAX_RANK; d++) {
    put(e, base + RLXVK_V_SHAPE + d, v->shape[d]);
    put(e, base + RLXVK_V_STRIDE + d, v->stride[d]);
  }
}

/* ------------------------------------------------------------ matmul kernels
 *
 * matmul.comp (generic: any dtype, any strides) is the fallback; faster
 * kernels are picked when the views allow them:
 *  - gemv.comp: M <= 4, no batch, f32, weights loadable as vec4;
 *  - matmul_cm2: f16 x f16 in whole tiles on a device with workgroup-scope
 *    cooperative matrices (VK_NV_cooperative_matrix2; see cm2_fits);
 *  - matmul_coop: other f16 x f16 on a device with 16x16x16 f16->f32
 *    cooperative matrices (VK_KHR_cooperative_matrix, else the NV extension);
 *  - matmul_f32.comp: f32 operands loadable as vec4, f32 output.
 * RLX_VK_MATMUL=generic forces matmul.comp (bisecting); RLX_VK_COOPMAT=0
 * keeps f16 matmuls off the cooperative-matrix kernel. */

/* An operand loads as 16-byte vectors along its unit-stride axis: that axis
 * is a multiple of `vec` long, the other stride and every batch stride are
 * multiples of `vec`, the view starts 16-byte aligned. fast_len: extent of
 * the unit-stride axis. */
static int vec_loadable(const rlx_view* v, int64_t other_stride, int64_t fast_len,
                        const int64_t* bstride, int32_t brank, int vec) {
  if (v->offset % 16 != 0 || fast_len % vec != 0 || other_stride % vec != 0) return 0;
  for (int32_t d = 0; d < brank; d++)
    if (bstride[d] % vec != 0) return 0;
  return 1;
}

/* A (M x K) as vec: k-fast (a_cs == 1) or m-fast (a_rs == 1); the kernels
 * tell the two apart by a_cs == 1. */
static int a_loadable(const rlx_step* s, int vec, int allow_m_fast) {
  const rlx_matmul_params* p = &s->p.mm;
  if (p->a_cs == 1) return vec_loadable(&s->in[0], p->M > 1 ? p->a_rs : 0, p->K, p->a_bstride, p->batch_rank, vec);
  if (p->a_rs == 1 && allow_m_fast)
    return vec_loadable(&s->in[0], p->a_cs, p->M, p->a_bstride, p->batch_rank, vec);
  return 0;
}

/* B (K x N) as vec: n-fast (b_cs == 1) or k-fast (b_rs == 1). */
static int b_loadable(const rlx_step* s, int vec) {
  const rlx_matmul_params* p = &s->p.mm;
  if (p->b_cs == 1) return vec_loadable(&s->in[1], p->K > 1 ? p->b_rs : 0, p->N, p->b_bstride, p->batch_rank, vec);
  if (p->b_rs == 1) return vec_loadable(&s->in[1], p->b_cs, p->K, p->b_bstride, p->batch_rank, vec);
  return 0;
}

/* Dense output whose rows are 16-byte aligned. */
static int c_vec_storable(const rlx_step* s, int vec) {
  const rlx_matmul_params* p = &s->p.mm;
  return s->out[0].offset % 16 == 0 && p->N % vec == 0 && p->c_rs == p->N;
}

static int coopmat_device(void) {
  if (rlx_env_is(RLX_ENV_VK_COOPMAT, "0")) return 0;
  rlx_vk_context* c = rlx_vk_context_get(NULL, 0);
  return c ? c->coopmat : 0;
}

/* Strides are nonzero (no broadcast rows) and multiples of vec. */
static int strides_fit(int64_t a, int64_t b, const int64_t* bstride, int32_t brank, int vec) {
  if (a == 0 || b == 0) return 0;
  for (int32_t d = 0; d < brank; d++)
    if (bstride[d] % vec != 0) return 0;
  return 1;
}

/* matmul_cm2.comp takes whole tiles only: M, N and K multiples of its
 * tile, a row-major A and a row- or column-major B moving as 16-byte rows,
 * an f16 C with 16-byte aligned rows, no bias or activation. */
static int cm2_fits(const rlx_step* s) {
  const rlx_matmul_params* p = &s->p.mm;
  rlx_vk_context* c = rlx_vk_context_get(NULL, 0);
  if (!c || !c->cm2_shader || rlx_env_is(RLX_ENV_VK_COOPMAT, "0") || p->has_bias || p->act != RLX_ACT_NONE)
    return 0;
  if (p->M % c->cm2_tile[0] || p->N % c->cm2_tile[1] || p->K % c->cm2_tile[2]) return 0;
  if (s->out[0].dtype != RLX_F16 || !c_vec_storable(s, 8) ||
      !strides_fit(p->c_rs, 1, p->c_bstride, p->batch_rank, 8))
    return 0;
  return p->a_cs == 1 && strides_fit(p->a_rs, p->a_cs, p->a_bstride, p->batch_rank, 8) &&
         strides_fit(p->b_rs, p->b_cs, p->b_bstride, p->batch_rank, 8) && a_loadable(s, 8, 0) &&
         b_loadable(s, 8);
}

/* Pipeline and workgroup count of a matmul step. */
static int64_t matmul_plan(const rlx_step* s, rlx_vk_pipe* pipe) {
  const rlx_matmul_params* p = &s->p.mm;
  int64_t tiles = p->batch * ((p->M + 127) / 128) * ((p->N + 127) / 128);
  rlx_dtype at = s->in[0].dtype, bt = s->in[1].dtype, ct = s->out[0].dtype;
  *pipe = RLX_VK_PIPE_MATMUL;
  if (rlx_env_is(RLX_ENV_VK_MATMUL, "generic") || p->M <= 0 || p->N <= 0) return tiles;
  if (at == RLX_F32 && bt == RLX_F32 && p->M <= 4 && p->batch == 1 && b_loadable(s, 4) &&
      (p->b_cs == 1 || p->b_rs == 1)) {
    *pipe = RLX_VK_PIPE_GEMV;
    return p->b_cs == 1 ? (p->N + 15) / 16 : (p->N + 7) / 8;
  }
  if (at == RLX_F16 && bt == RLX_F16 && p->K > 0 && cm2_fits(s)) {
    const rlx_vk_context* c = rlx_vk_context_get(NULL, 0);
    *pipe = RLX_VK_PIPE_MATMUL_CM2;
    return p->batch * (p->M / c->cm2_tile[0]) * (p->N / c->cm2_tile[1]);
  }
  if (at == RLX_F16 && bt == RLX_F16 && coopmat_device() && p->K > 0) {
    *pipe = RLX_VK_PIPE_MATMUL_COOP;
    return tiles;
  }
  if (at == RLX_F32 && bt == RLX_F32 && ct == RLX_F32 && a_loadable(s, 4, 1) && b_loadable(s, 4) &&
      c_vec_storable(s, 4))
    *pipe = RLX_VK_PIPE_MATMUL_F32;
  return tiles;
}

/* ------------------------------------------------------------ conv kernels
 *
 * conv_direct.comp (one invocation per output element) is the generic
 * kernel and the one depthwise convolutions keep (C/groups == 1: a GEMM of
 * depth TAPS only wastes tiles); the rest run as an implicit GEMM per group,
 * conv_coop.comp for f16 x and w on a cooperative-matrix device, conv.comp
 * elsewhere. RLX_VK_CONV=direct forces the direct kernel, =scalar keeps f16
 * on conv.comp (bisecting, comparing); RLX_VK_COOPMAT=0 keeps every f16
 * kernel off cooperative matrices. */

/* Workgroups of a GEMM kernel per group: its output tiles of tm rows
 * (conv.comp 128, conv_coop.comp 64) by tn columns (128, 64). */
static int64_t conv_tiles(const rlx_conv_params* p, int64_t tm, int64_t tn) {
  int64_t m = p->N * p->out[0] * p->out[1] * p->out[2];
  return ((m + tm - 1) / tm) * ((p->OC / p->groups + tn - 1) / tn);
}

/* Pipeline and work items (workgroups for the GEMM kernels) of a conv step. */
static int64_t conv_plan(const rlx_step* s, int* per_group, rlx_vk_pipe* pipe) {
  const rlx_conv_params* p = &s->p.conv;
  *pipe = RLX_VK_PIPE_CONV_DIRECT;
  *per_group = 64;
  if (p->groups <= 0 || p->C / p->groups <= 1 || rlx_env_is(RLX_ENV_VK_CONV, "direct"))
    return s->work.items;
  *per_group = 1;
  if (s->in[0].dtype == RLX_F16 && s->in[1].dtype == RLX_F16 && coopmat_device() &&
      !rlx_env_is(RLX_ENV_VK_CONV, "scalar")) {
    *pipe = RLX_VK_PIPE_CONV_COOP;
    return p->groups * conv_tiles(p, 64, 64);
  }
  *pipe = RLX_VK_PIPE_CONV;
  return p->groups * conv_tiles(p, 128, 128);
}

/* ------------------------------------------------------------ dequant matmul
 *
 * dequant.comp in three builds: the GEMV for up to DQ_GEMV_MAXM rows of x
 * (decode: a workgroup per W row), 64 x 64 tiles above that (prefill: W
 * dequantized a 64 x 32 slice at a time into shared memory), and the
 * transposed (gradient) role. */
#define RLX_VK_DQ_GEMV_MAXM 4 /* dequant.comp's DQ_GEMV_MAXM */

static int64_t dqmm_plan(const rlx_step* s, int* per_group, rlx_vk_pipe* pipe) {
  const rlx_dqmm_params* p = &s->p.dqmm;
  if (p->transposed) {
    *pipe = RLX_VK_PIPE_DQ_T;
    *per_group = 64;
    return (p->M + 3) / 4 * p->K;
  }
  *per_group = 1;
  if (p->M <= RLX_VK_DQ_GEMV_MAXM) {
    *pipe = RLX_VK_PIPE_DQ_GEMV;
    return p->N;
  }
  *pipe = RLX_VK_PIPE_DQ_TILE;
  return ((p->M + 63) / 64) * ((p->N + 63) / 64);
}

static void encode_dqmm(encoder* e, const rlx_step* s) {
  const rlx_dqmm_params* p = &s->p.dqmm;
  const rlx_quant_info* q = &rlx_quant_table[p->scheme];
  int x = RLXVK_X;
  put(e, x + DQ_M, p->M);
  put(e, x + DQ_N, p->N);
  put(e, x + DQ_K, p->K);
  put(e, x + DQ_ROW_BYTES, p->row_bytes);
  put(e, x + DQ_SCHEME, p->scheme);
  put(e, x + DQ_GROUP, p->group);
  put(e, x + DQ_HAS_SCALE, p->has_scale);
  put(e, x + DQ_HAS_AUX, p->has_aux);
  put(e, x + DQ_RUNS, (p->K + 15) / 16);
  put(e, x + DQ_TILES_N, (p->N + 63) / 64);
  put(e, x + DQ_BLOCK, q->block);
  put(e, x + DQ_BLOCK_BYTES, q->block_bytes);
  /* 32-bit element indices of x and y, byte addresses of W's words */
  int64_t xn = p->M * (p->transposed ? p->N : p->K), yn = p->M * (p->transposed ? p->K : p->N);
  if (p->group < 1 || xn > INT32_MAX || yn > INT32_MAX || s->in[1].offset % 4 != 0 ||
      (uint64_t)s->in[1].offset + (uint64_t)(p->N * p->row_bytes) > UINT32_MAX)
    e->ok = 0;
}

/* ------------------------------------------------------------ grouped dequant
 *
 * DequantGroupedMatMul (quantized experts): grouped_dequant.comp in two
 * builds, a workgroup per output element for up to DQ_GEMV_MAXM rows
 * (decode) and 64 x 64 tiles of y above that; both roles. Float experts
 * keep grouped_matmul.comp (the kind's generic pipe). */
static int64_t gqmm_plan(const rlx_step* s, int* per_group, rlx_vk_pipe* pipe) {
  const rlx_gmm_params* p = &s->p.gmm;
  *per_group = 1;
  if (p->M <= RLX_VK_DQ_GEMV_MAXM) {
    *pipe = RLX_VK_PIPE_GQ_GEMV;
    return p->M * p->N;
  }
  *pipe = RLX_VK_PIPE_GQ_TILE;
  return ((p->M + 63) / 64) * ((p->N + 63) / 64);
}

/* The DequantMatMul words quant.glsl reads (a stored row of cols
 * elements), then the grouped geometry. The shader indexes x, y, scales
 * with 32-bit element indices and W's bytes with 32-bit addresses. */
static void encode_gqmm(encoder* e, const rlx_step* s) {
  const rlx_gmm_params* p = &s->p.gmm;
  int x = RLXVK_X;
  int64_t rows, cols;
  if (!rlx_shader_gqmm_geometry(p, s->in[1].offset, &rows, &cols)) {
    e->ok = 0;
    return;
  }
  const rlx_quant_info* q = &rlx_quant_table[p->scheme];
  put(e, x + DQ_K, cols);
  put(e, x + DQ_ROW_BYTES, p->row_bytes);
  put(e, x + DQ_SCHEME, p->scheme);
  put(e, x + DQ_GROUP, p->group);
  put(e, x + DQ_HAS_SCALE, p->has_scale);
  put(e, x + DQ_HAS_AUX, p->has_aux);
  put(e, x + DQ_RUNS, (cols + 15) / 16);
  put(e, x + DQ_BLOCK, q->block);
  put(e, x + DQ_BLOCK_BYTES, q->block_bytes);
  put(e, x + GQ_M, p->M);
  put(e, x + GQ_N, p->N);
  put(e, x + GQ_K, p->K);
  put(e, x + GQ_E, p->E);
  put(e, x + GQ_XREP, p->x_rep);
  put(e, x + GQ_WT, p->wt);
  put(e, x + GQ_TILES_N, (p->N + 63) / 64);
}

/* Generic pipe per kernel kind (RLX_VK_KIND_* rows in vk_internal.h;
 * RLX_VK_PIPE_COUNT: none, the step goes to the host fallback). */
static const rlx_vk_pipe k_kind_pipe[RLX_K_COUNT] = {
#define RLX_KERNEL(id, name, params, meaning) [RLX_K_##id] = RLX_VK_KIND_##id,
#include "backends/kernels.def"
#undef RLX_KERNEL
};

/* The step's pipeline and work items. Work items come from the shared
 * lowering (step->work): one invocation each (64 per workgroup) or one
 * workgroup each; only matmul picks its own grid, since each of its
 * kernels tiles the output its own way. -1: no kernel for this kind. */
static int64_t work_items(const rlx_step* s, int* per_group, rlx_vk_pipe* pipe) {
  if ((unsigned)s->kernel >= RLX_K_COUNT || k_kind_pipe[s->kernel] == RLX_VK_PIPE_COUNT) return -1;
  *pipe = k_kind_pipe[s->kernel];
  if (s->kernel == RLX_K_MATMUL) {
    *per_group = 1;
    return matmul_plan(s, pipe);
  }
  if (s->kernel == RLX_K_CONV) return conv_plan(s, per_group, pipe);
  if (s->kernel == RLX_K_DEQUANT_MATMUL) return dqmm_plan(s, per_group, pipe);
  if (s->kernel == RLX_K_GROUPED_MATMUL && s->p.gmm.scheme >= 0)
    return gqmm_plan(s, per_group, pipe);
  if (s->work.unit == RLX_WORK_NONE) return -1;
  *per_group = s->work.unit == RLX_WORK_GROUP ? 1 : 64;
  return s->work.items;
}

static void encode_matmul(encoder* e, const rlx_matmul_params* p) {
  int x = RLXVK_X;
  put(e, x + MM_M, p->M);
  put(e, x + MM_N, p->N);
  put(e, x + MM_K, p->K);
  put(e, x + MM_BATCH, p->batch);
  put(e, x + MM_BRANK, p->batch_rank);
  for (int32_t d = 0; d < p->batch_rank && d < RLX_MAX_RANK; d++) {
    put(e, x + MM_BSHAPE + d, p->batch_shape[d]);
    put(e, x + MM_ABS + d, p->a_bstride[d]);
    put(e, x + MM_BBS + d, p->b_bstride[d]);
    put(e, x + MM_CBS + d, p->c_bstride[d]);
  }
  put(e, x + MM_ARS, p->a_rs);
  put(e, x + MM_ACS, p->a_cs);
  put(e, x + MM_BRS, p->b_rs);
  put(e, x + MM_BCS, p->b_cs);
  put(e, x + MM_CRS, p->c_rs);
  put(e, x + MM_HAS_BIAS, p->has_bias);
  put(e, x + MM_ACT, p->act);
}

/* The shaders index x, w and y with 32-bit element indices. */
static int conv_fits(const rlx_step* s) {
  for (int32_t i = 0; i < 4; i++)
    if (s->in[i].rank >= 0 && rlx_view_numel(&s->in[i]) > INT32_MAX) return 0;
  return rlx_view_numel(&s->out[0]) <= INT32_MAX;
}

static void encode_conv(encoder* e, const rlx_step* s) {
  const rlx_conv_params* p = &s->p.conv;
  int x = RLXVK_X;
  int64_t taps = p->kernel[0] * p->kernel[1] * p->kernel[2];
  int64_t cg = p->groups > 0 ? p->C / p->groups : 0, ocg = p->groups > 0 ? p->OC / p->groups : 0;
  const int64_t v[] = {p->N, p->C, p->OC, p->groups, p->layout == RLX_CONV_CHANNELS_LAST, p->act,
                       p->has_bias, p->has_residual};
  for (int i = 0; i < (int)(sizeof v / sizeof v[0]); i++) put(e, x + CV_N + i, v[i]);
  for (int d = 0; d < 3; d++) {
    put(e, x + CV_IN + d, p->in[d]);
    put(e, x + CV_OUT + d, p->out[d]);
    put(e, x + CV_KER + d, p->kernel[d]);
    put(e, x + CV_STRIDE + d, p->stride[d]);
    put(e, x + CV_PAD + d, p->pad[d]);
    put(e, x + CV_DIL + d, p->dilation[d]);
  }
  put(e, x + CV_CG, cg);
  put(e, x + CV_OCG, ocg);
  put(e, x + CV_TAPS, taps);
  put(e, x + CV_M, p->N * p->out[0] * p->out[1] * p->out[2]);
  put(e, x + CV_K, cg * taps);
  /* the shaders divide by these */
  if (cg <= 0 || ocg <= 0 || taps <= 0 || p->n_spatial < 1 || p->n_spatial > 3 || !conv_fits(s))
    e->ok = 0;
  for (int d = 0; d < 3; d++)
    if (p->stride[d] <= 0 || p->out[d] <= 0 || p->in[d] <= 0) e->ok = 0;
}

static void encode_attention(encoder* e, const rlx_attention_params* p) {
  int x = RLXVK_X;
  const int64_t v[] = {p->B,    p->H,    p->Hkv,  p->Sq,   p->Sk,   p->D,    p->Dv,
                       p->q_sb, p->q_ss, p->q_sh, p->k_sb, p->k_ss, p->k_sh, p->v_sb,
                       p->v_ss, p->v_sh, p->o_sb, p->o_ss, p->o_sh, p->m_sb, p->m_sh,
                       p->m_sq, p->m_sk, p->mask, p->window};
  for (int i = 0; i < (int)(sizeof v / sizeof v[0]); i++) put(e, x + i, v[i]);
  put_float(e, x + AT_SCALE, p->scale);
  put_float(e, x + AT_SOFTCAP, p->softcap);
  /* The shader keeps one query and Dv/64 accumulators per invocation. */
  if (p->D > 256 || p->Dv > 256 || p->Hkv <= 0 || p->H % p->Hkv != 0) e->ok = 0;
}

/* The forward's words, d_out's strides and the phase's output strides. The
 * FULL phase (three outputs) has no kernel: the host runs it. */
static void encode_attention_bwd(encoder* e, const rlx_step* s) {
  const rlx_attention_bwd_params* p = &s->p.attn_bwd;
  encode_attention(e, &p->a);
  int x = RLXVK_X;
  put(e, x + AB_DO, p->do_sb);
  put(e, x + AB_DO + 1, p->do_ss);
  put(e, x + AB_DO + 2, p->do_sh);
  const int64_t* g = s->op == RLX_ATTN_BWD_DQ   ? &p->dq_sb
                     : s->op == RLX_ATTN_BWD_DK ? &p->dk_sb
                                                : &p->dv_sb;
  for (int i = 0; i < 3; i++) put(e, x + AB_G + i, g[i]);
  if (s->op == RLX_ATTN_BWD_FULL || s->n_out != 1) e->ok = 0;
}

static void encode_xent(encoder* e, const rlx_step* s) {
  const rlx_xent_params* p = &s->p.xent;
  int x = RLXVK_X;
  put(e, x + XE_ROWS, p->rows);
  put(e, x + XE_VOCAB, p->vocab);
  e->w[x + XE_IGNORE_LO] = (int32_t)(uint32_t)((uint64_t)p->ignore_index & 0xffffffffu);
  e->w[x + XE_IGNORE_HI] = (int32_t)(uint32_t)((uint64_t)p->ignore_index >> 32);
  put_float(e, x + XE_LS, p->label_smoothing);
  if (p->vocab < 1) e->ok = 0; /* the rows divide by it */
}

static void encode_opt_update(encoder* e, const rlx_step* s, uint64_t arena_bytes) {
  const rlx_opt_params* p = &s->p.opt;
  int x = RLXVK_X;
  put(e, x + OU_N, p->n);
  const float f[] = {p->momentum, p->dampening, p->weight_decay, p->beta1, p->beta2, p->eps};
  for (int i = 0; i < 6; i++) put_float(e, x + OU_MOMENTUM + i, f[i]);
  put(e, x + OU_NESTEROV, p->nesterov);
  put(e, x + OU_HAS_BUF, p->has_buf);
  put(e, x + OU_DECOUPLED, p->decoupled);
  if (s->n_out > 2) { /* the record's view slots hold two outputs */
    const rlx_view* v = &s->out[2];
    if (v->offset > arena_bytes || v->offset > UINT32_MAX) e->ok = 0;
    e->w[x + OU_OUT2_OFF] = (int32_t)(uint32_t)v->offset;
    put(e, x + OU_OUT2_DT, v->dtype);
  }
}

static void encode_kind(encoder* e, const rlx_step* s, uint64_t arena_bytes) {
  int x = RLXVK_X;
  switch (s->kernel) {
    case RLX_K_MATMUL: encode_matmul(e, &s->p.mm); break;
    case RLX_K_REDUCE:
      put(e, x + RD_NKEEP, s->p.reduce.n_keep);
      put(e, x + RD_NRED, s->p.reduce.n_red);
      put(e, x + RD_OUTER, s->p.reduce.outer);
      put(e, x + RD_INNER, s->p.reduce.inner);
      break;
    case RLX_K_ARG_REDUCE: case RLX_K_SOFTMAX: case RLX_K_CUMSUM: case RLX_K_TOPK:
    case RLX_K_SOFTMAX_BWD:
      put(e, x + RW_OUTER, s->p.rowop.row.outer);
      put(e, x + RW_N, s->p.rowop.row.n);
      put(e, x + RW_INNER, s->p.rowop.row.inner);
      put(e, x + RW_EXCLUSIVE, s->p.rowop.exclusive);
      put(e, x + RW_REVERSE, s->p.rowop.reverse);
      put(e, x + RW_K, s->p.rowop.k);
      put(e, x + RW_LARGEST, s->p.rowop.largest);
      /* the row kernels divide by n and inner */
      if (s->p.rowop.row.n <= 0 || s->p.rowop.row.inner <= 0) e->ok = 0;
      break;
    case RLX_K_XENT: encode_xent(e, s); break;
    case RLX_K_OPT_UPDATE: encode_opt_update(e, s, arena_bytes); break;
    case RLX_K_GATHER_BACKWARD:
      /* the kernel divides by axis_len; then the gather words */
      if (s->p.gather.axis_len < 1 || s->p.gather.inner < 1) e->ok = 0;
      /* fall through */
    case RLX_K_GATHER:
      put(e, x + GA_OUTER, s->p.gather.outer);
      put(e, x + GA_AXIS_LEN, s->p.gather.axis_len);
      put(e, x + GA_INNER, s->p.gather.inner);
      put(e, x + GA_NIDX, s->p.gather.n_idx);
      break;
    case RLX_K_GROUPED_MATMUL:
      if (s->p.gmm.scheme >= 0) {
        encode_gqmm(e, s);
        break;
      }
      put(e, x + GM_N, s->p.gmm.N);
      put(e, x + GM_K, s->p.gmm.K);
      put(e, x + GM_E, s->p.gmm.E);
      put(e, x + GM_XREP, s->p.gmm.x_rep);
      put(e, x + GM_WT, s->p.gmm.wt);
      /* the kernel divides by N and x_rep */
      if (s->p.gmm.N < 1 || s->p.gmm.x_rep < 1) e->ok = 0;
      break;
    case RLX_K_SCATTER_ADD: {
      const rlx_scatter_params* p = &s->p.scatter;
      put(e, x + SC_RANK, p->rank);
      put(e, x + SC_AXIS, p->axis);
      for (int32_t d = 0; d < p->rank && d < RLX_MAX_RANK; d++) {
        put(e, x + SC_SHAPE + d, p->shape[d]);
        put(e, x + SC_OSTRIDE + d, p->out_stride[d]);
      }
      put(e, x + SC_AXIS_LEN, p->axis_len);
      break;
    }
    case RLX_K_NORM: case RLX_K_NORM_BWD: {
      const rlx_norm_params* p = &s->p.norm;
      put(e, x + NM_ROWS, p->rows);
      put(e, x + NM_COLS, p->cols);
      put_float(e, x + NM_EPS, p->eps);
      put(e, x + NM_RMS, p->rms);
      put(e, x + NM_HAS_RES, p->has_residual);
      put(e, x + NM_HAS_BIAS, p->has_bias);
      put(e, x + NM_HAS_GAMMA, p->has_gamma);
      put(e, x + NM_HAS_BETA, p->has_beta);
      put(e, x + NM_WRITES_SUM, p->writes_sum);
      break;
    }
    case RLX_K_ATTENTION: encode_attention(e, &s->p.attn); break;
    case RLX_K_DEQUANT_MATMUL: encode_dqmm(e, s); break;
    case RLX_K_ATTENTION_BWD: encode_attention_bwd(e, s); break;
    case RLX_K_CONV: encode_conv(e, s); break;
    case RLX_K_ROPE: {
      const rlx_rope_params* p = &s->p.rope;
      const int64_t v[] = {p->B,    p->S,    p->H,    p->D,     p->x_sb, p->x_ss, p->x_sh,
                           p->o_sb, p->o_ss, p->o_sh, p->n_rot, p->style, p->per_token,
                           p->inverse};
      for (int i = 0; i < (int)(sizeof v / sizeof v[0]); i++) put(e, x + i, v[i]);
      break;
    }
    case RLX_K_POOL:
    case RLX_K_POOL_BACKWARD: {
      const rlx_pool_params* p = &s->p.pool;
      put(e, x + PL_RANK, p->rank);
      put(e, x + PL_CIP, p->count_include_pad);
      put_float(e, x + PL_VALUE, p->value);
      put(e, x + PL_TAPS, p->taps);
      put(e, x + PL_INDEX_OUT, p->index_out);
      for (int32_t d = 0; d < p->rank && d < RLX_MAX_RANK; d++) {
        put(e, x + PL_KERNEL + d, p->kernel[d]);
        put(e, x + PL_STRIDE + d, p->stride[d]);
        put(e, x + PL_DIL + d, p->dilation[d]);
        put(e, x + PL_PAD + d, p->pad[d]);
        put(e, x + PL_PAD_END + d, p->pad_end[d]);
      }
      break;
    }
    case RLX_K_RESIZE: {
      const rlx_resize_params* p = &s->p.resize;
      put(e, x + RZ_RANK, p->rank);
      put(e, x + RZ_NDIMS, p->n_dims);
      put(e, x + RZ_NEAREST, p->nearest);
      put(e, x + RZ_EXCL, p->exclude_outside);
      put_float(e, x + RZ_CUBIC_A, p->cubic_a);
      put_float(e, x + RZ_EXTRAP, p->extrapolation);
      put(e, x + RZ_CROP, p->coord == RLX_COORD_TF_CROP_AND_RESIZE);
      for (int32_t i = 0; i < p->n_dims && i < RLX_RESIZE_MAX_DIMS; i++) {
        put(e, x + RZ_DIM + i, p->dim[i]);
        put(e, x + RZ_IN + i, p->in_size[i]);
        put_float(e, x + RZ_COEF_A + i, p->coef_a[i]);
        put_float(e, x + RZ_COEF_B + i, p->coef_b[i]);
      }
      break;
    }
    case RLX_K_SAMPLER: {
      const rlx_sampler_params* p = &s->p.sampler;
      put(e, x + SP_MODE, p->mode);
      put(e, x + SP_PADDING, p->padding);
      put(e, x + SP_ALIGN, p->align_corners);
      put(e, x + SP_RATIO, p->sampling_ratio);
      put_float(e, x + SP_SCALE, p->spatial_scale);
      break;
    }
    case RLX_K_GROUP_NORM: {
      const rlx_gnorm_params* p = &s->p.gnorm;
      put(e, x + GN_N, p->n);
      put(e, x + GN_INNER, p->inner);
      put(e, x + GN_GROUPS, p->groups);
      put(e, x + GN_CDIV, p->cdiv);
      put_float(e, x + GN_EPS, p->eps);
      put(e, x + GN_HAS_GAMMA, p->has_gamma);
      put(e, x + GN_HAS_BETA, p->has_beta);
      put(e, x + GN_HAS_STATS, p->has_stats);
      break;
    }
    case RLX_K_SAMPLE: {
      const rlx_sample_params* p = &s->p.sample;
      put(e, x + SM_ROWS, p->rows);
      put(e, x + SM_VOCAB, p->vocab);
      put(e, x + SM_TOPK, p->top_k);
      put_float(e, x + SM_TOPP, p->top_p);
      put_float(e, x + SM_TEMP, p->temperature);
      if (p->vocab < 1) e->ok = 0;
      break;
    }
    default: break;
  }
}

int rlx_vk_encode_step(const rlx_step* s, int32_t index, uint64_t arena_bytes,
                       uint32_t max_groups_x, int32_t* words, rlx_vk_dispatch* out) {
  memset(words, 0, sizeof(int32_t) * RLXVK_REC_WORDS);
  memset(out, 0, sizeof *out);
  if (s->kernel == RLX_K_HOST || rlx_step_computes_in_f64(s)) return 1;
  int per_group;
  int64_t items = work_items(s, &per_group, &out->pipe);
  if (items < 0) return 1;
  encoder e = {words, 1};
  put(&e, RLXVK_KIND, s->kernel);
  put(&e, RLXVK_OP, s->op);
  put(&e, RLXVK_COUNT, items);
  put(&e, RLXVK_STEP, index);
  rlx_view views[RLX_STEP_MAX_IN + RLX_STEP_MAX_OUT];
  int n_views = 0;
  views[n_views++] = s->out[0];
  for (int32_t i = 0; i < s->n_in && i < RLX_STEP_MAX_IN; i++) views[n_views++] = s->in[i];
  if (rlx_kernel_is_elementwise(s->kernel)) rlx_views_coalesce(views, n_views);
  put_view(&e, RLXVK_SLOT_OUT0, &views[0], arena_bytes);
  put_view(&e, RLXVK_SLOT_OUT1, &s->out[1], arena_bytes);
  /* The record has five input slots; a sixth input rides in the out1 slot
   * of a one-output step (AttentionBackward's d_out). */
  const int in_slots = RLXVK_N_SLOTS - RLXVK_SLOT_IN0;
  for (int k = 1; k < n_views && k <= in_slots; k++)
    put_view(&e, RLXVK_SLOT_IN0 + k - 1, &views[k], arena_bytes);
  for (int32_t i = s->n_in; i < in_slots; i++) {
    rlx_view absent;
    memset(&absent, 0, sizeof absent);
    absent.rank = -1;
    put_view(&e, RLXVK_SLOT_IN0 + i, &absent, arena_bytes);
  }
  if (s->n_in > in_slots + 1 || (s->n_in > in_slots && s->n_out > 1)) return 1;
  if (s->n_in > in_slots) put_view(&e, RLXVK_SLOT_OUT1, &s->in[in_slots], arena_bytes);
  encode_kind(&e, s, arena_bytes);
  /* vectorised kernels where the views allow (vk_fast.c) */
  if (rlx_vk_pick_fast(s, views, n_views, words, &items, &per_group, &out->pipe))
    put(&e, RLXVK_COUNT, items);
  if (!e.ok) return 1;
  if (items == 0) return 0; /* nothing to dispatch */
  uint64_t groups = per_group == 1 ? (uint64_t)items : ((uint64_t)items + 63) / 64;
  uint64_t gx = groups < max_groups_x ? groups : max_groups_x;
  uint64_t gy = (groups + gx - 1) / gx;
  if (gy > 65535) return 1;
  out->groups_x = (uint32_t)gx;
  out->groups_y = (uint32_t)gy;
  return 0;
}

/* Node-level answer for the dispatch report: the shader backends' shared
 * rule (common.h: no f64 arithmetic), attention heads wider than the kernel
 * holds go to the host fallback, and RLX_VK_HOST_OPS="softmax,matmul"
 * forces ops there (to test it and to bisect a suspect kernel). */
/* i16 u16 u32 u64 and float8 through the GLSL load/store of common.glsl:
 * casts and data movement, which only convert or copy. Integer arithmetic
 * on them stays on the host (u64 order would need unsigned compares), and
 * so does anything with f64: f64 -> float8 through f32 would round twice,
 * and f64 <-> integer is not exact in the shaders (rlx_shader_supports_node). */
static int vk_newer_dtype_native(const rlx_graph* g, const rlx_node* n) {
  switch (n->op) {
    case RLX_OP_CAST: case RLX_OP_RESHAPE: case RLX_OP_STOP_GRADIENT: case RLX_OP_TRANSPOSE:
    case RLX_OP_NARROW: case RLX_OP_CONCAT: case RLX_OP_EXPAND: case RLX_OP_REVERSE:
    case RLX_OP_GATHER: case RLX_OP_WHERE:
      break;
    default: return 0;
  }
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] != RLX_NONE && rlx_tensor_type(g, n->in[i])->dtype == RLX_F64) return 0;
  for (int32_t i = 0; i < n->n_out; i++)
    if (rlx_tensor_type(g, n->out[i])->dtype == RLX_F64) return 0;
  return 1;
}

static int conv_dtype(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16; }

/* Conv and ConvTranspose run natively (conv*.comp) with 1-3 spatial dims
 * and float tensors the shaders load exactly (f32, f16, bf16); anything
 * else, and every conv under RLX_VK_CONV=decompose, is rewritten by
 * decompose.c into Pad, Im2Col and MatMul.
 *
 * By default (RLX_VK_CONV unset) a dense forward conv (groups 1) is
 * decomposed too: on an H200 the decomposition's tuned matmul beats the
 * implicit GEMM (conv2d 3x3 B32 C256 56x56: 8.0 ms vs 20.0 f32, 4.9 vs 8.8
 * f16 on cooperative matrices; ResNet-50 B32: 44.7 vs 80.9 ms), while
 * grouped / depthwise convs and ConvTranspose, which decompose into many
 * small matmuls or zero-filled inputs, stay native. RLX_VK_CONV=native
 * (or direct / scalar) runs every conv natively. */
static int vk_conv_native(const rlx_graph* g, const rlx_node* n) {
  if (rlx_env_is(RLX_ENV_VK_CONV, "decompose")) return 0;
  const char* mode = rlx_env_str(RLX_ENV_VK_CONV);
  if ((!mode || !mode[0]) && n->op == RLX_OP_CONV && n->a.groups <= 1) return 0;
  /* conv.glsl indexes weights [OC, C/g, k...]; the layout pass's OHWI
   * weights go to decompose.c (Im2Col + MatMul, no weight transpose). */
  if (n->a.conv_layout == RLX_CONV_CHANNELS_LAST_OHWI) return 0;
  if (n->a.strides.n < 1 || n->a.strides.n > 3) return 0;
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] != RLX_NONE && !conv_dtype(rlx_tensor_type(g, n->in[i])->dtype)) return 0;
  return conv_dtype(rlx_tensor_type(g, n->out[0])->dtype);
}

int rlx_vk_supports_node(const rlx_graph* g, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  if (rlx_env_list_has(RLX_ENV_VK_HOST_OPS, rlx_op_table[n->op].text)) return 0;
  if (n->op == RLX_OP_ELEMENTWISE_REGION) return 0; /* no kernel yet: decompose expands it */
  if (rlx_shader_node_has_newer_dtype(g, ni)) return vk_newer_dtype_native(g, n);
  if (n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_TRANSPOSE) return vk_conv_native(g, n);
  if (!rlx_shader_supports_node(g, ni)) return 0;
  if (n->op == RLX_OP_ATTENTION || n->op == RLX_OP_ATTENTION_BACKWARD) {
    const rlx_type* v = rlx_tensor_type(g, n->in[2]);
    int64_t dv = v->rank > 0 ? v->shape[v->rank - 1] : 0;
    if (n->a.head_dim > 256 || dv > 256) return 0;
  }
  return 1;
}
#else
typedef int rlx_vk_params_unused;
#endif

_Static_assert(AB_STATS == RLX_ATTN_BWD_STATS && AB_DV == RLX_ATTN_BWD_DV &&
                   AB_DK == RLX_ATTN_BWD_DK && AB_DQ == RLX_ATTN_BWD_DQ,
               "attention_bwd.comp's phase codes out of sync with lower.h");
_Static_assert(XE_OP_ROWS == RLX_XENT_ROWS && XE_OP_MEAN == RLX_XENT_MEAN &&
                   XE_OP_BACKWARD == RLX_XENT_BACKWARD && OU_OP_ADAM == RLX_OPT_ADAM &&
                   OU_H_LR == RLX_HYPER_LR && OU_H_GRAD_SCALE == RLX_HYPER_GRAD_SCALE &&
                   OU_H_STEP == RLX_HYPER_STEP && OU_H_APPLY == RLX_HYPER_APPLY,
               "xent.comp / opt_update.comp codes out of sync with lower.h / rlx.h");
_Static_assert(PL_MAX == RLX_WIN_MAX && PL_AVG == RLX_WIN_AVG &&
                   PL_PAD_CONSTANT == RLX_WIN_PAD_CONSTANT &&
                   PL_PAD_REFLECT == RLX_WIN_PAD_REFLECT && PL_PAD_EDGE == RLX_WIN_PAD_EDGE &&
                   PL_PAD_WRAP == RLX_WIN_PAD_WRAP,
               "pool.comp's mode codes out of sync with RLX_WIN_*");
_Static_assert(RZ_MODE_NEAREST == RLX_RESIZE_NEAREST && RZ_MODE_LINEAR == RLX_RESIZE_LINEAR &&
                   RZ_ROUND_PREFER_FLOOR == RLX_NEAREST_ROUND_PREFER_FLOOR &&
                   RZ_ROUND_PREFER_CEIL == RLX_NEAREST_ROUND_PREFER_CEIL &&
                   RZ_FLOOR == RLX_NEAREST_FLOOR,
               "resize.comp's mode codes out of sync with rlx.h");
_Static_assert(SP_GRID == RLX_SAMPLER_GRID && SP_ROI_ALIGN == RLX_SAMPLER_ROI_ALIGN &&
                   SP_NEAREST == RLX_RESIZE_NEAREST && SP_CUBIC == RLX_RESIZE_CUBIC &&
                   SP_ZEROS == RLX_GRID_ZEROS && SP_REFLECTION == RLX_GRID_REFLECTION &&
                   SP_POOL_MAX == RLX_POOL_MAX,
               "sampler.comp's codes out of sync with rlx.h / lower.h");
