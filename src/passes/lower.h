/* Shared lowering: graph + memory plan -> a backend-neutral step list.
 *
 * Every backend executes this list; none re-derives shapes, strides or
 * attention geometry from the IR. A step names a kernel kind, views of the
 * arena for its operands (byte offset + shape + element strides), the lowered
 * op parameters, and the byte ranges it reads and writes (from which
 * barriers, stream dependencies and fusion legality are derived).
 *
 * Conventions every kernel may rely on:
 *  - out views are dense row-major unless a kind says otherwise (COPY may
 *    write a strided window, e.g. one input's slot of a Concat);
 *  - in views are expressed in the OUTPUT's index space where the kind says
 *    "aligned": same rank and shape as out, broadcast dims have stride 0,
 *    Reverse uses negative strides (offset points at element [0,...,0]);
 *  - strides are in elements of the view's dtype; offsets are in bytes.
 */
#ifndef RLX_PASSES_LOWER_H
#define RLX_PASSES_LOWER_H

#include "ir/graph.h"
#include "passes/plan.h"
#include "ir/region.h"

/* One kind per entry of src/backends/kernels.def (each kind's contract is
 * written there). */
typedef enum rlx_kernel {
#define RLX_KERNEL(id, name, params, meaning) RLX_K_##id,
#include "backends/kernels.def"
#undef RLX_KERNEL
  RLX_K_COUNT
} rlx_kernel;

/* 16: an ElementwiseRegion reads up to RLX_REGION_MAX_INPUTS inputs. */
#define RLX_STEP_MAX_IN 16
#define RLX_STEP_MAX_OUT 3

typedef struct rlx_view {
  uint64_t offset; /* byte offset of element [0,...,0] in the arena */
  rlx_dtype dtype;
  int32_t rank;    /* -1: operand absent */
  int64_t shape[RLX_MAX_RANK];
  int64_t stride[RLX_MAX_RANK]; /* elements; 0 = broadcast; < 0 = reversed */
} rlx_view;

typedef struct rlx_range {
  uint64_t begin, end; /* bytes [begin, end) of the arena */
} rlx_range;

/* C = act(A·B + bias) over a batch. Element (batch b, row m, col n):
 *   A at a.offset + (boff_a(b) + m*a_rs + k*a_cs) elements, likewise B with
 *   (k*b_rs + n*b_cs), C dense [batch..., M, N] with c_rs = N, c_cs = 1.
 * Batch index b is unravelled over batch_shape; each operand has its own
 * batch strides (0 where it broadcasts). Transposes are folded into the
 * row/col strides, so kernels never look at transpose flags. */
typedef struct rlx_matmul_params {
  int64_t M, N, K;
  int32_t batch_rank;
  int64_t batch_shape[RLX_MAX_RANK];
  int64_t a_bstride[RLX_MAX_RANK], b_bstride[RLX_MAX_RANK], c_bstride[RLX_MAX_RANK];
  int64_t batch;       /* product of batch_shape (1 if none) */
  int64_t a_rs, a_cs;  /* A row (m) and column (k) strides */
  int64_t b_rs, b_cs;  /* B row (k) and column (n) strides */
  int64_t c_rs;        /* = N */
  int32_t has_bias;    /* bias view in2 is [N], stride 1 */
  int32_t act;         /* rlx_activation applied after bias (RLX_ACT_NONE = none) */
} rlx_matmul_params;

/* Reduce: in0 is viewed as [keep dims..., reduced dims...] (rank n_keep +
 * n_red, strides permuted accordingly); out is dense [outer] where outer is the
 * product of the keep dims. */
typedef struct rlx_reduce_params {
  int32_t n_keep, n_red;
  int64_t outer, inner; /* products of keep dims and reduced dims */
} rlx_reduce_params;

/* Row ops over a dense tensor viewed as [outer, n, inner]: element (o, i, j)
 * is at o*n*inner + i*inner + j; the op runs along i. */
typedef struct rlx_row_params {
  int64_t outer, n, inner;
} rlx_row_params;

