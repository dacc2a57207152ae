/* Placeholders of the training contract (include/rlx.h, "training"):
 * each returns RLX_UNIMPLEMENTED until its implementation lands. Whoever
 * implements a function deletes its block here. This file goes away when
 * it is empty. */
#include <stddef.h>
#include "rlx.h"

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
