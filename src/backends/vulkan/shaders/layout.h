/* Layout of one step's record in the parameter buffer, shared by the host
 * encoder (vk_params.c) and every shader (#included by common.glsl), so the
 * two sides cannot disagree. A record is RLXVK_REC_WORDS 32-bit words;
 * the push constant carries the record's first word index.
 *
 * Views: [offset (bytes), dtype, rank, shape[8], stride[8] (elements, signed)].
 * Slots: 0 = out0, 1 = out1, 2.. = in0..in4. Kind-specific words start at
 * RLXVK_X. Only #defines here: this file is also GLSL. */
#ifndef RLXVK_LAYOUT_H
#define RLXVK_LAYOUT_H

#define RLXVK_REC_WORDS 256

#define RLXVK_KIND 0
#define RLXVK_OP 1
#define RLXVK_COUNT 2   /* threads (elementwise) or rows / work items */
#define RLXVK_STEP 3    /* index of the step in its list (error reports) */
#define RLXVK_VIEW0 8
#define RLXVK_VIEW_WORDS 19
#define RLXVK_V_OFFSET 0
#define RLXVK_V_DTYPE 1
#define RLXVK_V_RANK 2
#define RLXVK_V_SHAPE 3
#define RLXVK_V_STRIDE 11
#define RLXVK_SLOT_OUT0 0
#define RLXVK_SLOT_OUT1 1
#define RLXVK_SLOT_IN0 2
#define RLXVK_N_SLOTS 7
#define RLXVK_X 144 /* RLXVK_VIEW0 + 7 * 19 = 141, rounded up */

/* dtype codes and kernel kinds: the C enums themselves (rlx_dtype,
 * rlx_kernel). In GLSL those names come from the generated
 * rlx_constants.glsl, which common.glsl includes before this file. */
#define RLXVK_F32 RLX_F32
#define RLXVK_F16 RLX_F16
#define RLXVK_BF16 RLX_BF16
#define RLXVK_F64 RLX_F64
#define RLXVK_I8 RLX_I8
#define RLXVK_U8 RLX_U8
#define RLXVK_I32 RLX_I32
#define RLXVK_I64 RLX_I64
#define RLXVK_BOOL RLX_BOOL

/* kernel kinds used inside the elementwise and row shaders */
#define RLXVK_K_COPY RLX_K_COPY
#define RLXVK_K_BINARY RLX_K_BINARY
#define RLXVK_K_COMPARE RLX_K_COMPARE
#define RLXVK_K_WHERE RLX_K_WHERE
#define RLXVK_K_UNARY RLX_K_UNARY
#define RLXVK_K_SOFTMAX RLX_K_SOFTMAX /* rows.comp */
#define RLXVK_K_NORM RLX_K_NORM

/* Run buffer (binding 2), 32-bit words, rewritten by the host each run. */
#define RLXVK_RUN_SEED_LO 0
#define RLXVK_RUN_SEED_HI 1
#define RLXVK_RUN_ERR 2       /* 0 = no error; 1 = index out of range */
#define RLXVK_RUN_ERR_STEP 3
#define RLXVK_RUN_ERR_VAL_LO 4
#define RLXVK_RUN_ERR_VAL_HI 5
#define RLXVK_RUN_ERR_LEN 6
#define RLXVK_RUN_WORDS 8

