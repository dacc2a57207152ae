/* The training API (rlx.h "training"): one executable runs forward,
 * backward (rlx_graph_grad) and the optimizer update. Trained params and
 * optimizer state are inputs of that executable declared as device state
 * of the outputs that replace them, so they stay on the device between
 * steps; the host sends a 4-float hyper tensor and the batch, and reads
 * back the loss (plus the gradients' sum of squares when clipping or
 * dynamic loss scaling need it). Checkpoints are in train_ckpt.c. */
#include "runtime/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/precision.h"

const char* const rlx_train_role_names[TRAIN_ROLE_COUNT] = {
    "param", "frozen", "momentum", "adam_m", "adam_v", "grad_acc"};

/* Name suffixes of the state inputs (the brief's "<param>.adam_m"). */
static const char* const role_suffix[TRAIN_ROLE_COUNT] = {
    "", "", ".momentum", ".adam_m", ".adam_v", ".grad_acc"};

#define HYPER_NAME "rlx.train.hyper"
#define SEED_NAME "rlx.train.loss_seed"
#define DYNAMIC_INITIAL_SCALE 65536.0f /* PyTorch GradScaler's init_scale */
#define DYNAMIC_GROWTH_INTERVAL 2000

void rlx_train_options_init(rlx_train_options* o, rlx_optimizer optimizer) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->optimizer = optimizer;
  o->lr = optimizer == RLX_OPTIMIZER_SGD ? 1e-2f : 1e-3f;
  o->adam.beta1 = 0.9f;
  o->adam.beta2 = 0.999f;
  o->adam.eps = 1e-8f;
  o->adam.weight_decay = optimizer == RLX_OPTIMIZER_ADAMW ? 0.01f : 0.0f;
  o->adam.decoupled = optimizer == RLX_OPTIMIZER_ADAMW;
  o->accumulate = 1;
}

/* ------------------------------------------------------------ slots */

static int64_t slot_bytes(const train_slot* s) { return rlx_type_bytes(&s->type); }

train_slot* rlx_train_find_slot(rlx_trainer* t, const char* name) {
  for (int32_t i = 0; name && i < t->n_slots; i++)
    if (strcmp(t->slots[i].name, name) == 0) return &t->slots[i];
  return NULL;
}

static rlx_status add_slot(rlx_trainer* t, const char* name, const char* suffix, train_role role,
                           const rlx_type* type, train_slot** out) {
  train_slot* grown = realloc(t->slots, sizeof *grown * (size_t)(t->n_slots + 1));
  RLX_CHECK_ALLOC(&t->err, grown);
  t->slots = grown;
  train_slot* s = &t->slots[t->n_slots];
  memset(s, 0, sizeof *s);
  size_t n = strlen(name), m = strlen(suffix);
  s->name = malloc(n + m + 1);
  RLX_CHECK_ALLOC(&t->err, s->name);
  memcpy(s->name, name, n);
  memcpy(s->name + n, suffix, m + 1);
  s->role = role;
  s->type = *type;
  s->output = s->grad_output = -1;
  t->n_slots++;
  *out = s;
  return RLX_OK;
}

/* Converts n elements between dtypes that read_slot / write_slot accept. */
static rlx_status convert_into(rlx_error* err, void* dst, rlx_dtype to, const void* src,
                               rlx_dtype from, int64_t n) {
  if (from == to) {
    memcpy(dst, src, (size_t)n * rlx_dtype_size(to));
    return RLX_OK;
  }
  if (!rlx_dtype_is_float(from) || !rlx_dtype_is_float(to))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "cannot convert %s to %s", rlx_dtype_name(from),
                    rlx_dtype_name(to));
  return rlx_dtype_convert(dst, to, src, from, n);
}

/* Reads output `index` of the exec, which is not selected between steps:
 * selected for this read only (a read downloads from the device arena). */
static rlx_status read_output(rlx_trainer* t, int32_t index, rlx_dtype dtype, void* dst,
                              size_t bytes) {
  rlx_status s = rlx_exec_select_outputs(t->exec, NULL, -1);
  if (s == RLX_OK) s = rlx_exec_read_output(t->exec, index, dtype, dst, bytes);
  if (s != RLX_OK) rlx_fail(&t->err, s, "%s", rlx_exec_last_error(t->exec));
  int32_t keep[2] = {t->loss_output, t->norm_output};
  rlx_exec_select_outputs(t->exec, keep, t->norm_output >= 0 ? 2 : 1);
  return s;
}

rlx_status rlx_train_read_slot(rlx_trainer* t, train_slot* s, rlx_dtype dtype, void* dst,
                               size_t bytes) {
  int64_t n = rlx_type_numel(&s->type);
  if (!dst || bytes != (size_t)n * rlx_dtype_size(dtype))
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                    "'%s' is %lld elements: %lld bytes as %s, got %zu", s->name, (long long)n,
                    (long long)n * (long long)rlx_dtype_size(dtype), rlx_dtype_name(dtype), bytes);
  if (dtype != s->type.dtype && !(rlx_dtype_is_float(dtype) && rlx_dtype_is_float(s->type.dtype)))
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "'%s' is %s; cannot read it as %s", s->name,
                    rlx_dtype_name(s->type.dtype), rlx_dtype_name(dtype));
  if (s->output >= 0 && t->stepped && !s->host_newer)
    return read_output(t, s->output, dtype, dst, bytes);
  if (!s->host)
    return rlx_fail(&t->err, RLX_FAILED_PRECONDITION, "param '%s' was not set", s->name);
  return convert_into(&t->err, dst, dtype, s->host, s->type.dtype, n);
}

