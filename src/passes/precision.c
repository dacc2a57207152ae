/* Reduced-precision compilation (see precision.h). */
#include "passes/precision.h"

#include <stdlib.h>
#include <string.h>

#include "ir/dtype.h"
#include "passes/bn_fold.h"

typedef struct lowerer {
  const rlx_graph* src;
  rlx_graph* dst;
  rlx_dtype low;      /* RLX_BF16 or RLX_F16 */
  rlx_tensor* same;   /* src value -> dst value of the src value's dtype (RLX_NONE: not yet) */
  rlx_tensor* lowered; /* src f32 value -> dst value in `low` (RLX_NONE: not yet) */
  uint8_t* data;      /* src value depends on a graph input (changes per run) */
  uint8_t* index;     /* data made of integers cast to float (positions) and what
                         only such values and params compute from them */
  int32_t* producer;  /* src value -> its node */
  int32_t n_lowered;
} lowerer;

/* The ops whose bf16 / f16 kernels exist on every backend and accumulate
 * in f32 or wider (the list and its reasons are in precision.h). */
static int op_lowers(rlx_op op) {
  switch (op) {
    case RLX_OP_RESHAPE: case RLX_OP_CAST: case RLX_OP_STOP_GRADIENT: case RLX_OP_TRANSPOSE:
    case RLX_OP_NARROW: case RLX_OP_CONCAT: case RLX_OP_EXPAND: case RLX_OP_REVERSE:
    case RLX_OP_GATHER: case RLX_OP_PAD: case RLX_OP_DEPTH_TO_SPACE: case RLX_OP_SPACE_TO_DEPTH:
    case RLX_OP_IM2COL:
    case RLX_OP_BINARY: case RLX_OP_COMPARE: case RLX_OP_WHERE: case RLX_OP_ACTIVATION:
    case RLX_OP_MATMUL: case RLX_OP_FUSED_MATMUL_BIAS_ACT: case RLX_OP_CONV:
    case RLX_OP_CONV_TRANSPOSE: case RLX_OP_POOL: case RLX_OP_RESIZE: case RLX_OP_REDUCE:
    case RLX_OP_SOFTMAX: case RLX_OP_LOG_SOFTMAX:
    case RLX_OP_LAYER_NORM: case RLX_OP_RMS_NORM: case RLX_OP_FUSED_RESIDUAL_LAYER_NORM:
    case RLX_OP_FUSED_RESIDUAL_RMS_NORM: case RLX_OP_GROUP_NORM: case RLX_OP_CHANNEL_NORM:
    case RLX_OP_BATCH_NORM: case RLX_OP_ATTENTION: case RLX_OP_ROPE:
    case RLX_OP_ATTENTION_BACKWARD:
    case RLX_OP_LAYER_NORM_BACKWARD: case RLX_OP_RMS_NORM_BACKWARD: case RLX_OP_SOFTMAX_BACKWARD:
    case RLX_OP_LOG_SOFTMAX_BACKWARD: case RLX_OP_ROPE_BACKWARD:
    case RLX_OP_DEQUANT_MATMUL:
      return 1;
    default:
      return 0;
  }
}

static rlx_dtype dtype_of(const rlx_graph* g, rlx_tensor v) { return rlx_tensor_type(g, v)->dtype; }

/* A float dtype other than f32: the model chose it, so the node is left alone. */
static int other_float(const rlx_graph* g, rlx_tensor v) {
  rlx_dtype t = dtype_of(g, v);
  return t != RLX_F32 && rlx_dtype_is_float(t);
}

/* Does n read a float activation: per-run data that is not index arithmetic? */
static int reads_activation(const lowerer* L, const rlx_node* n) {
  for (int32_t i = 0; i < n->n_in; i++) {
    rlx_tensor v = n->in[i];
    if (v >= 0 && rlx_dtype_is_float(dtype_of(L->src, v)) && L->data[v] && !L->index[v]) return 1;
  }
  return 0;
}

static int reads_index(const lowerer* L, const rlx_node* n) {
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] >= 0 && L->index[n->in[i]]) return 1;
  return 0;
}

