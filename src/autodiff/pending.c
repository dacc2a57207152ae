/* Placeholders of the training contract (include/rlx.h, "training"):
 * each returns RLX_UNIMPLEMENTED until its implementation lands. Whoever
 * implements a function deletes its block here. This file goes away when
 * it is empty. */
#include <stddef.h>
#include "rlx.h"

/* pending: rlx_graph_add_attention_backward */
rlx_status rlx_graph_add_attention_backward(rlx_graph* g, rlx_tensor q, rlx_tensor k, rlx_tensor v, rlx_tensor mask, rlx_tensor out, rlx_tensor d_out, const rlx_attention_desc* desc, rlx_tensor* out_dq, rlx_tensor* out_dk, rlx_tensor* out_dv) {
  (void)g;
  (void)q;
  (void)k;
  (void)v;
  (void)mask;
  (void)out;
  (void)d_out;
  (void)desc;
  (void)out_dq;
  (void)out_dk;
  (void)out_dv;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_layer_norm_backward */
rlx_status rlx_graph_add_layer_norm_backward(rlx_graph* g, rlx_tensor x, rlx_tensor gamma, rlx_tensor dy, int32_t axis, float eps, rlx_tensor* out_dx, rlx_tensor* out_dgamma, rlx_tensor* out_dbeta) {
  (void)g;
  (void)x;
  (void)gamma;
  (void)dy;
  (void)axis;
  (void)eps;
  (void)out_dx;
  (void)out_dgamma;
  (void)out_dbeta;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_rms_norm_backward */
rlx_status rlx_graph_add_rms_norm_backward(rlx_graph* g, rlx_tensor x, rlx_tensor gamma, rlx_tensor dy, float eps, rlx_tensor* out_dx, rlx_tensor* out_dgamma) {
  (void)g;
  (void)x;
  (void)gamma;
  (void)dy;
  (void)eps;
  (void)out_dx;
  (void)out_dgamma;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_softmax_backward */
rlx_status rlx_graph_add_softmax_backward(rlx_graph* g, rlx_tensor y, rlx_tensor dy, int32_t axis, int32_t log_softmax, rlx_tensor* out) {
  (void)g;
  (void)y;
  (void)dy;
  (void)axis;
  (void)log_softmax;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_rope_backward */
rlx_status rlx_graph_add_rope_backward(rlx_graph* g, rlx_tensor dy, rlx_tensor cos_t, rlx_tensor sin_t, int32_t head_dim, int32_t n_rot, rlx_rope_style style, rlx_layout layout, rlx_tensor* out) {
  (void)g;
  (void)dy;
  (void)cos_t;
  (void)sin_t;
  (void)head_dim;
  (void)n_rot;
  (void)style;
  (void)layout;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_cumsum_backward */
rlx_status rlx_graph_add_cumsum_backward(rlx_graph* g, rlx_tensor dy, int32_t axis, int32_t exclusive, int32_t reverse, rlx_tensor* out) {
  (void)g;
  (void)dy;
  (void)axis;
  (void)exclusive;
  (void)reverse;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_conv_backward_weight */
rlx_status rlx_graph_add_conv_backward_weight(rlx_graph* g, rlx_tensor x, rlx_tensor dy, rlx_tensor w, int32_t n_spatial, const int64_t* strides, const int64_t* pads, const int64_t* dilations, int32_t groups, rlx_conv_layout layout, rlx_tensor* out) {
  (void)g;
  (void)x;
  (void)dy;
  (void)w;
  (void)n_spatial;
  (void)strides;
  (void)pads;
  (void)dilations;
  (void)groups;
  (void)layout;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_pool_backward */
rlx_status rlx_graph_add_pool_backward(rlx_graph* g, rlx_tensor x, rlx_tensor dy, rlx_pool_kind kind, int32_t n_spatial, const int64_t* kernel, const int64_t* strides, const int64_t* pads, const int64_t* dilations, int32_t ceil_mode, int32_t count_include_pad, rlx_tensor* out) {
  (void)g;
  (void)x;
  (void)dy;
  (void)kind;
  (void)n_spatial;
  (void)kernel;
  (void)strides;
  (void)pads;
  (void)dilations;
  (void)ceil_mode;
  (void)count_include_pad;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