typedef struct rlx_gather_params {
  int64_t outer, axis_len, inner; /* data viewed as [outer, axis_len, inner] */
  int64_t n_idx;                  /* number of indices; out is [outer, n_idx, inner] */
} rlx_gather_params;

/* ScatterAdd: idx/src are dense with shape `shape` (rank). out (dense,
 * strides out_stride) receives, for each position p, at p with p[axis]
 * replaced by idx[p] (negative counts from axis_len), += src[p]. */
typedef struct rlx_scatter_params {
  int32_t rank, axis;
  int64_t shape[RLX_MAX_RANK];
  int64_t out_stride[RLX_MAX_RANK];
  int64_t axis_len;
} rlx_scatter_params;

/* Norm over rows of `cols` contiguous elements (LayerNorm's [axis:] dims are
 * flattened into cols). sum = x + residual (+ bias) when has_residual; the
 * normalised value is of sum (or x). gamma/beta/bias are [cols]. */
typedef struct rlx_norm_params {
  int64_t rows, cols;
  float eps;
  int32_t rms;          /* 1: RmsNorm, 0: LayerNorm */
  int32_t has_residual, has_bias, has_gamma, has_beta;
  int32_t writes_sum;   /* out1 receives the pre-norm sum */
} rlx_norm_params;

/* Attention geometry. Element d of (batch b, head h, position s) of q is at
 * q.offset + (b*q_sb + s*q_ss + h*q_sh + d) elements (head dim contiguous);
 * k, v, o likewise. KV head of query head h is h / (H / Hkv). mask (in3) is
 * addressed with m_sb/m_sh/m_sq/m_sk strides (0 where broadcast). */
typedef struct rlx_attention_params {
  int64_t B, H, Hkv, Sq, Sk, D, Dv;
  int64_t q_sb, q_ss, q_sh;
  int64_t k_sb, k_ss, k_sh;
  int64_t v_sb, v_ss, v_sh;
  int64_t o_sb, o_ss, o_sh;
  int64_t m_sb, m_sh, m_sq, m_sk;
  int32_t mask;   /* rlx_mask_kind */
  int32_t window; /* sliding window */
  float scale;    /* resolved score scale */
  float softcap;  /* 0 = off */
} rlx_attention_params;

/* AttentionBackward (RLX_K_ATTENTION_BWD) runs as phases, one step each,
 * in this order (step op):
 *   STATS: per query row (b, h, i): the row's logsumexp over the keys and
 *          D = dot(d_out, out), written as stats[r] = {lse, D}, r = (b*H + h)*Sq + i;
 *   DV:    per key row (b, kvh, j): dv = sum over the kv head's query heads
 *          and rows of P * d_out;
 *   DK:    per key row: dk = sum of dS * q * scale (dS through the softcap);
 *   DQ:    per query row: dq = sum over keys of dS * k * scale; it recomputes
 *          its row's stats, because its output overwrites them;
 *   FULL:  all three gradients in one step (CPU reference only), lowered
 *          instead when the stats do not fit in dq's bytes.
 * The stats (dense [B*H*Sq, 2] of f64 when q is f64, else f32) live in dq's
 * bytes between STATS and DQ, so no scratch memory is planned.
 * Inputs: in0 q, in1 k, in2 v (absent in STATS and DV), in3 mask (optional),
 * in4 out (STATS, DQ, FULL) or the stats (DV, DK), in5 d_out. Outputs: out0
 * the phase's tensor (stats, dv, dk or dq); FULL: dq, dk, dv. */
enum {
  RLX_ATTN_BWD_STATS = 0,
  RLX_ATTN_BWD_DV = 1,
  RLX_ATTN_BWD_DK = 2,
  RLX_ATTN_BWD_DQ = 3,
  RLX_ATTN_BWD_FULL = 4,
};
typedef struct rlx_attention_bwd_params {
  rlx_attention_params a; /* the forward's geometry; o_* strides are out's */
  int64_t do_sb, do_ss, do_sh; /* d_out (Dv wide) */
  int64_t dq_sb, dq_ss, dq_sh;
  int64_t dk_sb, dk_ss, dk_sh;
  int64_t dv_sb, dv_ss, dv_sh;
} rlx_attention_bwd_params;