/* Whether node n computes in the reduced dtype (precision.h's rule). */
static int node_lowers(const lowerer* L, const rlx_node* n) {
  if (!op_lowers(n->op) || !reads_activation(L, n)) return 0;
  if (n->label && strncmp(n->label, RLX_PRECISION_F32_LABEL, strlen(RLX_PRECISION_F32_LABEL)) == 0)
    return 0;
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] >= 0 && other_float(L->src, n->in[i])) return 0;
  for (int32_t i = 0; i < n->n_out; i++)
    if (other_float(L->src, n->out[i])) return 0;
  /* a Cast to an integer, bool or other float type keeps its target (cast_input) */
  return n->op != RLX_OP_CAST || dtype_of(L->src, n->out[0]) == RLX_F32;
}

/* An f32 Constant converted at compile time. */
static rlx_status lowered_constant(lowerer* L, const rlx_node* c, rlx_tensor* out) {
  int64_t count = (int64_t)(c->a.data_bytes / sizeof(float));
  size_t bytes = (size_t)count * rlx_dtype_size(L->low);
  void* data = malloc(bytes ? bytes : 1);
  if (!data) return rlx_fail(&L->dst->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  rlx_convert(data, L->low, c->a.data, RLX_F32, count);
  rlx_node_attrs a = c->a;
  a.data = data;
  a.data_bytes = bytes;
  a.type.dtype = L->low;
  rlx_status s = rlx_graph_add_node(L->dst, RLX_OP_CONSTANT, &a, NULL, 0, out);
  free(data);
  return s;
}

/* The reduced-dtype form of src f32 value v, made once on first use. */
static rlx_status low_value(lowerer* L, rlx_tensor v, rlx_tensor* out) {
  if (L->lowered[v] == RLX_NONE) {
    const rlx_node* p = &L->src->nodes[L->producer[v]];
    if (p->op == RLX_OP_CONSTANT) RLX_RETURN_IF_ERROR(lowered_constant(L, p, &L->lowered[v]));
    else RLX_RETURN_IF_ERROR(rlx_graph_add_cast(L->dst, L->same[v], L->low, &L->lowered[v]));
  }
  *out = L->lowered[v];
  return RLX_OK;
}

/* The f32 form of src value v (any dtype), cast back once when only the
 * reduced form was computed. */
static rlx_status f32_value(lowerer* L, rlx_tensor v, rlx_tensor* out) {
  if (L->same[v] == RLX_NONE)
    RLX_RETURN_IF_ERROR(rlx_graph_add_cast(L->dst, L->lowered[v], RLX_F32, &L->same[v]));
  *out = L->same[v];
  return RLX_OK;
}

/* A Cast written in the model to a non-f32 target reads whichever form of
 * its input exists (converting the reduced form directly saves a cast). */
static rlx_tensor cast_input(const lowerer* L, rlx_tensor v) {
  return L->same[v] != RLX_NONE ? L->same[v] : L->lowered[v];
}

/* Nodes kept in f32 that read one operand computed in the reduced dtype
 * as it is, with no cast: every backend's kernel loads any float
 * dtype and computes in f32 or wider, and widening bf16 / f16 is exact.
 * - an optimizer update, its gradient (input 1; param and state stay f32):
 *   no cast launch and f32 copy per param;
 * - the cross-entropy backward, its logits (input 0; d_loss stays f32):
 *   its d_logits then come out in the reduced dtype, rounded once from the
 *   same f32 values as the f32 result's cast was, so the same bits without
 *   the f32 [tokens, vocab] gradient and its cast. (The forward still reads
 *   an f32 cast of the logits: its loss takes the logits' dtype.) */
static int reads_low_as_is(const lowerer* L, const rlx_node* n, int32_t i) {
  rlx_tensor v = n->in[i];
  int operand = ((n->op == RLX_OP_ADAM_UPDATE || n->op == RLX_OP_SGD_UPDATE) && i == 1) ||
                (n->op == RLX_OP_CROSS_ENTROPY_BACKWARD && i == 0);
  return operand && L->lowered[v] != RLX_NONE; /* even where an f32 cast exists: half the bytes */
}

/* Operands a lowered node still reads in f32: DequantMatMul's scales and
 * NVFP4's global scale are part of the stored weight (rounding them would
 * change W itself, not only the activations' precision). */
static int keeps_f32(const rlx_node* n, int32_t i) {
  return n->op == RLX_OP_DEQUANT_MATMUL && i >= 2;
}

static rlx_status map_inputs(lowerer* L, const rlx_node* n, int lower, rlx_tensor* in) {
  for (int32_t i = 0; i < n->n_in; i++) {
    rlx_tensor v = n->in[i];
    if (v < 0) in[i] = RLX_NONE;
    else if (dtype_of(L->src, v) != RLX_F32) in[i] = L->same[v];
    else if (lower && !keeps_f32(n, i)) RLX_RETURN_IF_ERROR(low_value(L, v, &in[i]));
    else if (n->op == RLX_OP_CAST) in[i] = cast_input(L, v);
    else if (reads_low_as_is(L, n, i)) in[i] = L->lowered[v];
    else RLX_RETURN_IF_ERROR(f32_value(L, v, &in[i]));
  }
  return RLX_OK;
}

/* Emits src node n, lowered or not; records its outputs by their dst dtype. */
static rlx_status emit(lowerer* L, const rlx_node* n, int lower) {
  rlx_tensor in[RLX_MAX_INPUTS], out[RLX_MAX_OUTPUTS];
  RLX_RETURN_IF_ERROR(map_inputs(L, n, lower, in));
  rlx_node_attrs a = n->a;
  if (lower && (rlx_op_table[n->op].flags & OPF_DECLARED) && a.type.dtype == RLX_F32)
    a.type.dtype = L->low;
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(L->dst, n->op, &a, in, n->n_in, out));
  for (int32_t i = 0; i < n->n_out; i++) {
    int low = dtype_of(L->dst, out[i]) == L->low && dtype_of(L->src, n->out[i]) == RLX_F32;
    if (low) L->lowered[n->out[i]] = out[i];
    else L->same[n->out[i]] = out[i];
  }
  if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(L->dst, out[0], n->label));
  return RLX_OK;
}

