/* Placeholders of the training contract (include/rlx.h, "training"):
 * each returns RLX_UNIMPLEMENTED until its implementation lands. Whoever
 * implements a function deletes its block here. This file goes away when
 * it is empty. */
#include <stddef.h>
#include "rlx.h"

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