/* Hands the host copy of s to the executable: an input (trained values and
 * state) or a param (frozen). */
static rlx_status upload_slot(rlx_trainer* t, train_slot* s) {
  rlx_status st;
  if (s->role == TRAIN_FROZEN)
    st = rlx_exec_set_param(t->exec, s->name, s->type.dtype, s->host, (size_t)slot_bytes(s));
  else
    st = rlx_exec_set_input(t->exec, s->name, s->type.dtype, s->type.shape, s->type.rank, s->host,
                            (size_t)slot_bytes(s));
  if (st != RLX_OK) return rlx_fail(&t->err, st, "%s", rlx_exec_last_error(t->exec));
  return RLX_OK;
}

rlx_status rlx_train_write_slot(rlx_trainer* t, train_slot* s, rlx_dtype src_dtype,
                                const void* data, size_t bytes) {
  rlx_dtype to = s->type.dtype;
  if (src_dtype != to && !(src_dtype == RLX_F32 && rlx_dtype_is_float(to)))
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "'%s' is %s, data given as %s", s->name,
                    rlx_dtype_name(to), rlx_dtype_name(src_dtype));
  int64_t n = rlx_type_numel(&s->type);
  if (!data || bytes != (size_t)n * rlx_dtype_size(src_dtype))
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "'%s' needs %lld bytes as %s, got %zu", s->name,
                    (long long)n * (long long)rlx_dtype_size(src_dtype), rlx_dtype_name(src_dtype),
                    bytes);
  if (!s->host) {
    s->host = malloc((size_t)slot_bytes(s) + 1);
    RLX_CHECK_ALLOC(&t->err, s->host);
  }
  RLX_RETURN_IF_ERROR(convert_into(&t->err, s->host, to, data, src_dtype, n));
  s->host_newer = 1;
  return upload_slot(t, s);
}

/* ------------------------------------------------------------ building the step */

/* Graph under construction: the user's graph copied, trained params turned
 * into inputs, then gradients, hyper arithmetic and updates appended. */
typedef struct builder {
  rlx_trainer* t;
  rlx_graph* g;
  rlx_tensor loss;
  rlx_tensor hyper;     /* the host's hyper tensor */
  rlx_tensor hyper_eff; /* with the device's clipping coefficient and finiteness */
  rlx_tensor apply;     /* bool [1]: hyper[APPLY] (this step updates) */
  rlx_tensor norm_sq;   /* f32 [] sum of squares of the effective gradients, or NONE */
  int32_t n_train;
  rlx_tensor* wrt;      /* per trained param: its value (an input now) */
  int32_t* slot_of;     /* per trained param: its slot */
  rlx_tensor* grads;    /* per trained param: d loss / d param */
  rlx_tensor* eff;      /* what the update reads: the gradient, or its accumulation */
  int32_t* acc_slot;    /* per trained param: its accumulator's slot, or -1 */
  rlx_tensor* outs;
  int32_t n_outs, cap_outs;
  const char** state_names;
  int32_t* state_outs;
  int32_t n_states;
} builder;

static rlx_status b_fail(builder* b) {
  return rlx_fail(&b->t->err, RLX_INVALID_ARGUMENT, "%s", b->g->err.msg);
}

/* Names a node the trainer added so the precision pass keeps it in f32
 * (norms, accumulators and hyper arithmetic: master precision). */
static rlx_status keep_f32(builder* b, rlx_tensor v, const char* what) {
  char name[96];
  snprintf(name, sizeof name, "%s%s", RLX_PRECISION_F32_LABEL, what);
  return rlx_graph_set_name(b->g, v, name) == RLX_OK ? RLX_OK : b_fail(b);
}

#define B_TRY(b, expr) \
  do { if ((expr) != RLX_OK) return b_fail(b); } while (0)

static rlx_status add_output(builder* b, rlx_tensor v, int32_t* out_index) {
  if (b->n_outs == b->cap_outs) {
    int32_t cap = b->cap_outs ? 2 * b->cap_outs : 16;
    rlx_tensor* grown = realloc(b->outs, sizeof *grown * (size_t)cap);
    RLX_CHECK_ALLOC(&b->t->err, grown);
    b->outs = grown;
    b->cap_outs = cap;
  }
  if (out_index) *out_index = b->n_outs;
  b->outs[b->n_outs++] = v;
  return RLX_OK;
}

/* Declares slot s as device state replaced by value v (a new output). */
static rlx_status add_state(builder* b, train_slot* s, rlx_tensor v) {
  RLX_RETURN_IF_ERROR(add_output(b, v, &s->output));
  const char** names = realloc(b->state_names, sizeof *names * (size_t)(b->n_states + 1));
  if (names) b->state_names = names;
  int32_t* outs = realloc(b->state_outs, sizeof *outs * (size_t)(b->n_states + 1));
  if (outs) b->state_outs = outs;
  RLX_CHECK_ALLOC(&b->t->err, names && outs ? names : NULL);
  b->state_names[b->n_states] = s->name;
  b->state_outs[b->n_states++] = s->output;
  return RLX_OK;
}

