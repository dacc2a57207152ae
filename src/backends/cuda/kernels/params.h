/* Launch parameters shared by the host side (C, cuda_launch.c) and the
 * kernels (.cu). Each kernel family takes one of these structs by value, so
 * the layouts must be plain: fixed-width fields, no pointers, no padding
 * surprises (64-bit fields first, then 32-bit ones). Offsets are bytes into
 * the arena; strides are elements of the view's dtype. Dtype codes are
 * rlx_dtype values; kernel sub-kinds are the rlx enums (rlx_binary_op, ...). */
#ifndef RLX_CUDA_KERNEL_PARAMS_H
#define RLX_CUDA_KERNEL_PARAMS_H

#include <stdint.h>

#define RLXK_MAX_RANK 8

/* Per-run device state: the seed for Sample, and the first run-time error a
 * kernel hit (key = (step + 1) << 8 | code, first writer wins). */
typedef struct rlxk_state {
  uint64_t seed;
  unsigned long long err_key;
  int64_t err_a, err_b;
} rlxk_state;

enum { RLXK_ERR_GATHER = 1, RLXK_ERR_SCATTER = 2, RLXK_ERR_NONFINITE = 3, RLXK_ERR_XENT = 4 };
enum { RLXK_ERR_EXPERT = 5 }; /* GroupedMatMul: an expert index outside [0, E) */

/* Elementwise (copy / binary / compare / where / unary) over out's index
 * space; inputs aligned to it (stride 0 = broadcast). */
typedef struct rlxk_ew {
  int64_t n;
  int64_t shape[RLXK_MAX_RANK];
  int64_t ostride[RLXK_MAX_RANK];
  int64_t istride[3][RLXK_MAX_RANK];
  uint64_t ooff, ioff[3];
  int32_t rank, n_in, kind, op;
  int32_t odt, idt[3];
  int32_t step;
  int32_t aux; /* rlx_where_rows: leading dims where cond varies */
} rlxk_ew;

/* Reduce: in viewed [keep dims..., reduced dims...]; out dense [outer]. */
typedef struct rlxk_reduce {
  int64_t outer, inner;
  int64_t shape[RLXK_MAX_RANK], stride[RLXK_MAX_RANK];
  uint64_t ioff, ooff;
  int32_t n_keep, n_red, op, idt, odt, pad_;
} rlxk_reduce;

/* Column reduction (sum / mean over the outer rows of a [rows, cols]
 * view whose columns are contiguous): rows split into `chunks` of
 * rows_per_chunk; each chunk's per-column partials (double) go to
 * `partial` (scratch offset, an address at launch) when chunks > 1, and
 * the last block of each column tile to finish adds them in chunk order. */
typedef struct rlxk_cols {
  int64_t cols, rows, row_stride, rows_per_chunk, chunks;
  uint64_t ioff, ooff, partial;
  int32_t op, idt, odt, pad_;
} rlxk_cols;

/* Row ops over a dense [outer, n, inner]: arg-reduce, softmax, cumsum, topk. */
typedef struct rlxk_row {
  int64_t outer, n, inner, k;
  uint64_t ioff, ooff, ooff2;
  int32_t op, idt, odt, odt2, exclusive, reverse, largest, pad_;
} rlxk_row;

typedef struct rlxk_gather {
  int64_t outer, axis_len, inner, n_idx;
  uint64_t doff, ioff, ooff;
  int32_t ddt, idt, odt, step;
} rlxk_gather;

/* ScatterAdd: idx dense over shape; src element at p uses src_stride; out
 * uses out_stride with p[axis] replaced by the index. */
typedef struct rlxk_scatter {
  int64_t n, axis_len;
  int64_t shape[RLXK_MAX_RANK], idx_stride[RLXK_MAX_RANK];
  int64_t src_stride[RLXK_MAX_RANK], out_stride[RLXK_MAX_RANK];
  uint64_t ioff, soff, ooff;
  int32_t rank, axis, idt, sdt, odt, step;
} rlxk_scatter;

/* Norm over rows of `cols` contiguous elements. Slots: x, residual, bias,
 * gamma, beta (dt < 0: absent). */
typedef struct rlxk_norm {
  int64_t rows, cols;
  uint64_t off[5], ooff, ooff2;
  int32_t dt[5], odt, odt2;
  float eps;
  int32_t rms, writes_sum;
} rlxk_norm;

/* Softmax / log-softmax backward (op 0 / 1) over a dense [outer, n,
 * inner]: y (the forward's output), dy, out dx. */
typedef struct rlxk_softmax_bwd {
  int64_t outer, n, inner;
  uint64_t yoff, dyoff, ooff;
  int32_t op, ydt, dydt, odt;
} rlxk_softmax_bwd;