/* RoPE: element d of (b, s, h) of x is at x_sb*b + x_ss*s + x_sh*h + d; out
 * uses o_* strides. Table row = per_token ? b*S + s : s; row stride = n_rot/2. */
typedef struct rlx_rope_params {
  int64_t B, S, H, D;
  int64_t x_sb, x_ss, x_sh;
  int64_t o_sb, o_ss, o_sh;
  int32_t n_rot, style; /* rlx_rope_style */
  int32_t per_token;
  int32_t inverse; /* RopeBackward: rotate by -angle (sin negated) */
} rlx_rope_params;

typedef struct rlx_sample_params {
  int64_t rows, vocab;
  int32_t top_k;
  float top_p, temperature;
} rlx_sample_params;

/* Pool and Pad (RLX_K_POOL, op = mode). in0 and out are dense with the
 * same rank. Output element o reads, per dim d and tap t_d < kernel[d],
 * input coordinate i_d = o_d * stride[d] - pad[d] + t_d * dilation[d]
 * (taps = product of kernel). Pooling modes skip taps outside the input;
 * an average divides by the taps inside it, or with count_include_pad by
 * those inside [-pad, in + pad_end). Pad modes have one tap (kernel 1,
 * stride 1): constant writes `value` outside the input, reflect mirrors
 * (period 2 * (in - 1)), edge clamps, wrap repeats (period in). With index_out, the max mode writes
 * the (dense) input element index of the first maximal tap instead. */
enum { RLX_WIN_MAX = 0, RLX_WIN_AVG = 1, RLX_WIN_PAD_CONSTANT = 2, RLX_WIN_PAD_REFLECT = 3,
       RLX_WIN_PAD_EDGE = 4, RLX_WIN_PAD_WRAP = 5 };
/* Pad window modes are the rlx_pad_mode codes shifted by 2 (kernels hand
 * mode - RLX_WIN_PAD_CONSTANT to rlx_pad_fold). */
_Static_assert(RLX_WIN_PAD_CONSTANT - 2 == RLX_PAD_CONSTANT &&
                   RLX_WIN_PAD_REFLECT - 2 == RLX_PAD_REFLECT &&
                   RLX_WIN_PAD_EDGE - 2 == RLX_PAD_EDGE && RLX_WIN_PAD_WRAP - 2 == RLX_PAD_WRAP,
               "window pad modes follow rlx_pad_mode");
typedef struct rlx_pool_params {
  int32_t rank, count_include_pad;
  int32_t index_out; /* max mode: write the i64 input index of the maximum */
  float value;
  int64_t taps;
  int64_t kernel[RLX_MAX_RANK], stride[RLX_MAX_RANK], dilation[RLX_MAX_RANK];
  int64_t pad[RLX_MAX_RANK], pad_end[RLX_MAX_RANK];
} rlx_pool_params;

/* Resize (RLX_K_RESIZE, op = rlx_resize_mode). in0 and out are dense with
 * the same rank; dims not listed in dim[] copy their coordinate. For each
 * listed dim i, output coordinate o maps to input coordinate
 * rlx_resize_source(coord, o, scale[i] (0: out / in), in_size[i], out_size[i], roi_start[i],
 * roi_end[i]) (scalar_math.h), whose taps are rlx_resize_taps; the output is
 * the weighted sum over the product of the dims' taps. tf_crop_and_resize
 * writes `extrapolation` where any coordinate falls outside [0, in - 1].
 * Every transform is affine in o: coef_a[i] * o + coef_b[i] is the same
 * coordinate for kernels without f64 (computed here in double, rounded
 * once). f32_exact says whether such a kernel makes the reference's
 * discrete choices (nearest rounding, extrapolation) for every element:
 * true for linear / cubic (continuous in the coordinate) and for nearest
 * with power-of-two scales under a transform without (in - 1) / (out - 1);
 * otherwise the step counts as computing in f64 (rlx_step_computes_in_f64). */