/* A node whose shape rule refuses the reduced dtype for some operand (an
 * op that wants one input in f32) is emitted in f32 instead. */
static rlx_status emit_node(lowerer* L, const rlx_node* n) {
  if (!node_lowers(L, n)) return emit(L, n, 0);
  rlx_status s = emit(L, n, 1);
  if (s == RLX_OK) {
    L->n_lowered++;
    return RLX_OK;
  }
  if (s == RLX_RESOURCE_EXHAUSTED) return s;
  L->dst->err.msg[0] = '\0';
  return emit(L, n, 0);
}

/* Classifies n's outputs (precision.h): data when n reads a graph input
 * (or is one), index when it casts integers to float or computes only from
 * index values, params and constants. */
static void classify(lowerer* L, const rlx_node* n) {
  int data = n->op == RLX_OP_INPUT, index = 0;
  for (int32_t i = 0; i < n->n_in; i++) data |= n->in[i] >= 0 && L->data[n->in[i]];
  if (n->op == RLX_OP_CAST && !rlx_dtype_is_float(dtype_of(L->src, n->in[0])))
    index = data;
  else
    index = data && reads_index(L, n) && !reads_activation(L, n);
  for (int32_t i = 0; i < n->n_out; i++) {
    L->data[n->out[i]] = (uint8_t)data;
    L->index[n->out[i]] = (uint8_t)index;
  }
}

/* The graph's outputs in their declared dtypes (f32 ones cast back). */
static rlx_status set_outputs(lowerer* L) {
  const rlx_graph* g = L->src;
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * (size_t)(g->n_outputs + 1));
  if (!outs) return rlx_fail(&L->dst->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  rlx_status s = RLX_OK;
  for (int32_t i = 0; s == RLX_OK && i < g->n_outputs; i++) s = f32_value(L, g->outputs[i], &outs[i]);
  if (s == RLX_OK) s = rlx_graph_set_outputs(L->dst, outs, g->n_outputs);
  free(outs);
  return s;
}

/* Per src node: whether it is an Input an optimizer update trains (its
 * param operand) and a node that lowers reads. Classifies every node on
 * the way (classify is the same again in the rewrite). NULL: none, or no
 * host memory for the tables (the casts then stay where first read). */
