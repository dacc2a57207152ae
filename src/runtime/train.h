/* The trainer's internal state, shared by train.c (compile, step, params)
 * and train_ckpt.c (save / load). The public API is rlx.h's "training". */
#ifndef RLX_RUNTIME_TRAIN_H
#define RLX_RUNTIME_TRAIN_H

#include "ir/graph.h"

/* What a slot holds; the names of the state slots are "<param><suffix>". */
typedef enum train_role {
  TRAIN_PARAM = 0,    /* a trained param (an input of the step, device state) */
  TRAIN_FROZEN,       /* a param the step does not change (a param of the exec) */
  TRAIN_MOMENTUM,     /* SGD's momentum buffer */
  TRAIN_ADAM_M,
  TRAIN_ADAM_V,
  TRAIN_GRAD_ACC,     /* the gradient summed over an accumulation's micro-steps */
  TRAIN_ROLE_COUNT
} train_role;

extern const char* const rlx_train_role_names[TRAIN_ROLE_COUNT];

/* One named tensor the trainer keeps: a param (trained or frozen) or a
 * piece of optimizer state. The device holds the truth after a step; the
 * host copy is what was last given (set_param, load, zero init). */
typedef struct train_slot {
  char* name;          /* the exec's input (trained, state) or param (frozen) name */
  train_role role;
  rlx_type type;       /* static shape */
  int32_t output;      /* graph output holding the value after a step; -1: frozen */
  int32_t grad_output; /* keep_grads: the output of its gradient (trained params); -1 */
  void* host;          /* bytes of the last value given; NULL: never given */
  int host_newer;      /* the host copy is what the next step starts from */
} train_slot;

struct rlx_trainer {
  rlx_exec* exec;
  rlx_error err;
  rlx_train_options opt; /* frozen names not kept */
  train_slot* slots;
  int32_t n_slots;
  int32_t loss_output;  /* output 0 */
  int32_t norm_output;  /* sum of squares of the gradients (clipping, dynamic scale); -1 */
  int has_seed;         /* a loss-scale seed input exists */
  rlx_dtype loss_dtype;
  int32_t loss_rank;
  int64_t loss_shape[RLX_MAX_RANK];
  float lr;
  float loss_scale;      /* current scale (1 without scaling) */
  float last_scale;      /* the scale of the last step (kept gradients are divided by it) */
  int32_t good_steps;    /* dynamic scaling: finite updates since the last change */
  int64_t steps;         /* updates made */
  int32_t micro;         /* micro-steps into the current accumulation */
  int stepped;           /* a step ran: the device holds the values */
};

/* Reads slot s as `dtype` (its own, or any float from a float slot). */
rlx_status rlx_train_read_slot(rlx_trainer* t, train_slot* s, rlx_dtype dtype, void* dst,
                               size_t bytes);
/* Gives slot s a value (src_dtype its own, or f32 for a float slot). */
rlx_status rlx_train_write_slot(rlx_trainer* t, train_slot* s, rlx_dtype src_dtype,
                                const void* data, size_t bytes);
/* Slot by name, or NULL. */
train_slot* rlx_train_find_slot(rlx_trainer* t, const char* name);


/* A parsed checkpoint manifest (train_ckpt.c): the optimizer state and one
 * entry per tensor file. */
typedef struct rlx_ckpt_entry {
  char role[32], dtype[32], file[256];
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  char* name; /* malloc'd */
} rlx_ckpt_entry;
typedef struct rlx_ckpt {
  char optimizer[32];
  long long steps;
  int micro, good_steps;
  double loss_scale;
  rlx_ckpt_entry* e;
  int32_t n;
} rlx_ckpt;
/* Parses manifest text (NUL-terminated; path names it in messages). On
 * failure *c may hold entries: rlx_ckpt_free either way. The fuzz target
 * tests/fuzz_ckpt.c drives it. */
rlx_status rlx_ckpt_parse(rlx_error* err, const char* text, const char* path, rlx_ckpt* c);
void rlx_ckpt_free(rlx_ckpt* c);

#endif