static rlx_status scalar_const(builder* b, rlx_dtype dtype, int32_t rank, double value,
                               rlx_tensor* out) {
  uint8_t bytes[16];
  float f = (float)value;
  RLX_RETURN_IF_ERROR(rlx_dtype_convert(bytes, dtype, &f, RLX_F32, 1));
  rlx_dim one[1] = {1};
  B_TRY(b, rlx_graph_add_constant(b->g, dtype, one, rank, bytes, rlx_dtype_size(dtype), out));
  return RLX_OK;
}

static int is_frozen(const rlx_train_options* o, const char* name) {
  for (int32_t k = 0; k < o->n_frozen; k++)
    if (o->frozen[k] && strcmp(o->frozen[k], name) == 0) return 1;
  return 0;
}

/* Every name in topt->frozen must be a param of the graph. */
static rlx_status check_frozen(builder* b, const rlx_train_options* o) {
  if (o->n_frozen < 0 || (o->n_frozen > 0 && !o->frozen))
    return rlx_fail(&b->t->err, RLX_INVALID_ARGUMENT, "n_frozen %d without a frozen array",
                    o->n_frozen);
  for (int32_t k = 0; k < o->n_frozen; k++) {
    int found = 0;
    for (int32_t i = 0; o->frozen[k] && i < b->g->n_nodes; i++) {
      const rlx_node* n = &b->g->nodes[i];
      found |= n->op == RLX_OP_PARAM && strcmp(n->a.name, o->frozen[k]) == 0;
    }
    if (!found)
      return rlx_fail(&b->t->err, RLX_NOT_FOUND, "frozen param '%s' is not a param of the graph",
                      o->frozen[k] ? o->frozen[k] : "(null)");
  }
  return RLX_OK;
}

/* Turns every trained param into an input of the same name and type (so
 * hoisting and param upload leave it alone) and records the slots. */
static rlx_status split_params(builder* b, const rlx_train_options* o) {
  RLX_RETURN_IF_ERROR(check_frozen(b, o));
  b->wrt = malloc(sizeof(rlx_tensor) * (size_t)(b->g->n_nodes + 1));
  b->slot_of = malloc(sizeof(int32_t) * (size_t)(b->g->n_nodes + 1));
  RLX_CHECK_ALLOC(&b->t->err, b->wrt && b->slot_of ? b->wrt : NULL);
  for (int32_t i = 0; i < b->g->n_nodes; i++) {
    rlx_node* n = &b->g->nodes[i];
    if (n->op != RLX_OP_PARAM) continue;
    const rlx_type* type = rlx_tensor_type(b->g, n->out[0]);
    int trained = rlx_dtype_is_float(type->dtype) && !is_frozen(o, n->a.name);
    if (rlx_type_numel(type) < 0)
      return rlx_fail(&b->t->err, RLX_INVALID_ARGUMENT, "param '%s' has a symbolic shape",
                      n->a.name);
    train_slot* s = NULL;
    RLX_RETURN_IF_ERROR(
        add_slot(b->t, n->a.name, "", trained ? TRAIN_PARAM : TRAIN_FROZEN, type, &s));
    if (!trained) continue;
    n->op = RLX_OP_INPUT;
    b->wrt[b->n_train] = n->out[0];
    b->slot_of[b->n_train++] = (int32_t)(s - b->t->slots);
  }
  if (b->n_train == 0)
    return rlx_fail(&b->t->err, RLX_INVALID_ARGUMENT,
                    "nothing to train: the graph has no float param that is not frozen");
  return RLX_OK;
}

/* An input named like a state or the hyper tensor would be ambiguous. */
static rlx_status check_name_free(builder* b, const char* name) {
  for (int32_t i = 0; i < b->g->n_nodes; i++) {
    const rlx_node* n = &b->g->nodes[i];
    if ((n->op == RLX_OP_INPUT || n->op == RLX_OP_PARAM) && strcmp(n->a.name, name) == 0)
      return rlx_fail(&b->t->err, RLX_INVALID_ARGUMENT,
                      "the graph already has a value named '%s' (a name the trainer uses)", name);
  }
  return RLX_OK;
}

static rlx_status add_state_input(builder* b, int32_t k, train_role role, rlx_tensor* out,
                                  train_slot** out_slot) {
  const train_slot* p = &b->t->slots[b->slot_of[k]];
  rlx_type type = p->type;
  size_t len = strlen(p->name);
  char* base = malloc(len + 1);
  RLX_CHECK_ALLOC(&b->t->err, base);
  memcpy(base, p->name, len + 1); /* add_slot may move p */
  train_slot* s = NULL;
  rlx_status st = add_slot(b->t, base, role_suffix[role], role, &type, &s);
  free(base);
  RLX_RETURN_IF_ERROR(st);
  RLX_RETURN_IF_ERROR(check_name_free(b, s->name));
  B_TRY(b, rlx_graph_add_input(b->g, s->name, type.dtype, type.shape, type.rank, out));
  *out_slot = s;
  return RLX_OK;
}

/* hyper (f32 [RLX_HYPER_COUNT]), the bool `apply` from it, and the seed
 * input when the loss is scaled. */
