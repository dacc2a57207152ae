/* WebGPU parameter-record layout: the words the host encoder (wg_encode.c)
 * writes and the WGSL kernels read. A header of its own (no Dawn types) so
 * that the build-time generator of the WGSL prelude
 * (scripts/gen_shader_constants.c) compiles it: the kernels' constants are
 * these values, and enum codes are the C enums themselves. */
#ifndef RLX_BACKENDS_WEBGPU_WG_LAYOUT_H
#define RLX_BACKENDS_WEBGPU_WG_LAYOUT_H

#include "passes/lower.h"
#include "rlx.h"

/* One step's parameter record: RLX_WG_REC_WORDS u32 words at a 1 KiB-aligned
 * offset of the parameter buffer, bound with a dynamic offset. The same names
 * become WGSL constants (the prelude generated at build time), so host and
 * kernels cannot disagree. Views: [offset bytes, dtype, rank, shape[8],
 * stride[8]]; slots 0 out0, 1 out1, 2.. in0..in4. Kind words start at R_X. */
#define RLX_WG_REC_WORDS 256
#define RLX_WG_VIEW_WORDS 19

#define RLX_WG_U32_CONSTS(X)                                                                    \
  X(R_KIND, 0) X(R_OP, 1) X(R_COUNT, 2) X(R_STEP, 3) X(R_GROUPS_X, 4) X(R_INF, 5) X(R_NAN, 6)   \
  X(R_VIEW0, 8) X(R_VIEW_WORDS, RLX_WG_VIEW_WORDS) X(R_X, 144)                                  \
  X(DT_F32, RLX_F32) X(DT_F16, RLX_F16) X(DT_BF16, RLX_BF16) X(DT_F64, RLX_F64)                 \
  X(DT_I8, RLX_I8) X(DT_U8, RLX_U8) X(DT_I32, RLX_I32) X(DT_I64, RLX_I64)                       \
  X(DT_BOOL, RLX_BOOL)                                                                          \
  X(K_COPY, RLX_K_COPY) X(K_BINARY, RLX_K_BINARY) X(K_COMPARE, RLX_K_COMPARE)                   \
  X(K_WHERE, RLX_K_WHERE) X(K_UNARY, RLX_K_UNARY)                                               \
  X(RED_SUM, RLX_RED_SUM) X(RED_MEAN, RLX_RED_MEAN) X(RED_MAX, RLX_RED_MAX)                     \
  X(RED_MIN, RLX_RED_MIN) X(RED_PROD, RLX_RED_PROD)                                             \
  X(RUN_SEED_LO, 0) X(RUN_SEED_HI, 1) X(RUN_ERR, 2) X(RUN_ERR_STEP, 3) X(RUN_ERR_LO, 4)         \
  X(RUN_ERR_HI, 5) X(RUN_ERR_LEN, 6)                                                            \
  X(MM_M, 0) X(MM_N, 1) X(MM_K, 2) X(MM_BATCH, 3) X(MM_BRANK, 4) X(MM_BSHAPE, 5) X(MM_ABS, 13)  \
  X(MM_BBS, 21) X(MM_CBS, 29) X(MM_ARS, 37) X(MM_ACS, 38) X(MM_BRS, 39) X(MM_BCS, 40)           \
  X(MM_CRS, 41) X(MM_HAS_BIAS, 42) X(MM_ACT, 43) X(MM_FAST_A, 44) X(MM_FAST_B, 45)              \
  X(MM_PAIR_OUT, 46)                                                                            \
  X(EV_MODE, 0) X(EV_PERIOD, 5) X(EV_VECS, 10)                                                  \
  X(RD_NKEEP, 0) X(RD_NRED, 1) X(RD_OUTER, 2) X(RD_INNER, 3)                                    \
  X(RW_OUTER, 0) X(RW_N, 1) X(RW_INNER, 2) X(RW_EXCLUSIVE, 3) X(RW_REVERSE, 4) X(RW_K, 5)       \
  X(RW_LARGEST, 6)                                                                              \
  X(GA_OUTER, 0) X(GA_AXIS_LEN, 1) X(GA_INNER, 2) X(GA_NIDX, 3)                                 \
  X(SC_RANK, 0) X(SC_AXIS, 1) X(SC_SHAPE, 2) X(SC_OSTRIDE, 10) X(SC_AXIS_LEN, 18)               \
  X(NM_ROWS, 0) X(NM_COLS, 1) X(NM_EPS, 2) X(NM_RMS, 3) X(NM_HAS_RES, 4) X(NM_HAS_BIAS, 5)      \
  X(NM_HAS_GAMMA, 6) X(NM_HAS_BETA, 7) X(NM_WRITES_SUM, 8)                                      \
  X(AT_B, 0) X(AT_H, 1) X(AT_HKV, 2) X(AT_SQ, 3) X(AT_SK, 4) X(AT_D, 5) X(AT_DV, 6) X(AT_Q, 7)  \
  X(AT_K, 10) X(AT_V, 13) X(AT_O, 16) X(AT_M, 19) X(AT_MASK, 23) X(AT_WINDOW, 24)               \
  X(AT_SCALE, 25) X(AT_SOFTCAP, 26) X(AT_PAIR_OUT, 27) X(AT_FAST_KV, 28)                        \
  X(AB_DO, 32) X(AB_G, 35) X(AB_STATS, RLX_ATTN_BWD_STATS) X(AB_DV, RLX_ATTN_BWD_DV)            \
  X(AB_DK, RLX_ATTN_BWD_DK) X(AB_DQ, RLX_ATTN_BWD_DQ)                                          \
  X(RP_B, 0) X(RP_S, 1) X(RP_H, 2) X(RP_D, 3) X(RP_X, 4) X(RP_O, 7) X(RP_NROT, 10)              \
  X(RP_STYLE, 11) X(RP_PER_TOKEN, 12) X(RP_INVERSE, 13)                                         \
  X(SM_ROWS, 0) X(SM_VOCAB, 1) X(SM_TOPK, 2) X(SM_TOPP, 3) X(SM_TEMP, 4)                      \
  X(PL_RANK, 0) X(PL_CIP, 1) X(PL_VALUE, 2) X(PL_TAPS, 3) X(PL_KERNEL, 4) X(PL_STRIDE, 12)      \
  X(PL_DIL, 20) X(PL_PAD, 28) X(PL_PAD_END, 36) X(PL_INDEX_OUT, 44) X(PL_MAX, RLX_WIN_MAX) X(PL_AVG, RLX_WIN_AVG)   \
  X(PL_PAD_CONSTANT, RLX_WIN_PAD_CONSTANT) X(PL_PAD_REFLECT, RLX_WIN_PAD_REFLECT)               \
  X(PL_PAD_EDGE, RLX_WIN_PAD_EDGE) X(PL_PAD_WRAP, RLX_WIN_PAD_WRAP)                            \
  X(RZ_RANK, 0) X(RZ_NDIMS, 1) X(RZ_NEAREST, 2) X(RZ_EXCL, 3) X(RZ_CUBIC_A, 4) X(RZ_EXTRAP, 5)  \
  X(RZ_CROP, 6) X(RZ_DIM, 8) X(RZ_IN, 11) X(RZ_COEF_A, 14) X(RZ_COEF_B, 17)                      \
  X(RZ_MODE_NEAREST, RLX_RESIZE_NEAREST) X(RZ_MODE_LINEAR, RLX_RESIZE_LINEAR)                    \
  X(RZ_ROUND_PREFER_FLOOR, RLX_NEAREST_ROUND_PREFER_FLOOR)                                      \
  X(RZ_ROUND_PREFER_CEIL, RLX_NEAREST_ROUND_PREFER_CEIL) X(RZ_FLOOR, RLX_NEAREST_FLOOR)         \
  X(SP_MODE, 0) X(SP_PADDING, 1) X(SP_ALIGN, 2) X(SP_RATIO, 3) X(SP_SCALE, 4)                   \
  X(SP_ROI_ALIGN, RLX_SAMPLER_ROI_ALIGN)                                                        \
  X(GN_N, 0) X(GN_INNER, 1) X(GN_GROUPS, 2) X(GN_CDIV, 3) X(GN_EPS, 4) X(GN_HAS_GAMMA, 5)        \
  X(GN_HAS_BETA, 6) X(GN_HAS_STATS, 7)                                                          \
  X(CV_N, 0) X(CV_C, 1) X(CV_OC, 2) X(CV_GROUPS, 3) X(CV_LAYOUT, 4) X(CV_ACT, 5)                \
  X(CV_HAS_BIAS, 6) X(CV_HAS_RES, 7) X(CV_TAPS, 8) X(CV_M, 9) X(CV_K, 10) X(CV_IN, 11)          \
  X(CV_OUT, 14) X(CV_KERNEL, 17) X(CV_STRIDE, 20) X(CV_PAD, 23) X(CV_DIL, 26)                   \
  X(CV_TILES_M, 29) X(CV_TILES_N, 30) X(CV_LAST, RLX_CONV_CHANNELS_LAST)                        \
  X(CV_TRANSPOSE, RLX_CONV_TRANSPOSE)                                                            \
  X(XE_ROWS, 0) X(XE_VOCAB, 1) X(XE_IGNORE_LO, 2) X(XE_IGNORE_HI, 3) X(XE_LS, 4)                \
  X(XE_OP_MEAN, RLX_XENT_MEAN) X(XE_OP_BACKWARD, RLX_XENT_BACKWARD)                             \
  X(OU_N, 0) X(OU_MOMENTUM, 1) X(OU_DAMPENING, 2) X(OU_WD, 3) X(OU_BETA1, 4) X(OU_BETA2, 5)     \
  X(OU_EPS, 6) X(OU_NESTEROV, 7) X(OU_HAS_BUF, 8) X(OU_DECOUPLED, 9) X(OU_OUT2_OFF, 10)         \
  X(OU_OUT2_DT, 11) X(OU_OP_ADAM, RLX_OPT_ADAM) X(OU_H_LR, RLX_HYPER_LR)                        \
  X(OU_H_GRAD_SCALE, RLX_HYPER_GRAD_SCALE) X(OU_H_STEP, RLX_HYPER_STEP)                         \
  X(OU_H_APPLY, RLX_HYPER_APPLY)                                                                \
  X(GM_N, 0) X(GM_K, 1) X(GM_E, 2) X(GM_XREP, 3) X(GM_WT, 4)                                               \
  /* DequantMatMul (dequant.wgsl): runs of 16 elements per W row, tiles along N, */            \
  /* rlx_quant_table's block and its bytes */                                                  \
  X(DQ_M, 0) X(DQ_N, 1) X(DQ_K, 2) X(DQ_ROW_BYTES, 3) X(DQ_SCHEME, 4) X(DQ_GROUP, 5)            \
  X(DQ_HAS_SCALE, 6) X(DQ_HAS_AUX, 7) X(DQ_RUNS, 8) X(DQ_TILES_N, 9) X(DQ_BLOCK, 10)            \
  X(DQ_BLOCK_BYTES, 11)                                                                         \
  /* DequantGroupedMatMul (grouped_dequant.wgsl): the DQ_* words quant.wgsl reads */           \
  /* (DQ_K = elements per stored row), then the grouped geometry */                            \
  X(GQ_M, 12) X(GQ_N, 13) X(GQ_K, 14) X(GQ_E, 15) X(GQ_XREP, 16) X(GQ_WT, 17)                   \
  X(GQ_TILES_N, 18)

/* Constants compared with signed record words. */
#define RLX_WG_I32_CONSTS(X)                                                                    \
  X(MASK_CAUSAL, RLX_MASK_CAUSAL) X(MASK_CUSTOM, RLX_MASK_CUSTOM)                               \
  X(MASK_SLIDING, RLX_MASK_SLIDING) X(MASK_BIAS, RLX_MASK_BIAS) X(ROPE_GPTJ, RLX_ROPE_GPTJ)    \
  X(SP_NEAREST, RLX_RESIZE_NEAREST) X(SP_CUBIC, RLX_RESIZE_CUBIC) X(SP_ZEROS, RLX_GRID_ZEROS)  \
  X(SP_REFLECTION, RLX_GRID_REFLECTION) X(SP_POOL_MAX, RLX_POOL_MAX)

enum {
#define RLX_WG_ENUM(name, value) WG_##name = (value),
  RLX_WG_U32_CONSTS(RLX_WG_ENUM) RLX_WG_I32_CONSTS(RLX_WG_ENUM)
#undef RLX_WG_ENUM
};

#define RLX_WG_RUN_WORDS 8

#endif