/* Extra words per kind (offsets from RLXVK_X). */
/* matmul */
#define MM_M 0
#define MM_N 1
#define MM_K 2
#define MM_BATCH 3
#define MM_BRANK 4
#define MM_BSHAPE 5
#define MM_ABS 13
#define MM_BBS 21
#define MM_CBS 29
#define MM_ARS 37
#define MM_ACS 38
#define MM_BRS 39
#define MM_BCS 40
#define MM_CRS 41
#define MM_HAS_BIAS 42
#define MM_ACT 43
/* reduce */
#define RD_NKEEP 0
#define RD_NRED 1
#define RD_OUTER 2
#define RD_INNER 3
/* row ops */
#define RW_OUTER 0
#define RW_N 1
#define RW_INNER 2
#define RW_EXCLUSIVE 3
#define RW_REVERSE 4
#define RW_K 5
#define RW_LARGEST 6
/* gather */
#define GA_OUTER 0
#define GA_AXIS_LEN 1
#define GA_INNER 2
#define GA_NIDX 3
/* scatter add */
#define SC_RANK 0
#define SC_AXIS 1
#define SC_SHAPE 2
#define SC_OSTRIDE 10
#define SC_AXIS_LEN 18
/* norm */
#define NM_ROWS 0
#define NM_COLS 1
#define NM_EPS 2 /* float bits */
#define NM_RMS 3
#define NM_HAS_RES 4
#define NM_HAS_BIAS 5
#define NM_HAS_GAMMA 6
#define NM_HAS_BETA 7
#define NM_WRITES_SUM 8
/* attention */
#define AT_B 0
#define AT_H 1
#define AT_HKV 2
#define AT_SQ 3
#define AT_SK 4
#define AT_D 5
#define AT_DV 6
#define AT_Q 7  /* q_sb, q_ss, q_sh */
#define AT_K 10
#define AT_V 13
#define AT_O 16
#define AT_M 19 /* m_sb, m_sh, m_sq, m_sk */
#define AT_MASK 23
#define AT_WINDOW 24
#define AT_SCALE 25   /* float bits */
#define AT_SOFTCAP 26 /* float bits */
/* attention backward: the attention words, then */
#define AB_DO 32 /* d_out strides: sb, ss, sh */
#define AB_G 35  /* strides of the phase's gradient output (dq, dk or dv) */
#define AB_STATS 0 /* phases: RLX_ATTN_BWD_* (lower.h) */
#define AB_DV 1
#define AB_DK 2
#define AB_DQ 3
/* rope */
#define RP_B 0
#define RP_S 1
#define RP_H 2
#define RP_D 3
#define RP_X 4 /* x_sb, x_ss, x_sh */
#define RP_O 7 /* o_sb, o_ss, o_sh */
#define RP_NROT 10
#define RP_STYLE 11
#define RP_PER_TOKEN 12
#define RP_INVERSE 13 /* RopeBackward: sin negated */
/* sample */
#define SM_ROWS 0
#define SM_VOCAB 1
#define SM_TOPK 2
#define SM_TOPP 3 /* float bits */
#define SM_TEMP 4 /* float bits */
/* pool / pad (mode = RLXVK_OP: RLX_WIN_* of src/passes/lower.h) */
#define PL_RANK 0
#define PL_CIP 1   /* count_include_pad */
#define PL_VALUE 2 /* float bits: the constant pad's fill */
#define PL_TAPS 3
#define PL_KERNEL 4 /* per dim (8 each) */
#define PL_STRIDE 12
#define PL_DIL 20
#define PL_PAD 28
#define PL_PAD_END 36
#define PL_INDEX_OUT 44 /* max: write the i64 input index of the maximum */
#define PL_MAX 0
#define PL_AVG 1
#define PL_PAD_CONSTANT 2
#define PL_PAD_REFLECT 3
#define PL_PAD_EDGE 4
#define PL_PAD_WRAP 5
/* resize (mode = RLXVK_OP: rlx_resize_mode; per resized dim i < RZ_NDIMS:
 * the dim, its input size, coordinate = COEF_A * o + COEF_B) */
#define RZ_RANK 0
#define RZ_NDIMS 1
#define RZ_NEAREST 2  /* rlx_resize_nearest */
#define RZ_EXCL 3     /* exclude_outside */
#define RZ_CUBIC_A 4  /* float bits */
#define RZ_EXTRAP 5   /* float bits */
#define RZ_CROP 6     /* tf_crop_and_resize: extrapolate outside [0, in - 1] */
#define RZ_DIM 8      /* per resized dim (3 each) */
#define RZ_IN 11
#define RZ_COEF_A 14  /* float bits */
#define RZ_COEF_B 17  /* float bits */
#define RZ_MODE_NEAREST 0
#define RZ_MODE_LINEAR 1
#define RZ_ROUND_PREFER_FLOOR 0
#define RZ_ROUND_PREFER_CEIL 1
#define RZ_FLOOR 2
/* grid sample / roi align (op = RLXVK_OP: RLX_SAMPLER_*) */
#define SP_MODE 0    /* rlx_resize_mode (grid) or rlx_pool_kind (roi) */
#define SP_PADDING 1 /* rlx_grid_padding */
#define SP_ALIGN 2   /* align_corners (grid) / half_pixel (roi) */
#define SP_RATIO 3   /* sampling_ratio */
#define SP_SCALE 4   /* float bits: spatial_scale */
#define SP_GRID 0
#define SP_ROI_ALIGN 1
#define SP_NEAREST 0
#define SP_CUBIC 2
#define SP_ZEROS 0
#define SP_REFLECTION 2
#define SP_POOL_MAX 0
/* group_norm (rlx_gnorm_params) */
#define GN_N 0
#define GN_INNER 1
#define GN_GROUPS 2
#define GN_CDIV 3
#define GN_EPS 4 /* float bits */
#define GN_HAS_GAMMA 5
#define GN_HAS_BETA 6
#define GN_HAS_STATS 7
/* eltwise_vec (dense elementwise fast path) */
#define EV_N 0      /* elements (raw copies: 32-bit words) */
#define EV_RAW 1    /* 1: same-dtype copy moved as 32-bit words */
#define EV_MODE 2   /* per input (3): EV_DENSE, EV_SCALAR, EV_MOD, EV_DIV */
#define EV_PERIOD 5 /* per input (3): the modulus / divisor of EV_MOD / EV_DIV */
#define EV_DENSE 0
#define EV_SCALAR 1
#define EV_MOD 2    /* input index = i % period (broadcast over leading dims) */
#define EV_DIV 3    /* input index = i / period (broadcast over trailing dims) */