static rlx_status add_hyper(builder* b, rlx_tensor* seed) {
  rlx_trainer* t = b->t;
  RLX_RETURN_IF_ERROR(check_name_free(b, HYPER_NAME));
  rlx_dim hs[1] = {RLX_HYPER_COUNT};
  B_TRY(b, rlx_graph_add_input(b->g, HYPER_NAME, RLX_F32, hs, 1, &b->hyper));
  rlx_tensor a, half;
  B_TRY(b, rlx_graph_add_narrow(b->g, b->hyper, 0, RLX_HYPER_APPLY, 1, &a));
  RLX_RETURN_IF_ERROR(keep_f32(b, a, "apply_value"));
  RLX_RETURN_IF_ERROR(scalar_const(b, RLX_F32, 1, 0.5, &half));
  B_TRY(b, rlx_graph_add_compare(b->g, RLX_CMP_GT, a, half, &b->apply));
  RLX_RETURN_IF_ERROR(keep_f32(b, b->apply, "apply"));
  b->hyper_eff = b->hyper;
  *seed = RLX_NONE;
  if (!t->has_seed) return RLX_OK;
  RLX_RETURN_IF_ERROR(check_name_free(b, SEED_NAME));
  B_TRY(b, rlx_graph_add_input(b->g, SEED_NAME, t->loss_dtype, t->loss_shape, t->loss_rank, seed));
  return RLX_OK;
}

/* With accumulation: acc' = acc + g is what the update reads, and the
 * accumulator restarts at zero after an update (acc = apply ? 0 : acc').
 * The sum comes first; the restart (accumulate_reset) is added after the
 * updates, so it is the last reader of acc' and the planner may keep both in
 * the accumulator's own bytes. */
static rlx_status accumulate(builder* b, int32_t k, int32_t* acc_slot) {
  rlx_tensor acc, sum;
  train_slot* s = NULL;
  RLX_RETURN_IF_ERROR(add_state_input(b, k, TRAIN_GRAD_ACC, &acc, &s));
  *acc_slot = (int32_t)(s - b->t->slots);
  B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_ADD, acc, b->grads[k], &sum));
  RLX_RETURN_IF_ERROR(keep_f32(b, sum, "grad_acc"));
  b->eff[k] = sum;
  return RLX_OK;
}

static rlx_status accumulate_reset(builder* b, int32_t k, int32_t acc_slot) {
  train_slot* s = &b->t->slots[acc_slot];
  rlx_tensor zero, next;
  RLX_RETURN_IF_ERROR(scalar_const(b, s->type.dtype, 0, 0.0, &zero));
  B_TRY(b, rlx_graph_add_where(b->g, b->apply, zero, b->eff[k], &next));
  RLX_RETURN_IF_ERROR(keep_f32(b, next, "grad_acc_next"));
  return add_state(b, s, next);
}

/* Sum over every effective gradient of its squares, in f32. */
static rlx_status grad_norm_sq(builder* b) {
  rlx_tensor total = RLX_NONE;
  for (int32_t k = 0; k < b->n_train; k++) {
    rlx_tensor g = b->eff[k], sq, part;
    if (rlx_tensor_type(b->g, g)->dtype != RLX_F32) {
      B_TRY(b, rlx_graph_add_cast(b->g, g, RLX_F32, &g));
      RLX_RETURN_IF_ERROR(keep_f32(b, g, "grad_f32"));
    }
    B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_MUL, g, g, &sq));
    RLX_RETURN_IF_ERROR(keep_f32(b, sq, "grad_sq"));
    B_TRY(b, rlx_graph_add_reduce(b->g, RLX_RED_SUM, sq, NULL, 0, 0, &part));
    RLX_RETURN_IF_ERROR(keep_f32(b, part, "grad_sq_sum"));
    if (total == RLX_NONE) {
      total = part;
      continue;
    }
    B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_ADD, total, part, &total));
    RLX_RETURN_IF_ERROR(keep_f32(b, total, "grad_norm_sq"));
  }
  b->norm_sq = total;
  return RLX_OK;
}

/* min(1, clip / (norm + 1e-6)) as f32 [1], norm that of the averaged,
 * unscaled gradients: sqrt(norm_sq) * hyper[GRAD_SCALE] (PyTorch's
 * clip_grad_norm_). */
static rlx_status clip_coefficient(builder* b, rlx_tensor norm1, rlx_tensor* out) {
  rlx_tensor scale, norm, eps, clip, one, den, q;
  B_TRY(b, rlx_graph_add_narrow(b->g, b->hyper, 0, RLX_HYPER_GRAD_SCALE, 1, &scale));
  RLX_RETURN_IF_ERROR(keep_f32(b, scale, "host_scale"));
  B_TRY(b, rlx_graph_add_activation(b->g, RLX_ACT_SQRT, norm1, &norm));
  RLX_RETURN_IF_ERROR(keep_f32(b, norm, "grad_norm_raw"));
  B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_MUL, norm, scale, &norm));
  RLX_RETURN_IF_ERROR(keep_f32(b, norm, "grad_norm"));
  RLX_RETURN_IF_ERROR(scalar_const(b, RLX_F32, 1, 1e-6, &eps));
  RLX_RETURN_IF_ERROR(scalar_const(b, RLX_F32, 1, b->t->opt.clip_norm, &clip));
  RLX_RETURN_IF_ERROR(scalar_const(b, RLX_F32, 1, 1.0, &one));
  B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_ADD, norm, eps, &den));
  RLX_RETURN_IF_ERROR(keep_f32(b, den, "clip_den"));
  B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_DIV, clip, den, &q));
  RLX_RETURN_IF_ERROR(keep_f32(b, q, "clip_ratio"));
  B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_MIN, one, q, out));
  return keep_f32(b, *out, "clip_coef");
}