typedef struct rlx_resize_params {
  int32_t rank, n_dims, f32_exact;
  int32_t coord, nearest, exclude_outside;
  float coef_a[RLX_RESIZE_MAX_DIMS], coef_b[RLX_RESIZE_MAX_DIMS];
  float cubic_a, extrapolation;
  int32_t dim[RLX_RESIZE_MAX_DIMS];
  int64_t in_size[RLX_RESIZE_MAX_DIMS], out_size[RLX_RESIZE_MAX_DIMS];
  float scale[RLX_RESIZE_MAX_DIMS], roi_start[RLX_RESIZE_MAX_DIMS], roi_end[RLX_RESIZE_MAX_DIMS];
} rlx_resize_params;

/* GridSample and RoiAlign (RLX_K_SAMPLER, op = RLX_SAMPLER_*). Views are
 * dense. GridSample: mode is an rlx_resize_mode, padding an
 * rlx_grid_padding. RoiAlign: mode is an rlx_pool_kind; half_pixel is
 * ONNX's half_pixel transform. */
enum { RLX_SAMPLER_GRID = 0, RLX_SAMPLER_ROI_ALIGN = 1 };
typedef struct rlx_sampler_params {
  int32_t mode, padding, align_corners, sampling_ratio;
  float spatial_scale;
} rlx_sampler_params;
/* Conv and ConvTranspose (RLX_K_CONV, op = RLX_CONV_FORWARD / _TRANSPOSE).
 * Channels first, x is [N, C, in...] and y [N, OC, out...]; channels last
 * x [N, in..., C], y [N, out..., OC]. w is [OC, C/groups, kernel...]
 * (forward) or [C, OC/groups, kernel...] (transpose) in both layouts.
 * Forward: y[n, oc, o] sums over c in oc's group and taps t of
 * x[n, c, o * stride - pad + t * dilation] (outside the input reads zero).
 * Transpose: x[n, c, i] scatters to y[n, oc, i * stride - pad + t *
 * dilation]; out[] already includes output_padding. y = act(sum + bias[oc]
 * + residual[n, oc, o]). Dims past n_spatial are 1 (kernel, stride,
 * dilation 1, pads 0).
 * Weight gradient (RLX_K_CONV_WGRAD, op RLX_CONV_BACKWARD_WEIGHT): in0 x,
 * in1 dy (the forward's y), out d_w in w's layout (OHWI for
 * channels_last_ohwi); d_w[oc, c, t] sums x[n, g*Cg + c, o * stride - pad
 * + t * dilation] * dy[n, oc, o] over n and o (out[] = dy's spatial dims);
 * act, bias and residual are unused. */
enum { RLX_CONV_FORWARD = 0, RLX_CONV_TRANSPOSE = 1, RLX_CONV_BACKWARD_WEIGHT = 2 };
typedef struct rlx_conv_params {
  int32_t n_spatial;               /* 1..3 */
  int32_t layout;                  /* rlx_conv_layout of x, residual and y */
  int32_t act;                     /* rlx_activation, RLX_ACT_NONE = none */
  int32_t has_bias, has_residual;
  int64_t N, C, OC, groups;        /* C: x's channels, OC: y's channels */
  int64_t in[3], out[3], kernel[3];
  int64_t stride[3], pad[3], pad_end[3], dilation[3];
  int64_t output_padding[3];       /* transpose only (already in out[]) */
} rlx_conv_params;

/* Channel-wise norms (RLX_K_GROUP_NORM): GroupNorm, InstanceNorm (groups =
 * C), LayerNorm2d and BatchNorm. in0 x and out are dense; group (o, i) for
 * o < outer, i < inner holds the n elements o*n*inner + j*inner + i (j < n),
 * normalised with the biased variance of the group (two passes, f32 or
 * wider accumulation). Element j of group o has channel
 * ((o % groups) * n + j) / cdiv for gamma (in1) and beta (in2). With
 * has_stats the group is not reduced: mean (in3) and var (in4) are read at
 * o % groups (BatchNorm, where every group is one (sample, channel)).
 *   GroupNorm [N, C, S]: outer N*G, n (C/G)*S, inner 1, groups G, cdiv S;
 *   LayerNorm2d:         outer N,   n C,       inner S, groups 1, cdiv 1;
 *   BatchNorm:           outer N*C, n S,       inner 1, groups C, cdiv S. */