/* conv (rlx_conv_params; op = RLXVK_OP: RLX_CONV_FORWARD / _TRANSPOSE).
 * Slots: out0 y, in0 x, in1 w, in2 bias, in3 residual; all dense. Per-dim
 * words hold 3 dims (dims past n_spatial are 1). Derived: CG = C/groups,
 * OCG = OC/groups, TAPS = prod(kernel), M = N * prod(out) (GEMM rows),
 * K = CG * TAPS (GEMM depth). */
#define CV_N 0
#define CV_C 1
#define CV_OC 2
#define CV_GROUPS 3
#define CV_LAST 4     /* channels last */
#define CV_ACT 5      /* rlx_activation */
#define CV_HAS_BIAS 6
#define CV_HAS_RES 7
#define CV_IN 8       /* per dim (3 each) */
#define CV_OUT 11
#define CV_KER 14
#define CV_STRIDE 17
#define CV_PAD 20
#define CV_DIL 23
#define CV_CG 26
#define CV_OCG 27
#define CV_TAPS 28
#define CV_M 29
#define CV_K 30
#define CV_TRANSPOSE 1 /* RLX_CONV_TRANSPOSE */

/* cross-entropy (op = RLX_XENT_*: rows, mean, backward) */
#define XE_ROWS 0
#define XE_VOCAB 1
#define XE_IGNORE_LO 2 /* ignore_index, two's complement halves */
#define XE_IGNORE_HI 3
#define XE_LS 4 /* label smoothing, float bits */
#define XE_OP_ROWS 0
#define XE_OP_MEAN 1
#define XE_OP_BACKWARD 2
/* optimizer update (op = RLX_OPT_SGD / RLX_OPT_ADAM); the record has two
 * output view slots, so Adam's third output (v) is an offset and dtype here */
#define OU_N 0
#define OU_MOMENTUM 1 /* float bits, like the five after it */
#define OU_DAMPENING 2
#define OU_WD 3
#define OU_BETA1 4
#define OU_BETA2 5
#define OU_EPS 6
#define OU_NESTEROV 7
#define OU_HAS_BUF 8
#define OU_DECOUPLED 9
#define OU_OUT2_OFF 10
#define OU_OUT2_DT 11
#define OU_OP_ADAM 1
/* slots of the hyper tensor (RLX_HYPER_* of rlx.h) */
#define OU_H_LR 0
#define OU_H_GRAD_SCALE 1
#define OU_H_STEP 2
#define OU_H_APPLY 3

/* grouped matmul (rlx_gmm_params; float experts) */
#define GM_N 0
#define GM_K 1
#define GM_E 2
#define GM_XREP 3
#define GM_WT 4

/* DequantMatMul (rlx_dqmm_params; dequant.comp, quant.glsl). Slots: out0
 * y, in0 x, in1 w (u8 rows), in2 scale, in3 aux (zero points / NVFP4's
 * global scale). DQ_RUNS: runs of 16 elements per W row (K / 16 rounded
 * up), the unit every decoder produces. */
#define DQ_M 0
#define DQ_N 1
#define DQ_K 2
#define DQ_ROW_BYTES 3
#define DQ_SCHEME 4
#define DQ_GROUP 5
#define DQ_HAS_SCALE 6
#define DQ_HAS_AUX 7
#define DQ_RUNS 8
#define DQ_TILES_N 9 /* dequant_tile: output tiles along N */
#define DQ_BLOCK 10       /* rlx_quant_table's block (elements) */
#define DQ_BLOCK_BYTES 11 /* and its bytes */

/* DequantGroupedMatMul (rlx_gmm_params with a scheme; grouped_dequant.comp).
 * The record holds the DequantMatMul words quant.glsl reads (DQ_K: elements
 * per stored row, K with GQ_WT else N; DQ_ROW_BYTES, DQ_SCHEME, DQ_GROUP,
 * DQ_HAS_SCALE, DQ_HAS_AUX, DQ_BLOCK, DQ_BLOCK_BYTES) and these past them.
 * Slots: out0 y, in0 x, in1 w, in2 idx, in3 scale, in4 aux. */
#define GQ_M 12
#define GQ_N 13
#define GQ_K 14
#define GQ_E 15
#define GQ_XREP 16
#define GQ_WT 17
#define GQ_TILES_N 18 /* grouped_dequant_tile: output tiles along N */

#endif