/* 1 where norm_sq is finite, else 0 (f32 [1]): x - x is 0 only for finite x. */
static rlx_status finite_flag(builder* b, rlx_tensor norm1, rlx_tensor* out) {
  rlx_tensor diff, zero, one, ok;
  B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_SUB, norm1, norm1, &diff));
  RLX_RETURN_IF_ERROR(keep_f32(b, diff, "finite_diff"));
  RLX_RETURN_IF_ERROR(scalar_const(b, RLX_F32, 1, 0.0, &zero));
  RLX_RETURN_IF_ERROR(scalar_const(b, RLX_F32, 1, 1.0, &one));
  B_TRY(b, rlx_graph_add_compare(b->g, RLX_CMP_EQ, diff, zero, &ok));
  RLX_RETURN_IF_ERROR(keep_f32(b, ok, "finite_ok"));
  B_TRY(b, rlx_graph_add_where(b->g, ok, one, zero, out));
  return keep_f32(b, *out, "finite");
}

/* hyper_eff = hyper * [1, clip coefficient, 1, finite]: clipping and the
 * skip of a non-finite step decided on the device, in the same run. */
static rlx_status device_hyper(builder* b) {
  const rlx_train_options* o = &b->t->opt;
  if (o->clip_norm <= 0 && !o->dynamic_loss_scale) return RLX_OK;
  RLX_RETURN_IF_ERROR(grad_norm_sq(b));
  rlx_tensor norm1, parts[RLX_HYPER_COUNT], one, mult;
  rlx_dim s1[1] = {1};
  B_TRY(b, rlx_graph_add_reshape(b->g, b->norm_sq, s1, 1, &norm1));
  RLX_RETURN_IF_ERROR(keep_f32(b, norm1, "grad_norm_sq1"));
  RLX_RETURN_IF_ERROR(scalar_const(b, RLX_F32, 1, 1.0, &one));
  for (int32_t i = 0; i < RLX_HYPER_COUNT; i++) parts[i] = one;
  if (o->clip_norm > 0)
    RLX_RETURN_IF_ERROR(clip_coefficient(b, norm1, &parts[RLX_HYPER_GRAD_SCALE]));
  if (o->dynamic_loss_scale) RLX_RETURN_IF_ERROR(finite_flag(b, norm1, &parts[RLX_HYPER_APPLY]));
  B_TRY(b, rlx_graph_add_concat(b->g, parts, RLX_HYPER_COUNT, 0, &mult));
  RLX_RETURN_IF_ERROR(keep_f32(b, mult, "hyper_mult"));
  B_TRY(b, rlx_graph_add_binary(b->g, RLX_BIN_MUL, b->hyper, mult, &b->hyper_eff));
  return keep_f32(b, b->hyper_eff, "hyper_eff");
}

static rlx_status sgd_update(builder* b, int32_t k) {
  rlx_tensor buf = RLX_NONE, new_p, new_buf = RLX_NONE;
  train_slot* bs = NULL;
  if (b->t->opt.sgd.momentum != 0.0f)
    RLX_RETURN_IF_ERROR(add_state_input(b, k, TRAIN_MOMENTUM, &buf, &bs));
  int32_t buf_slot = bs ? (int32_t)(bs - b->t->slots) : -1;
  B_TRY(b, rlx_graph_add_sgd_update(b->g, b->wrt[k], b->eff[k], buf, b->hyper_eff,
                                    &b->t->opt.sgd, &new_p, &new_buf));
  RLX_RETURN_IF_ERROR(add_state(b, &b->t->slots[b->slot_of[k]], new_p));
  if (buf_slot >= 0) RLX_RETURN_IF_ERROR(add_state(b, &b->t->slots[buf_slot], new_buf));
  return RLX_OK;
}

static rlx_status adam_update(builder* b, int32_t k) {
  rlx_tensor m, v, new_p, new_m, new_v;
  train_slot* s = NULL;
  RLX_RETURN_IF_ERROR(add_state_input(b, k, TRAIN_ADAM_M, &m, &s));
  int32_t m_slot = (int32_t)(s - b->t->slots);
  RLX_RETURN_IF_ERROR(add_state_input(b, k, TRAIN_ADAM_V, &v, &s));
  int32_t v_slot = (int32_t)(s - b->t->slots);
  B_TRY(b, rlx_graph_add_adam_update(b->g, b->wrt[k], b->eff[k], m, v, b->hyper_eff,
                                     &b->t->opt.adam, &new_p, &new_m, &new_v));
  RLX_RETURN_IF_ERROR(add_state(b, &b->t->slots[b->slot_of[k]], new_p));
  RLX_RETURN_IF_ERROR(add_state(b, &b->t->slots[m_slot], new_m));
  return add_state(b, &b->t->slots[v_slot], new_v);
}

/* Gradients (seeded with the loss scale), accumulation, the device-side
 * hyper arithmetic, one update per trained param, and the outputs:
 * 0 the loss, then the norm, the states and (keep_grads) the gradients. */