enum { RLX_GN_X, RLX_GN_GAMMA, RLX_GN_BETA, RLX_GN_MEAN, RLX_GN_VAR };
typedef struct rlx_gnorm_params {
  int64_t outer, n, inner, groups, cdiv;
  float eps;
  int32_t has_gamma, has_beta, has_stats;
} rlx_gnorm_params;

/* CrossEntropy (RLX_K_XENT): op is one of these; rows of `vocab` logits. */
enum { RLX_XENT_ROWS = 0, RLX_XENT_MEAN = 1, RLX_XENT_BACKWARD = 2 };
typedef struct rlx_xent_params {
  int64_t rows, vocab;
  int64_t ignore_index;
  float label_smoothing;
} rlx_xent_params;

/* Optimizer updates (RLX_K_OPT_UPDATE): op SGD or Adam over n elements;
 * the constants of the graph's opt attribute (hyper holds the rest). */
enum { RLX_OPT_SGD = 0, RLX_OPT_ADAM = 1 };
typedef struct rlx_opt_params {
  int64_t n;
  float momentum, dampening, weight_decay; /* weight_decay: both */
  float beta1, beta2, eps;
  int32_t nesterov, has_buf; /* SGD */
  int32_t decoupled;         /* Adam: 1 AdamW */
} rlx_opt_params;

/* DequantMatMul (RLX_K_DEQUANT_MATMUL): M rows of x, N rows of W, K
 * elements per W row, stored in row_bytes bytes as K / group groups
 * (src/ir/quant.h); transposed = the gradient's role (y [M, K] = x [M, N]
 * . W). has_scale / has_aux: in2 / in3 present. */
typedef struct rlx_dqmm_params {
  int64_t M, N, K, row_bytes;
  int32_t scheme, group, transposed, has_scale, has_aux;
} rlx_dqmm_params;

/* GroupedMatMul / DequantGroupedMatMul (RLX_K_GROUPED_MATMUL): M output
 * rows of N, each the dot over K of x row r / x_rep with expert idx[r]'s
 * W (E experts). wt: W stored [E, N, K] (else [E, K, N]). scheme: -1 for
 * float W, else rlx_quant_scheme with W's stored rows of row_bytes bytes
 * (group elements per scale group); has_scale / has_aux: in3 / in4. */
typedef struct rlx_gmm_params {
  int64_t M, N, K, E, x_rep, row_bytes;
  int32_t scheme, group, wt, has_scale, has_aux;
} rlx_gmm_params;

/* Work geometry of a step's portable kernel, computed once here for every
 * backend (rlx_step_finish): `items` independent units of work, each taken
 * by one invocation / thread (RLX_WORK_LANE) or by one whole workgroup /
 * block (RLX_WORK_GROUP). What an item is, per kind:
 *   copy, binary, compare, where, unary: one output element (lane);
 *   matmul: one RLX_MM_TILE x RLX_MM_TILE output tile of one batch (group);
 *   reduce: one output element (group: the reduced values are shared out);
 *   softmax, softmax_bwd: one row (outer x inner of them; group);
 *   arg_reduce, cumsum: one row (lane);  topk: one input element (lane);
 *   gather: one output element (lane);  scatter_add: one destination
 *   element of the scattered window, idx's shape with the axis at the
 *   output's length (lane: each sums its own sources, no atomics);  norm, norm_bwd: one row (group);  attention: one query row of one head
 *   (group);  attention_bwd: one query row of one head (STATS, DQ) or one
 *   key row of one kv head (DV, DK), a group; FULL: one group;  rope: one rotated pair or one pass-through element (lane);
 *   sample: one row of logits (group);  pool: one output element (lane);
 *   resize: one output element (lane);  sampler: one output element (lane);
 *   conv: one output element (lane);  conv_wgrad: one d_w element (lane);
 *   pool_backward: one dx (input) element (lane);
 *   group_norm: one normalised group (outer x inner of them; group);
 *   dequant_matmul: one output element (lane);
 *   grouped_matmul: one output element (lane);
 *   xent: one row (group; the mean: one group);  gather_backward: one dx
 *   row of inner elements (group);  opt_update: one element (lane);
 *   host: none.
 * Backends with faster kernels (vectorised, tiled differently) may launch
 * them instead, but the portable geometry is never re-derived. */