typedef struct rlxk_attn {
  int64_t B, H, Hkv, Sq, Sk, D, Dv;
  int64_t q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, o_sb, o_ss, o_sh;
  int64_t m_sb, m_sh, m_sq, m_sk;
  uint64_t qoff, koff, voff, moff, ooff;
  int32_t qdt, kdt, vdt, mdt, odt;
  uint64_t partial; /* split-K: device address of (m, l, acc) partials */
  int32_t mask, window;
  float scale, softcap;
  int32_t q_tiles; /* blocks along Sq */
  int32_t k_split; /* blocks along Sk (1: no split) */
} rlxk_attn;

/* AttentionBackward, one phase (op = RLX_ATTN_BWD_*) per launch: the
 * forward's geometry (a: ooff/odt are `out`, read by STATS and DQ), d_out,
 * the fifth input (out or the stats [rows, 2]) and the phase's output (the
 * stats, dv, dk or dq) with its strides. */
enum { RLXK_ATTN_BWD_STATS = 0, RLXK_ATTN_BWD_DV = 1, RLXK_ATTN_BWD_DK = 2, RLXK_ATTN_BWD_DQ = 3 };
typedef struct rlxk_attn_bwd {
  rlxk_attn a;
  int64_t do_sb, do_ss, do_sh, g_sb, g_ss, g_sh;
  uint64_t dooff, xoff, goff;
  int32_t dodt, xdt, gdt, op;
  /* Tensor-core kernels only (attention_bwd_mma.cu). fused: the DV launch
   * also writes dk (g2*; the DK step launches nothing). stats_copy: STATS
   * also writes each row's (lse, D) as a float2 to a.partial (scratch) and
   * DQ reads them there instead of recomputing them. */
  uint64_t g2off;
  int64_t g2_sb, g2_ss, g2_sh;
  int32_t g2dt, fused, stats_copy;
} rlxk_attn_bwd;

typedef struct rlxk_rope {
  int64_t B, S, H, D;
  int64_t x_sb, x_ss, x_sh, o_sb, o_ss, o_sh;
  uint64_t xoff, coff, soff, ooff;
  int32_t n_rot, style, per_token, xdt, cdt, sdt, odt;
  int32_t inverse; /* RopeBackward: sin negated */
} rlxk_rope;

/* Pool / Pad (mode: RLXK_WIN_*, the values of RLX_WIN_* in
 * src/passes/lower.h): x and out dense, same rank. */
enum { RLXK_WIN_MAX = 0, RLXK_WIN_AVG = 1, RLXK_WIN_PAD_CONSTANT = 2, RLXK_WIN_PAD_REFLECT = 3,
       RLXK_WIN_PAD_EDGE = 4, RLXK_WIN_PAD_WRAP = 5 };
typedef struct rlxk_pool {
  int64_t n, taps;
  int64_t in_shape[RLXK_MAX_RANK], in_stride[RLXK_MAX_RANK], out_shape[RLXK_MAX_RANK];
  int64_t kernel[RLXK_MAX_RANK], stride[RLXK_MAX_RANK], dilation[RLXK_MAX_RANK];
  int64_t pad[RLXK_MAX_RANK], pad_end[RLXK_MAX_RANK];
  uint64_t xoff, ooff;
  int32_t rank, mode, count_include_pad, index_out, xdt, odt;
  float value;
  int32_t pad_;
} rlxk_pool;

/* PoolBackward (mode RLXK_WIN_MAX / _AVG): x and dy as the forward saw
 * them, out dx dense in x's shape; n = dx's elements. */
typedef struct rlxk_pool_bwd {
  int64_t n, taps;
  int64_t x_shape[RLXK_MAX_RANK], x_stride[RLXK_MAX_RANK];
  int64_t dy_shape[RLXK_MAX_RANK], dy_stride[RLXK_MAX_RANK];
  int64_t kernel[RLXK_MAX_RANK], stride[RLXK_MAX_RANK], dilation[RLXK_MAX_RANK];
  int64_t pad[RLXK_MAX_RANK], pad_end[RLXK_MAX_RANK];
  uint64_t xoff, dyoff, ooff;
  int32_t rank, mode, count_include_pad, xdt, dydt, odt;
} rlxk_pool_bwd;

/* PoolBackward whose windows move along at most two adjacent dims (every
 * 2-D pool, NCHW or NHWC; a 1-D pool has H = 1): dx dense as [A, H, W, I]
 * (A the dims before the window dims collapsed, I those after), x and dy
 * with one stride per collapsed dim. Every offset fits in 32 bits (the
 * host checks), so the kernel's index math is 32-bit. Avg: a window's
 * count is the product of its taps per dim inside [lo, hi). */
