/* Reverse-mode autodiff (rlx_graph_grad, grad.c) and its gradient rules
 * (grad_rules.c: views, elementwise, reductions; grad_nn.c: contractions,
 * normalisations, transformer and vision ops). One rule per op, found in
 * rlx_grad_rules[] by op kind. */
#ifndef RLX_AUTODIFF_GRAD_H
#define RLX_AUTODIFF_GRAD_H

#include "ir/graph.h"

typedef struct rlx_grad_ctx {
  rlx_graph* g;
  const uint8_t* needs; /* per value of the forward graph: a gradient flows into it */
  int32_t n_values;     /* values of the forward graph (those `needs` covers) */
} rlx_grad_ctx;

/* A rule reads the node n (a copy: the graph grows while rules run), the
 * cotangents of its outputs (dy[i] == RLX_NONE: zero) and writes the
 * cotangent of each input that wants one (rlx_grad_wants) into dx[i],
 * shaped and typed like that input; dx[i] stays RLX_NONE for a zero
 * contribution. At least one dy is set when a rule runs. */
typedef rlx_status (*rlx_grad_rule)(rlx_grad_ctx* c, const rlx_node* n, const rlx_tensor* dy,
                                    rlx_tensor* dx);

/* Indexed by op kind: NULL = no rule (an error when the op is on a path
 * from a wrt to the loss); rlx_grad_none = no gradient flows through the
 * op (StopGradient; ops whose outputs are piecewise constant). */
extern const rlx_grad_rule rlx_grad_rules[RLX_OP_COUNT];
rlx_status rlx_grad_none(rlx_grad_ctx* c, const rlx_node* n, const rlx_tensor* dy,
                         rlx_tensor* dx);

/* 1 when input i of n carries a gradient (a float value on a wrt's path). */
int rlx_grad_wants(const rlx_grad_ctx* c, const rlx_node* n, int32_t i);

/* ---- small builders the rules share (each fails with the graph's message).
 * A type pointer from rlx_tensor_type points into g->values, which every
 * builder call may move: rules copy a type they keep across calls. */
/* A rank-0 constant v in dtype dt. */
rlx_status rlx_grad_scalar(rlx_graph* g, rlx_dtype dt, double v, rlx_tensor* out);
/* Zeros of type t (a scalar expanded, so symbolic shapes work). */
rlx_status rlx_grad_zeros(rlx_graph* g, const rlx_type* t, rlx_tensor* out);
/* The gradient of a broadcast: sums t over the dims that broadcasting to
 * t's shape added or stretched from 1, reshaped to `to`. */
rlx_status rlx_grad_unbroadcast(rlx_graph* g, rlx_tensor t, const rlx_type* to, rlx_tensor* out);
/* a op b for a scalar b. */
rlx_status rlx_grad_bin_scalar(rlx_graph* g, rlx_binary_op op, rlx_tensor a, double b,
                               rlx_tensor* out);
/* where(cond, a, 0) with a's type. */
rlx_status rlx_grad_mask(rlx_graph* g, rlx_tensor cond, rlx_tensor a, rlx_tensor* out);
/* Sum of t over axes (bitmask), dims kept. */
rlx_status rlx_grad_sum_keep(rlx_graph* g, rlx_tensor t, uint32_t axes, rlx_tensor* out);
/* The gradient of an activation at x (output y) times dy. */
rlx_status rlx_grad_activation(rlx_graph* g, rlx_activation act, rlx_tensor x, rlx_tensor y,
                               rlx_tensor dy, rlx_tensor* out);

/* Rules in grad_nn.c and grad_train.c (the table in grad_rules.c points at
 * them). */
#define RLX_GRAD_RULE(name) \
  rlx_status name(rlx_grad_ctx* c, const rlx_node* n, const rlx_tensor* dy, rlx_tensor* dx)
RLX_GRAD_RULE(rlx_grad_matmul);
RLX_GRAD_RULE(rlx_grad_fused_matmul_bias_act);
RLX_GRAD_RULE(rlx_grad_layer_norm);
RLX_GRAD_RULE(rlx_grad_rms_norm);
RLX_GRAD_RULE(rlx_grad_fused_residual_layer_norm);
RLX_GRAD_RULE(rlx_grad_fused_residual_rms_norm);
RLX_GRAD_RULE(rlx_grad_attention);
RLX_GRAD_RULE(rlx_grad_rope);
RLX_GRAD_RULE(rlx_grad_pool);
RLX_GRAD_RULE(rlx_grad_conv);
RLX_GRAD_RULE(rlx_grad_conv_transpose);
RLX_GRAD_RULE(rlx_grad_im2col);
RLX_GRAD_RULE(rlx_grad_group_norm);
RLX_GRAD_RULE(rlx_grad_channel_norm);
RLX_GRAD_RULE(rlx_grad_batch_norm);
RLX_GRAD_RULE(rlx_grad_lrn);
RLX_GRAD_RULE(rlx_grad_resize);
RLX_GRAD_RULE(rlx_grad_dequant_matmul);
/* grad_moe.c: GroupedMatMul and DequantGroupedMatMul. */
RLX_GRAD_RULE(rlx_grad_grouped_matmul);
/* grad_sampler.c */
RLX_GRAD_RULE(rlx_grad_grid_sample);
RLX_GRAD_RULE(rlx_grad_roi_align);
/* grad_train.c */
RLX_GRAD_RULE(rlx_grad_cross_entropy);
RLX_GRAD_RULE(rlx_grad_cumsum_backward);
RLX_GRAD_RULE(rlx_grad_gather_backward);
RLX_GRAD_RULE(rlx_grad_rope_backward);
RLX_GRAD_RULE(rlx_grad_softmax_backward);
RLX_GRAD_RULE(rlx_grad_conv_backward_weight);
RLX_GRAD_RULE(rlx_grad_pool_backward);

#endif