static uint8_t* trained_low_inputs(lowerer* L) {
  const rlx_graph* g = L->src;
  uint8_t* trained = calloc((size_t)g->n_values + 1, 1);
  uint8_t* read_low = calloc((size_t)g->n_values + 1, 1);
  uint8_t* pick = calloc((size_t)g->n_nodes + 1, 1);
  int any = 0;
  for (int32_t i = 0; trained && read_low && pick && i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    classify(L, n);
    if ((n->op == RLX_OP_ADAM_UPDATE || n->op == RLX_OP_SGD_UPDATE) && n->in[0] >= 0)
      trained[n->in[0]] = 1;
    for (int32_t k = 0; node_lowers(L, n) && k < n->n_in; k++)
      if (n->in[k] >= 0) read_low[n->in[k]] = 1;
  }
  for (int32_t i = 0; trained && read_low && pick && i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    rlx_tensor v = n->n_out == 1 ? n->out[0] : RLX_NONE;
    pick[i] = n->op == RLX_OP_INPUT && v >= 0 && dtype_of(g, v) == RLX_F32 && trained[v] &&
              read_low[v];
    any |= pick[i];
  }
  free(trained);
  free(read_low);
  if (!any) {
    free(pick);
    return NULL;
  }
  return pick;
}

/* A trainer's params are f32 inputs read in the reduced dtype: their
 * Inputs come first and their casts right after, one after another, so a
 * backend can run them as one launch (CUDA batches consecutive packed
 * casts). The copies live from the start; the backward reads them again,
 * so they were alive through the step anyway. Returns the picked nodes
 * (already emitted; NULL when none). */
static rlx_status emit_trained_casts(lowerer* L, uint8_t** out) {
  *out = trained_low_inputs(L);
  uint8_t* pick = *out;
  for (int32_t i = 0; pick && i < L->src->n_nodes; i++)
    if (pick[i]) RLX_RETURN_IF_ERROR(emit(L, &L->src->nodes[i], 0));
  rlx_tensor low;
  for (int32_t i = 0; pick && i < L->src->n_nodes; i++)
    if (pick[i]) RLX_RETURN_IF_ERROR(low_value(L, L->src->nodes[i].out[0], &low));
  memset(L->data, 0, (size_t)L->src->n_values + 1); /* classified again below */
  memset(L->index, 0, (size_t)L->src->n_values + 1);
  return RLX_OK;
}

static rlx_status rewrite(lowerer* L) {
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(L->dst, L->src)); /* the same dim codes */
  uint8_t* early = NULL;
  rlx_status s = emit_trained_casts(L, &early);
  for (int32_t i = 0; s == RLX_OK && i < L->src->n_nodes; i++) {
    const rlx_node* n = &L->src->nodes[i];
    classify(L, n);
    if (!early || !early[i]) s = emit_node(L, n);
  }
  free(early);
  return s == RLX_OK ? set_outputs(L) : s;
}

static rlx_status alloc_tables(lowerer* L) {
  size_t nv = (size_t)L->src->n_values + 1;
  L->same = malloc(sizeof(rlx_tensor) * nv);
  L->lowered = malloc(sizeof(rlx_tensor) * nv);
  L->data = calloc(nv, 1);
  L->index = calloc(nv, 1);
  L->producer = rlx_value_producers(L->src);
  if (!L->same || !L->lowered || !L->data || !L->index || !L->producer)
    return RLX_RESOURCE_EXHAUSTED;
  for (size_t v = 0; v < nv; v++) L->same[v] = L->lowered[v] = RLX_NONE;
  return RLX_OK;
}

rlx_status rlx_lower_precision(rlx_graph* g, rlx_dtype dtype, rlx_graph** out,
                               int32_t* out_lowered) {
  if (!g || !out) return RLX_INVALID_ARGUMENT;
  *out = NULL;
  if (dtype != RLX_BF16 && dtype != RLX_F16)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                    "precision: reduced dtype must be bf16 or f16, got dtype %d", (int)dtype);
  lowerer L = {g, NULL, dtype, NULL, NULL, NULL, NULL, NULL, 0};
  rlx_status s = alloc_tables(&L);
  if (s == RLX_OK) s = rlx_graph_create(&L.dst);
  if (s == RLX_OK) s = rewrite(&L);
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "precision (%s): %s", dtype == RLX_BF16 ? "bf16" : "f16",
             L.dst && L.dst->err.msg[0] ? L.dst->err.msg : "out of host memory");
    rlx_graph_destroy(L.dst);
  } else {
    *out = L.dst;
    if (out_lowered) *out_lowered = L.n_lowered;
  }
  free(L.same);
  free(L.lowered);
  free(L.data);
  free(L.index);
  free(L.producer);
  return s;
}