typedef enum rlx_work_unit { RLX_WORK_NONE, RLX_WORK_LANE, RLX_WORK_GROUP } rlx_work_unit;
#define RLX_MM_TILE 16

typedef struct rlx_work {
  int64_t items;
  int32_t unit; /* rlx_work_unit */
} rlx_work;

typedef struct rlx_step {
  rlx_kernel kernel;
  int32_t node;   /* IR node this step implements (for reports and errors) */
  int32_t op;     /* sub-kind, see each kernel kind */
  int32_t n_in, n_out;
  rlx_view in[RLX_STEP_MAX_IN];
  rlx_view out[RLX_STEP_MAX_OUT];
  union {
    rlx_matmul_params mm;
    rlx_reduce_params reduce;
    struct {
      rlx_row_params row;
      int32_t exclusive, reverse; /* cumsum */
      int64_t k;                  /* topk */
      int32_t largest;            /* topk */
    } rowop;
    rlx_gather_params gather;
    rlx_scatter_params scatter;
    rlx_norm_params norm;
    rlx_attention_params attn;
    rlx_attention_bwd_params attn_bwd;
    rlx_rope_params rope;
    rlx_sample_params sample;
    rlx_pool_params pool;
    rlx_resize_params resize;
    rlx_sampler_params sampler;
    rlx_conv_params conv;
    rlx_gnorm_params gnorm;
    rlx_xent_params xent;
    rlx_opt_params opt;
    rlx_region_program region;
    rlx_dqmm_params dqmm;
    rlx_gmm_params gmm;
  } p;
  int32_t n_reads, n_writes;
  rlx_range reads[RLX_STEP_MAX_IN];
  rlx_range writes[RLX_STEP_MAX_OUT];
  rlx_work work;
} rlx_step;

/* What running a step list needs besides its steps (rlx_run_ctx: see
 * runtime/backend.h's run, the CPU reference, constant folding). */
typedef struct rlx_run_ctx {
  uint64_t seed;          /* per-run seed (Sample, RNG ops) */
  const rlx_graph* graph; /* for RLX_K_HOST steps and messages naming a node */
  const rlx_plan* plan;
  /* RLX_TRACE / rlx_exec_set_trace: where the run loop reports each step's
   * time (runtime/trace.h); NULL when tracing is off, the only cost then. */
  const struct rlx_trace_run* trace;
} rlx_run_ctx;

typedef struct rlx_step_list {
  rlx_step* steps;
  int32_t n, cap;
  rlx_error* err; /* where the lowering functions report (set by rlx_lower*) */
} rlx_step_list;

/* Which nodes become which steps is decided here; `host_node[i]` != 0 forces
 * node i to RLX_K_HOST (the backend lacks a kernel). Appends to out; a
 * failure names the node in err. */
rlx_status rlx_lower(const rlx_graph* g, const rlx_plan* plan, const uint8_t* host_node,
                     rlx_step_list* out, rlx_error* err);
void rlx_step_list_free(rlx_step_list* l);

/* Dense row-major view of value t at its planned offset. */
rlx_view rlx_view_of(const rlx_graph* g, const rlx_plan* plan, rlx_tensor t);
/* View of t broadcast (NumPy rules, aligned to the right) into out_type's
 * shape: stride 0 on broadcast dims. */
rlx_view rlx_view_broadcast(const rlx_graph* g, const rlx_plan* plan, rlx_tensor t,
                            const rlx_type* out_type);
/* Bytes a view touches (handles 0 and negative strides). */
rlx_range rlx_view_range(const rlx_view* v);
/* Index (in row-major order of the view's shape) of the first NaN/Inf
 * element of a float view over host memory `base` (an arena or a host
 * mirror of one), or -1 if none / not a float view. Used by debug_nans. */