typedef struct rlxk_pool_bwd2d {
  uint64_t xoff, dyoff, ooff;
  int32_t n, A, H, W, I, OH, OW;
  int32_t xa, xh, xw, xi, ga, gh, gw, gi;
  int32_t kh, kw, sh, sw, ph, pw, dh, dw;
  int32_t h_lo, h_hi, w_lo, w_hi;
  int32_t mode, xdt, dydt, odt;
} rlxk_pool_bwd2d;

/* Resize: the shared lowering's rlx_resize_params plus the views; the
 * kernel computes coordinates and taps in double with scalar_math.h's
 * functions, exactly as the CPU reference. */
#define RLXK_RESIZE_DIMS 3
typedef struct rlxk_resize {
  int64_t n;
  int64_t in_stride[RLXK_MAX_RANK], out_shape[RLXK_MAX_RANK];
  int64_t in_size[RLXK_RESIZE_DIMS], out_size[RLXK_RESIZE_DIMS];
  uint64_t xoff, ooff;
  int32_t dim[RLXK_RESIZE_DIMS];
  float scale[RLXK_RESIZE_DIMS], roi_start[RLXK_RESIZE_DIMS], roi_end[RLXK_RESIZE_DIMS];
  int32_t rank, n_dims, mode, coord, nearest, exclude_outside, xdt, odt;
  float cubic_a, extrapolation;
} rlxk_resize;

/* GridSample (op 0) / RoiAlign (op 1): rlx_sampler_params plus the views
 * (all dense); x [N, C, H, W], out [N or R, C, Ho, Wo]. */
typedef struct rlxk_sampler {
  int64_t n, N, C, H, W, Ho, Wo;
  uint64_t xoff, goff, boff, ooff; /* grid or rois; batch indices */
  int32_t op, mode, padding, align, ratio, xdt, gdt, bdt, odt;
  float spatial_scale;
} rlxk_sampler;
/* Channel-wise norms (rlx_gnorm_params in src/passes/lower.h): x, out
 * dense; slots of off/dt: x, gamma, beta, mean, var (dt -1: absent). */
typedef struct rlxk_gnorm {
  int64_t outer, n, inner, groups, cdiv;
  uint64_t off[5], ooff;
  int32_t dt[5], odt, has_stats;
  float eps;
} rlxk_gnorm;

/* Sample: one block per row (grid-strided); scratch holds per block a
 * power-of-two array of (prob, index) for sorting. */
typedef struct rlxk_sample {
  int64_t rows, vocab, pow2;
  uint64_t ioff, ooff;
  uint64_t scratch; /* device address of the scratch buffer */
  int32_t idt, odt, top_k;
  float top_p, temperature;
  int32_t pad_;
} rlxk_sample;

/* Matmul fallback / GEMV: C = act(A·B + bias), geometry as rlx_matmul_params. */
typedef struct rlxk_mm {
  int64_t M, N, K, batch;
  int64_t batch_shape[RLXK_MAX_RANK], a_bs[RLXK_MAX_RANK], b_bs[RLXK_MAX_RANK],
      c_bs[RLXK_MAX_RANK];
  int64_t a_rs, a_cs, b_rs, b_cs, c_rs;
  uint64_t aoff, boff, coff, biasoff;
  uint64_t partial; /* GEMV split-K: device address of the partial sums */
  uint64_t counters; /* fused GEMV: device address of per-column-block arrival counts */
  int32_t batch_rank, adt, bdt, cdt, biasdt, has_bias, act, ksplit;
} rlxk_mm;

/* Elementwise bias + activation over a dense C [rows, N] (matmul epilogues
 * cuBLASLt cannot fuse exactly). */
typedef struct rlxk_epilogue {
  int64_t rows, N;
  uint64_t coff, biasoff;
  int32_t cdt, biasdt, has_bias, act;
} rlxk_epilogue;

/* Cross-entropy (RLX_K_XENT; op RLX_XENT_ROWS / MEAN / BACKWARD): x logits
 * [rows, vocab] (the partials for MEAN), t targets, d the scalar d_loss. */
typedef struct rlxk_xent {
  int64_t rows, vocab, ignore_index;
  uint64_t xoff, toff, doff, ooff;
  int32_t op, xdt, tdt, ddt, odt, step;
  float ls;
  int32_t pad_;
} rlxk_xent;

/* Optimizer update (RLX_K_OPT_UPDATE; op RLX_OPT_SGD / RLX_OPT_ADAM), n
 * dense elements. Inputs as the step's (dt < 0: absent), outputs p, state. */
typedef struct rlxk_opt {
  int64_t n;
  uint64_t off[5], ooff[3];
  int32_t dt[5], odt[3];
  int32_t op, nesterov, has_buf, decoupled;
  float momentum, dampening, weight_decay, beta1, beta2, eps;
} rlxk_opt;