static rlx_status build_step(builder* b) {
  rlx_trainer* t = b->t;
  rlx_tensor seed;
  RLX_RETURN_IF_ERROR(add_hyper(b, &seed));
  b->grads = malloc(sizeof(rlx_tensor) * (size_t)b->n_train);
  b->eff = malloc(sizeof(rlx_tensor) * (size_t)b->n_train);
  b->acc_slot = malloc(sizeof(int32_t) * (size_t)b->n_train);
  RLX_CHECK_ALLOC(&t->err, b->grads && b->eff && b->acc_slot ? b->grads : NULL);
  if (rlx_graph_grad(b->g, b->loss, b->wrt, b->n_train, seed, b->grads) != RLX_OK)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "gradient: %s", b->g->err.msg);
  RLX_RETURN_IF_ERROR(add_output(b, b->loss, &t->loss_output));
  for (int32_t k = 0; k < b->n_train; k++) {
    b->eff[k] = b->grads[k];
    b->acc_slot[k] = -1;
    if (t->opt.accumulate > 1) RLX_RETURN_IF_ERROR(accumulate(b, k, &b->acc_slot[k]));
  }
  RLX_RETURN_IF_ERROR(device_hyper(b));
  if (b->norm_sq != RLX_NONE) RLX_RETURN_IF_ERROR(add_output(b, b->norm_sq, &t->norm_output));
  for (int32_t k = 0; k < b->n_train; k++) {
    if (t->opt.optimizer == RLX_OPTIMIZER_SGD) RLX_RETURN_IF_ERROR(sgd_update(b, k));
    else RLX_RETURN_IF_ERROR(adam_update(b, k));
  }
  for (int32_t k = 0; k < b->n_train; k++)
    if (b->acc_slot[k] >= 0) RLX_RETURN_IF_ERROR(accumulate_reset(b, k, b->acc_slot[k]));
  for (int32_t k = 0; t->opt.keep_grads && k < b->n_train; k++)
    RLX_RETURN_IF_ERROR(add_output(b, b->eff[k], &t->slots[b->slot_of[k]].grad_output));
  B_TRY(b, rlx_graph_set_outputs(b->g, b->outs, b->n_outs));
  return RLX_OK;
}

/* ------------------------------------------------------------ compile */

static rlx_status check_options(rlx_error* err, const rlx_train_options* o,
                                const rlx_compile_options* copt) {
  if (o->optimizer < RLX_OPTIMIZER_SGD || o->optimizer > RLX_OPTIMIZER_ADAMW)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "optimizer %d is not an rlx_optimizer",
                    (int)o->optimizer);
  if (!(o->lr >= 0) || !isfinite(o->lr))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "learning rate %g is not a finite value >= 0",
                    (double)o->lr);
  if (o->accumulate < 1)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "accumulate is %d; it must be >= 1", o->accumulate);
  if (!(o->clip_norm >= 0) || !(o->loss_scale >= 0) || !isfinite(o->loss_scale))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "clip_norm %g / loss_scale %g must be >= 0",
                    (double)o->clip_norm, (double)o->loss_scale);
  if (copt && copt->n_states != 0)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "compile options declare device state; the trainer declares its own");
  return RLX_OK;
}

static rlx_status check_loss(rlx_trainer* t, const rlx_graph* g, rlx_tensor loss) {
  if (loss < 0 || loss >= g->n_values)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "loss %d is not a value of the graph", loss);
  const rlx_type* lt = rlx_tensor_type(g, loss);
  char buf[96];
  if (!rlx_dtype_is_float(lt->dtype))
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "the loss is %s; it must be a float scalar",
                    rlx_type_str(g, lt, buf, sizeof buf));
  if (rlx_type_numel(lt) != 1)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                    "the loss is %s; it must be a scalar (one element)",
                    rlx_type_str(g, lt, buf, sizeof buf));
  t->loss_dtype = lt->dtype;
  t->loss_rank = lt->rank;
  for (int32_t d = 0; d < lt->rank; d++) t->loss_shape[d] = lt->shape[d];
  return RLX_OK;
}

/* The dynamic scale starts at PyTorch's 2^16, or 2^15 when the backward
 * runs in f16, whose largest value (65504) the 2^16 seed would overflow. */
static void init_scaling(rlx_trainer* t, const rlx_compile_options* copt) {
  const rlx_train_options* o = &t->opt;
  t->loss_scale = o->loss_scale > 0 ? o->loss_scale : 1.0f;
  if (o->dynamic_loss_scale && o->loss_scale == 0)
    t->loss_scale = copt && copt->precision == RLX_PRECISION_F16 ? 0.5f * DYNAMIC_INITIAL_SCALE
                                                                 : DYNAMIC_INITIAL_SCALE;
  t->has_seed = o->loss_scale > 0 || o->dynamic_loss_scale;
  t->last_scale = t->loss_scale;
  t->lr = o->lr;
}

/* Optimizer state starts at zero on the host and the device. */
static rlx_status zero_states(rlx_trainer* t) {
  for (int32_t i = 0; i < t->n_slots; i++) {
    train_slot* s = &t->slots[i];
    if (s->role == TRAIN_PARAM || s->role == TRAIN_FROZEN) continue;
    s->host = calloc(1, (size_t)slot_bytes(s) + 1);
    RLX_CHECK_ALLOC(&t->err, s->host);
    s->host_newer = 1;
    RLX_RETURN_IF_ERROR(upload_slot(t, s));
  }
  return RLX_OK;
}