int64_t rlx_view_first_non_finite(const uint8_t* base, const rlx_view* v);
/* Elements a view addresses (the product of its shape). */
int64_t rlx_view_numel(const rlx_view* v);
/* Copy, binary, compare, where, unary: every view of such a step has the
 * output's shape ("aligned"), so one index serves them all. */
int rlx_kernel_is_elementwise(rlx_kernel k);
/* For an elementwise step's n views (all shaped like views[0]): drops
 * size-1 dims and merges neighbours that are contiguous in every view, so
 * a kernel unravels as few dims per element as possible. */
void rlx_views_coalesce(rlx_view* views, int n);
/* Whether step s would have to compute in f64 (an f64 operand of anything
 * but a copy or gather): shader backends have no f64 arithmetic and send
 * such steps to the host fallback. */
int rlx_step_computes_in_f64(const rlx_step* s);
/* Fills step->reads / writes from its views. */
void rlx_step_derive_ranges(rlx_step* s);
/* The portable work geometry of step s (see rlx_work). */
rlx_work rlx_step_work(const rlx_step* s);
/* Completes a lowered step: ranges and work geometry. */
void rlx_step_finish(rlx_step* s);
/* Arena windows, for backends whose storage bindings address less than
 * the whole arena (WebGPU, Vulkan): the start (*base, a multiple of align)
 * of a window of `window` bytes inside a buffer of arena_size bytes that
 * covers every byte step s reads and writes. Returns 0 when its bytes are
 * too far apart for one window (the step then needs staging or the host). */
int rlx_step_window(const rlx_step* s, uint64_t arena_size, uint64_t window, uint64_t align,
                    uint64_t* base);
/* Staging, for a step rlx_step_window cannot place: its read and write
 * ranges merged into disjoint intervals (begins rounded down to `align`, so
 * views keep their alignment; ends up to 4 bytes), each given a place `at`
 * (a multiple of align) in a staging buffer of `bytes` bytes. */
#define RLX_STAGE_MAX (RLX_STEP_MAX_IN + RLX_STEP_MAX_OUT)
typedef struct rlx_stage_plan {
  int32_t n;
  rlx_range r[RLX_STAGE_MAX];
  uint64_t at[RLX_STAGE_MAX];
  uint8_t written[RLX_STAGE_MAX]; /* copy back after the step */
  uint64_t bytes;
} rlx_stage_plan;
void rlx_step_stage_plan(const rlx_step* s, uint64_t align, rlx_stage_plan* out);
/* Copy of step s with its views moved into the staging buffer of plan sp
 * (views that touch no bytes get offset 0). */
void rlx_step_staged(const rlx_step* s, const rlx_stage_plan* sp, rlx_step* out);
const char* rlx_kernel_name(rlx_kernel k);

/* Per-family lowering (lower.c: views, elementwise, layout, reduction, row
 * ops; lower_nn.c: matmul, norms, attention, rope, sample). Each appends the
 * steps for node `ni` (views and parameters; rlx_lower_node then finishes
 * them with rlx_step_finish) and reports failures into out->err. */
rlx_status rlx_lower_basic(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out);
rlx_status rlx_lower_nn(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out);
/* lower_train.c: CrossEntropy (+ backward), GatherBackward, SGD / Adam
 * updates; rlx_lower_is_train_op says which ops it takes. */
int rlx_lower_is_train_op(rlx_op op);
rlx_status rlx_lower_train(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out);
/* The native steps of node ni (the dispatch rlx_lower uses), ranges
 * derived. Host fallbacks use it to run a RLX_K_HOST node's own steps with
 * the CPU reference against a host mirror of the arena. */
rlx_status rlx_lower_node(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                          rlx_step_list* out, rlx_error* err);
/* Appends a zeroed step for node ni and returns it (NULL on allocation failure). */
rlx_step* rlx_step_push(rlx_step_list* l, rlx_kernel k, int32_t ni);

#endif
