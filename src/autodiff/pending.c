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

/* pending: rlx_graph_add_gather_backward */
rlx_status rlx_graph_add_gather_backward(rlx_graph* g, rlx_tensor dy, rlx_tensor idx, int32_t axis, rlx_dim axis_size, rlx_tensor* out) {
  (void)g;
  (void)dy;
  (void)idx;
  (void)axis;
  (void)axis_size;
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

/* pending: rlx_graph_add_cross_entropy */
rlx_status rlx_graph_add_cross_entropy(rlx_graph* g, rlx_tensor logits, rlx_tensor targets, int64_t ignore_index, float label_smoothing, rlx_tensor* out) {
  (void)g;
  (void)logits;
  (void)targets;
  (void)ignore_index;
  (void)label_smoothing;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_cross_entropy_backward */
rlx_status rlx_graph_add_cross_entropy_backward(rlx_graph* g, rlx_tensor logits, rlx_tensor targets, rlx_tensor d_loss, int64_t ignore_index, float label_smoothing, rlx_tensor* out) {
  (void)g;
  (void)logits;
  (void)targets;
  (void)d_loss;
  (void)ignore_index;
  (void)label_smoothing;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_mse_loss */
rlx_status rlx_graph_add_mse_loss(rlx_graph* g, rlx_tensor a, rlx_tensor b, rlx_tensor* out) {
  (void)g;
  (void)a;
  (void)b;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_sgd_update */
rlx_status rlx_graph_add_sgd_update(rlx_graph* g, rlx_tensor p, rlx_tensor grad, rlx_tensor momentum_buf, rlx_tensor hyper, const rlx_sgd_desc* desc, rlx_tensor* out_p, rlx_tensor* out_buf) {
  (void)g;
  (void)p;
  (void)grad;
  (void)momentum_buf;
  (void)hyper;
  (void)desc;
  (void)out_p;
  (void)out_buf;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_add_adam_update */
rlx_status rlx_graph_add_adam_update(rlx_graph* g, rlx_tensor p, rlx_tensor grad, rlx_tensor m, rlx_tensor v, rlx_tensor hyper, const rlx_adam_desc* desc, rlx_tensor* out_p, rlx_tensor* out_m, rlx_tensor* out_v) {
  (void)g;
  (void)p;
  (void)grad;
  (void)m;
  (void)v;
  (void)hyper;
  (void)desc;
  (void)out_p;
  (void)out_m;
  (void)out_v;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_graph_grad */
rlx_status rlx_graph_grad(rlx_graph* g, rlx_tensor loss, const rlx_tensor* wrt, int32_t n_wrt, rlx_tensor seed, rlx_tensor* out_grads) {
  (void)g;
  (void)loss;
  (void)wrt;
  (void)n_wrt;
  (void)seed;
  (void)out_grads;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_train_options_init */
void rlx_train_options_init(rlx_train_options* o, rlx_optimizer optimizer) {
  (void)o;
  (void)optimizer;
}

/* pending: rlx_train_compile */
rlx_status rlx_train_compile(rlx_graph* g, rlx_tensor loss, const char* device, const rlx_compile_options* copt, const rlx_train_options* topt, rlx_trainer** out) {
  (void)g;
  (void)loss;
  (void)device;
  (void)copt;
  (void)topt;
  (void)out;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_destroy */
void rlx_trainer_destroy(rlx_trainer* t) {
  (void)t;
}

/* pending: rlx_trainer_last_error */
const char* rlx_trainer_last_error(const rlx_trainer* t) {
  (void)t;
  return "training is not built yet";
}

/* pending: rlx_trainer_set_param */
rlx_status rlx_trainer_set_param(rlx_trainer* t, const char* name, rlx_dtype src_dtype, const void* data, size_t bytes) {
  (void)t;
  (void)name;
  (void)src_dtype;
  (void)data;
  (void)bytes;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_read_param */
rlx_status rlx_trainer_read_param(rlx_trainer* t, const char* name, rlx_dtype dtype, void* dst, size_t bytes) {
  (void)t;
  (void)name;
  (void)dtype;
  (void)dst;
  (void)bytes;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_set_input */
rlx_status rlx_trainer_set_input(rlx_trainer* t, const char* name, rlx_dtype dtype, const rlx_dim* shape, int32_t rank, const void* data, size_t bytes) {
  (void)t;
  (void)name;
  (void)dtype;
  (void)shape;
  (void)rank;
  (void)data;
  (void)bytes;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_set_lr */
rlx_status rlx_trainer_set_lr(rlx_trainer* t, float lr) {
  (void)t;
  (void)lr;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_step */
rlx_status rlx_trainer_step(rlx_trainer* t, float* out_loss) {
  (void)t;
  (void)out_loss;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_step_count */
int64_t rlx_trainer_step_count(const rlx_trainer* t) {
  (void)t;
  return 0;
}

/* pending: rlx_trainer_read_grad */
rlx_status rlx_trainer_read_grad(rlx_trainer* t, const char* name, rlx_dtype dtype, void* dst, size_t bytes) {
  (void)t;
  (void)name;
  (void)dtype;
  (void)dst;
  (void)bytes;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_save */
rlx_status rlx_trainer_save(rlx_trainer* t, const char* dir) {
  (void)t;
  (void)dir;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_load */
rlx_status rlx_trainer_load(rlx_trainer* t, const char* dir) {
  (void)t;
  (void)dir;
  return RLX_UNIMPLEMENTED;
}

/* pending: rlx_trainer_exec */
rlx_exec* rlx_trainer_exec(rlx_trainer* t) {
  (void)t;
  return NULL;
}