static rlx_status compile_step(rlx_trainer* t, builder* b, const char* device,
                               const rlx_compile_options* copt) {
  rlx_compile_options o;
  if (copt) o = *copt; else rlx_compile_options_init(&o);
  o.state_inputs = b->state_names;
  o.state_outputs = b->state_outs;
  o.n_states = b->n_states;
  if (rlx_compile(b->g, device, &o, &t->exec) != RLX_OK)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "%s", b->g->err.msg);
  int32_t keep[2] = {t->loss_output, t->norm_output};
  rlx_exec_select_outputs(t->exec, keep, t->norm_output >= 0 ? 2 : 1);
  return zero_states(t);
}

static void builder_free(builder* b) {
  rlx_graph_destroy(b->g);
  free(b->wrt);
  free(b->slot_of);
  free(b->grads);
  free(b->eff);
  free(b->acc_slot);
  free(b->outs);
  free(b->state_names);
  free(b->state_outs);
}

rlx_status rlx_train_compile(rlx_graph* g, rlx_tensor loss, const char* device,
                             const rlx_compile_options* copt, const rlx_train_options* topt,
                             rlx_trainer** out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!out || !topt) return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "train_compile: %s is NULL",
                                     !out ? "out" : "train options");
  *out = NULL;
  rlx_trainer* t = calloc(1, sizeof *t);
  RLX_CHECK_ALLOC(&g->err, t);
  t->opt = *topt;
  t->norm_output = -1;
  builder b = {.t = t, .norm_sq = RLX_NONE};
  rlx_status s = check_options(&t->err, topt, copt);
  if (s == RLX_OK) s = check_loss(t, g, loss);
  if (s == RLX_OK) {
    init_scaling(t, copt);
    b.loss = loss;
    s = rlx_graph_clone(g, &b.g);
    if (s != RLX_OK) rlx_fail(&t->err, s, "out of host memory");
  }
  if (s == RLX_OK) s = split_params(&b, topt);
  if (s == RLX_OK) s = build_step(&b);
  if (s == RLX_OK) s = compile_step(t, &b, device, copt);
  t->opt.frozen = NULL; /* the caller's array */
  t->opt.n_frozen = 0;
  builder_free(&b);
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "train_compile: %s", t->err.msg);
    rlx_trainer_destroy(t);
    return s;
  }
  *out = t;
  return RLX_OK;
}

void rlx_trainer_destroy(rlx_trainer* t) {
  if (!t) return;
  rlx_exec_destroy(t->exec);
  for (int32_t i = 0; i < t->n_slots; i++) {
    free(t->slots[i].name);
    free(t->slots[i].host);
  }
  free(t->slots);
  free(t);
}

const char* rlx_trainer_last_error(const rlx_trainer* t) {
  return t ? t->err.msg : "null trainer";
}

rlx_exec* rlx_trainer_exec(rlx_trainer* t) { return t ? t->exec : NULL; }

int64_t rlx_trainer_step_count(const rlx_trainer* t) { return t ? t->steps : 0; }

/* ------------------------------------------------------------ params and inputs */

static train_slot* find_param(rlx_trainer* t, const char* name, const char* what) {
  train_slot* s = rlx_train_find_slot(t, name);
  if (s && (s->role == TRAIN_PARAM || s->role == TRAIN_FROZEN)) return s;
  rlx_fail(&t->err, RLX_NOT_FOUND, "%s: '%s' is not a param of the trained graph", what,
           name ? name : "(null)");
  return NULL;
}

rlx_status rlx_trainer_set_param(rlx_trainer* t, const char* name, rlx_dtype src_dtype,
                                 const void* data, size_t bytes) {
  if (!t) return RLX_INVALID_ARGUMENT;
  train_slot* s = find_param(t, name, "set_param");
  if (!s) return RLX_NOT_FOUND;
  return rlx_train_write_slot(t, s, src_dtype, data, bytes);
}

rlx_status rlx_trainer_read_param(rlx_trainer* t, const char* name, rlx_dtype dtype, void* dst,
                                  size_t bytes) {
  if (!t) return RLX_INVALID_ARGUMENT;
  train_slot* s = find_param(t, name, "read_param");
  if (!s) return RLX_NOT_FOUND;
  return rlx_train_read_slot(t, s, dtype, dst, bytes);
}

rlx_status rlx_trainer_set_input(rlx_trainer* t, const char* name, rlx_dtype dtype,
                                 const rlx_dim* shape, int32_t rank, const void* data,
                                 size_t bytes) {
  if (!t) return RLX_INVALID_ARGUMENT;
  if (rlx_train_find_slot(t, name) ||
      (name && (!strcmp(name, HYPER_NAME) || !strcmp(name, SEED_NAME))))
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                    "'%s' is kept by the trainer, not a batch input (params: set_param)", name);
  rlx_status s = rlx_exec_set_input(t->exec, name, dtype, shape, rank, data, bytes);
  if (s != RLX_OK) rlx_fail(&t->err, s, "%s", rlx_exec_last_error(t->exec));
  return s;
}

rlx_status rlx_trainer_set_lr(rlx_trainer* t, float lr) {
  if (!t) return RLX_INVALID_ARGUMENT;
  if (!(lr >= 0) || !isfinite(lr))
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "learning rate %g is not a finite value >= 0",
                    (double)lr);
  t->lr = lr;
  return RLX_OK;
}