/* Several optimizer updates in one launch (multi-tensor apply): a device
 * table (scratch offset `table`, an address at launch) of `count`
 * rlxk_opt entries, followed by count + 1 int64 chunk starts: entry k
 * owns chunks [start[k], start[k + 1]) of `chunk` elements each. The
 * entries share op, hypers and the hyper tensor. */
typedef struct rlxk_opt_multi {
  uint64_t table;
  int64_t chunk, total_chunks;
  int32_t count, pad_;
} rlxk_opt_multi;

/* ElementwiseRegion (RLX_K_REGION): the step's program compiled by the host
 * (cuda_launch.c) into register code for the interpreter (region.cu). Dims
 * are folded over the output and every input; indices fit int32 (the host
 * checks). Each code word: bits 0-3 kind (RLXK_RG_*), 4-8 op (rlx_activation
 * / rlx_binary_op), 9-14 dst register, 15-21 operand a, 22-28 operand b; an
 * operand >= RLXK_RG_IMM names imm[operand - RLXK_RG_IMM], else a register;
 * LOAD / CAST read input a. rdt: the region's dtype, every result is
 * rounded to it. */
#define RLXK_RG_IN 16
#define RLXK_RG_OPS 48
#define RLXK_RG_REGS 16
#define RLXK_RG_IMMS 32
#define RLXK_RG_IMM 64
enum { RLXK_RG_LOAD = 0, RLXK_RG_CAST = 1, RLXK_RG_UNARY = 2, RLXK_RG_BINARY = 3, RLXK_RG_MOV = 4 };
typedef struct rlxk_region {
  int64_t n;
  uint64_t ooff, ioff[RLXK_RG_IN];
  int32_t shape[RLXK_MAX_RANK], ostride[RLXK_MAX_RANK];
  int32_t istride[RLXK_RG_IN][RLXK_MAX_RANK];
  float imm[RLXK_RG_IMMS];
  uint32_t code[RLXK_RG_OPS];
  int32_t idt[RLXK_RG_IN];
  int32_t rank, n_in, n_ops, out_reg, odt, rdt;
} rlxk_region;

/* Sum / mean over [outer, keep, inner] -> [keep] (BatchNorm statistics over
 * N, H, W of NCHW): each keep index's outer runs of `inner` contiguous
 * elements, read VEC at a time. A keep index's outer * inner / VEC vectors
 * split into `chunks` of per_chunk; with chunks > 1 each chunk's double
 * partial goes to partial[chunk * keep + k] (scratch offset, an address at
 * launch), followed by a u32 counter per keep index, and the block that
 * counts last adds them in chunk order. */
typedef struct rlxk_mid {
  int64_t keep, keep_stride, outer, outer_stride, inner, per_chunk, chunks;
  uint64_t ioff, ooff, partial;
  int32_t op, idt, odt, pad_;
} rlxk_mid;

/* GroupedMatMul (rlx_gmm_params): y [M, N] from x [M / x_rep, K] and
 * expert idx[r]'s W. Float experts: W [E, N, K] (wt) or [E, K, N].
 * Quantized (scheme >= 0, wt): W u8 [E, N, row_bytes] in groups of
 * `group` elements (group_bytes each; group <= RLXK_GMM_MAX_GROUP), scale
 * / aux [E, N, K / group] per the scheme (soff / aoff; NVFP4's aux: one
 * f32 global scale). */
#define RLXK_GMM_MAX_GROUP 256
typedef struct rlxk_gmm {
  int64_t M, N, K, E, x_rep, row_bytes, group_bytes;
  uint64_t xoff, woff, ioff, ooff, soff, aoff;
  int32_t xdt, wdt, idt, odt, sdt, adt;
  int32_t scheme, group, wt, has_scale, has_aux, step;
} rlxk_gmm;

/* DequantMatMul (kernels/quant.cu): W u8 [N, row_bytes] stored quantized
 * row by row (src/ir/quant.h); x dense [M, K] (transposed role: [M, N]);
 * scale [N, K / group] (sdt) and aux (u8 zero points, or NVFP4's f32
 * global scale) at soff / aoff when has_scale / has_aux; out dense [M, N]
 * (transposed: [M, K]). wpr: warps per W row of the GEMV. */
typedef struct rlxk_dqmm {
  int64_t M, N, K, row_bytes;
  uint64_t xoff, woff, soff, aoff, ooff;
  int32_t scheme, group, transposed, has_scale, has_aux;
  int32_t xdt, sdt, odt, wpr, pad_;
  /* the prefill's panel kernel: W rows n0 .. n0 + prows into the panel
   * (a device address, [prows, K] of x's dtype) */
  int64_t n0, prows;
  uint64_t panel;
} rlxk_dqmm;

#endif