rlx_status rlx_trainer_read_grad(rlx_trainer* t, const char* name, rlx_dtype dtype, void* dst,
                                 size_t bytes) {
  if (!t) return RLX_INVALID_ARGUMENT;
  train_slot* s = find_param(t, name, "read_grad");
  if (!s) return RLX_NOT_FOUND;
  if (!t->opt.keep_grads)
    return rlx_fail(&t->err, RLX_FAILED_PRECONDITION, "read_grad needs keep_grads in the options");
  if (s->grad_output < 0)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "'%s' is frozen: it has no gradient", name);
  if (!t->stepped)
    return rlx_fail(&t->err, RLX_FAILED_PRECONDITION, "read_grad before any step");
  int64_t n = rlx_type_numel(&s->type);
  if (!rlx_dtype_is_float(dtype) || !dst || bytes != (size_t)n * rlx_dtype_size(dtype))
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                    "gradient of '%s': %lld float elements, got %zu bytes as %s", name,
                    (long long)n, bytes, rlx_dtype_name(dtype));
  float* tmp = malloc(sizeof(float) * (size_t)(n + 1));
  RLX_CHECK_ALLOC(&t->err, tmp);
  rlx_status st = read_output(t, s->grad_output, RLX_F32, tmp, sizeof(float) * (size_t)n);
  /* the device holds the gradient of the scaled loss */
  for (int64_t i = 0; st == RLX_OK && t->last_scale != 1.0f && i < n; i++) tmp[i] /= t->last_scale;
  if (st == RLX_OK) st = convert_into(&t->err, dst, dtype, tmp, RLX_F32, n);
  free(tmp);
  return st;
}

/* ------------------------------------------------------------ step */

static rlx_status fail_exec(rlx_trainer* t, rlx_status s) {
  return rlx_fail(&t->err, s, "%s", rlx_exec_last_error(t->exec));
}

/* The host's part of the hyper tensor (and the seed: the loss scale). */
static rlx_status send_hyper(rlx_trainer* t, int apply) {
  float h[RLX_HYPER_COUNT];
  h[RLX_HYPER_LR] = t->lr;
  h[RLX_HYPER_GRAD_SCALE] = 1.0f / (t->loss_scale * (float)t->opt.accumulate);
  h[RLX_HYPER_STEP] = (float)(t->steps + 1);
  h[RLX_HYPER_APPLY] = apply ? 1.0f : 0.0f;
  rlx_dim hs[1] = {RLX_HYPER_COUNT};
  rlx_status s = rlx_exec_set_input(t->exec, HYPER_NAME, RLX_F32, hs, 1, h, sizeof h);
  if (s != RLX_OK) return fail_exec(t, s);
  if (!t->has_seed) return RLX_OK;
  uint8_t seed[16];
  RLX_RETURN_IF_ERROR(rlx_dtype_convert(seed, t->loss_dtype, &t->loss_scale, RLX_F32, 1));
  s = rlx_exec_set_input(t->exec, SEED_NAME, t->loss_dtype, t->loss_shape, t->loss_rank, seed,
                         rlx_dtype_size(t->loss_dtype));
  return s == RLX_OK ? RLX_OK : fail_exec(t, s);
}

/* Before the first step every trained param needs a value. */
static rlx_status check_params_set(rlx_trainer* t) {
  for (int32_t i = 0; i < t->n_slots; i++)
    if ((t->slots[i].role == TRAIN_PARAM || t->slots[i].role == TRAIN_FROZEN) && !t->slots[i].host)
      return rlx_fail(&t->err, RLX_FAILED_PRECONDITION,
                      "param '%s' was not set (rlx_trainer_set_param)", t->slots[i].name);
  return RLX_OK;
}

/* After an update step: the count, and the dynamic loss scale (GradScaler's
 * rule: halve and skip on Inf/NaN, double after 2000 finite updates). */
static void after_update(rlx_trainer* t, int finite) {
  if (!t->opt.dynamic_loss_scale) {
    t->steps++;
    return;
  }
  if (!finite) {
    t->loss_scale *= 0.5f;
    t->good_steps = 0;
    return;
  }
  t->steps++;
  if (++t->good_steps >= DYNAMIC_GROWTH_INTERVAL) {
    t->loss_scale *= 2.0f;
    t->good_steps = 0;
  }
}

rlx_status rlx_trainer_step(rlx_trainer* t, float* out_loss) {
  if (!t) return RLX_INVALID_ARGUMENT;
  rlx_error_clear(&t->err);
  if (!t->stepped) RLX_RETURN_IF_ERROR(check_params_set(t));
  int apply = t->micro + 1 >= t->opt.accumulate;
  RLX_RETURN_IF_ERROR(send_hyper(t, apply));
  rlx_status s = rlx_exec_run(t->exec);
  if (s != RLX_OK) return fail_exec(t, s);
  t->stepped = 1;
  t->last_scale = t->loss_scale;
  for (int32_t i = 0; i < t->n_slots; i++)
    t->slots[i].host_newer &= t->slots[i].role == TRAIN_FROZEN;
  float loss = NAN, norm_sq = 0.0f;
  s = rlx_exec_read_output(t->exec, t->loss_output, RLX_F32, &loss, sizeof loss);
  if (s == RLX_OK && t->norm_output >= 0)
    s = rlx_exec_read_output(t->exec, t->norm_output, RLX_F32, &norm_sq, sizeof norm_sq);
  if (s != RLX_OK) return fail_exec(t, s);
  t->micro = apply ? 0 : t->micro + 1;
  if (apply) after_update(t, isfinite(norm_sq));
  if (out_loss) *out_loss = loss;
  return RLX_OK;
}
