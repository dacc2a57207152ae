/* Constant folding (see fold.h). */
#include "passes/fold.h"

#include <stdlib.h>
#include <string.h>

#include "passes/decompose.h"
#include "passes/lower.h"
#include "passes/plan.h"

/* The CPU backend's arena alignment: the same plan, hence the same steps,
 * as an executable compiled for "cpu" would run. */
#define FOLD_ALIGNMENT 64

void rlx_fold_value_free(rlx_fold_value* v) {
  if (!v) return;
  free(v->data);
  v->data = NULL;
  v->bytes = 0;
}

/* The CPU reference runs every op, so nothing is decomposed for lack of a
 * kernel (as with the CPU backend's own rule). */
static int native_everywhere(const rlx_graph* g, int32_t ni) {
  (void)g;
  (void)ni;
  return 1;
}

static rlx_status check_constant_only(rlx_graph* g) {
  char nb[160];
  for (int32_t i = 0; i < g->n_nodes; i++) {
    rlx_op op = g->nodes[i].op;
    if (op == RLX_OP_INPUT || op == RLX_OP_PARAM)
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                      "%s: a constant subgraph cannot read inputs or params",
                      rlx_node_str(g, i, nb, sizeof nb));
  }
  for (int32_t v = 0; v < g->n_values; v++)
    if (rlx_type_bytes(&g->values[v].type) < 0)
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "%s: only static dims can be folded",
                      rlx_node_str(g, g->values[v].node, nb, sizeof nb));
  return RLX_OK;
}

/* Runs the steps over a zeroed host arena (zeroed as the CPU backend's, so
 * a value no step writes reads the same) that holds the constants. */
static rlx_status run_steps(rlx_graph* g, const rlx_plan* plan, const rlx_step_list* steps,
                            rlx_fold_step_fn run_step, uint8_t** out_arena) {
  size_t n = (size_t)(plan->arena_bytes ? plan->arena_bytes : FOLD_ALIGNMENT);
  if (plan->arena_bytes > SIZE_MAX - FOLD_ALIGNMENT)
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "arena of %llu bytes does not fit in memory",
                    (unsigned long long)plan->arena_bytes);
  n = (n + FOLD_ALIGNMENT - 1) / FOLD_ALIGNMENT * FOLD_ALIGNMENT;
  uint8_t* arena = aligned_alloc(FOLD_ALIGNMENT, n);
  if (!arena)
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "cannot allocate a %llu-byte arena",
                    (unsigned long long)plan->arena_bytes);
  memset(arena, 0, n);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* nd = &g->nodes[i];
    if (nd->op == RLX_OP_CONSTANT && nd->a.data_bytes)
      memcpy(arena + plan->offset[nd->out[0]], nd->a.data, nd->a.data_bytes);
  }
  rlx_run_ctx ctx = {0, g, plan, NULL};
  for (int32_t i = 0; i < steps->n; i++) {
    rlx_status s = run_step(arena, &steps->steps[i], &ctx, &g->err);
    if (s != RLX_OK) {
      free(arena);
      return s;
    }
  }
  *out_arena = arena;
  return RLX_OK;
}

/* Graph outputs are dense at their planned offsets (views share their
 * source's bytes, which are dense too). */
static rlx_status read_outputs(rlx_graph* g, const rlx_plan* plan, const uint8_t* arena,
                               rlx_fold_value* out) {
  for (int32_t j = 0; j < g->n_outputs; j++) {
    rlx_tensor t = g->outputs[j];
    rlx_fold_value* v = &out[j];
    v->type = g->values[t].type;
    v->bytes = (size_t)rlx_type_bytes(&v->type);
    v->data = malloc(v->bytes ? v->bytes : 1);
    if (!v->data) {
      for (int32_t k = 0; k < j; k++) rlx_fold_value_free(&out[k]);
      return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    }
    if (v->bytes) memcpy(v->data, arena + plan->offset[t], v->bytes);
  }
  return RLX_OK;
}

rlx_status rlx_fold_evaluate(rlx_graph* g, rlx_fold_step_fn run_step, rlx_fold_value* out_values) {
  if (!g || !run_step || !out_values) return RLX_INVALID_ARGUMENT;
  if (g->n_outputs == 0) return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "graph has no outputs");
  memset(out_values, 0, sizeof *out_values * (size_t)g->n_outputs);
  RLX_RETURN_IF_ERROR(check_constant_only(g));
  rlx_graph* dec = NULL;
  rlx_plan plan;
  memset(&plan, 0, sizeof plan);
  rlx_step_list steps = {0};
  uint8_t* arena = NULL;
  rlx_status s = rlx_decompose(g, native_everywhere, &dec, NULL); /* errors on g */
  if (s == RLX_OK) {
    rlx_plan_options po = {FOLD_ALIGNMENT, 1, 0};
    s = rlx_plan_memory(dec, &po, &plan);
    if (s == RLX_OK) s = rlx_lower(dec, &plan, NULL, &steps, &dec->err);
    if (s == RLX_OK) s = run_steps(dec, &plan, &steps, run_step, &arena);
    if (s == RLX_OK) s = read_outputs(dec, &plan, arena, out_values);
    if (s != RLX_OK) g->err = dec->err;
  }
  free(arena);
  rlx_step_list_free(&steps);
  rlx_plan_free(&plan);
  rlx_graph_destroy(dec);
  return s;
}

/* ------------------------------------------------------------------ graph -> graph */

typedef struct folder {
  rlx_graph* g;
  rlx_fold_step_fn run_step;
  uint8_t* foldable;   /* per node: computes from constants only */
  uint8_t* needed;     /* per value: read by a kept node or a graph output */
  rlx_tensor* map;     /* per value of g: its value in the new graph */
} folder;

static int node_foldable(const folder* f, const rlx_node* n) {
  if (rlx_op_table[n->op].flags & OPF_LEAF) return 0;
  if (n->op == RLX_OP_SAMPLE) return 0; /* seeded per run */
  for (int32_t i = 0; i < n->n_in; i++) {
    if (n->in[i] < 0) continue;
    const rlx_node* p = rlx_producer(f->g, n->in[i]);
    if (p->op != RLX_OP_CONSTANT && !f->foldable[f->g->values[n->in[i]].node]) return 0;
  }
  return 1;
}

/* Marks foldable nodes and the values the rest of the graph needs from
 * them; returns the number of values to evaluate and their bytes. */
static int32_t mark(folder* f, int64_t* out_bytes) {
  rlx_graph* g = f->g;
  for (int32_t i = 0; i < g->n_nodes; i++) f->foldable[i] = (uint8_t)node_foldable(f, &g->nodes[i]);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (f->foldable[i]) continue;
    for (int32_t k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) f->needed[n->in[k]] = 1;
  }
  for (int32_t j = 0; j < g->n_outputs; j++) f->needed[g->outputs[j]] = 1;
  int32_t n = 0;
  int64_t bytes = 0;
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!f->foldable[g->values[v].node]) continue;
    int64_t b = rlx_type_bytes(&g->values[v].type);
    bytes = b < 0 || bytes > INT64_MAX - b ? INT64_MAX : bytes + b;
    n += f->needed[v];
  }
  *out_bytes = bytes;
  return n;
}

static rlx_status copy_node(folder* f, rlx_graph* dst, const rlx_node* n) {
  rlx_tensor in[RLX_MAX_INPUTS], out[RLX_MAX_OUTPUTS];
  for (int32_t i = 0; i < n->n_in; i++) in[i] = n->in[i] < 0 ? RLX_NONE : f->map[n->in[i]];
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(dst, n->op, &n->a, in, n->n_in, out));
  for (int32_t i = 0; i < n->n_out; i++) f->map[n->out[i]] = out[i];
  if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(dst, out[0], n->label));
  return RLX_OK;
}

/* The constant part of g with the needed values as outputs, evaluated. */
static rlx_status evaluate_needed(folder* f, int32_t n_needed, rlx_fold_value* vals) {
  rlx_graph* g = f->g;
  rlx_graph* s = NULL;
  RLX_RETURN_IF_ERROR(rlx_graph_create(&s));
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * (size_t)(n_needed + 1));
  rlx_status st = outs ? RLX_OK : rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (int32_t i = 0; st == RLX_OK && i < g->n_nodes; i++)
    if (g->nodes[i].op == RLX_OP_CONSTANT || f->foldable[i]) st = copy_node(f, s, &g->nodes[i]);
  int32_t k = 0;
  for (int32_t v = 0; st == RLX_OK && v < g->n_values; v++)
    if (f->needed[v] && f->foldable[g->values[v].node]) outs[k++] = f->map[v];
  if (st == RLX_OK) st = rlx_graph_set_outputs(s, outs, k);
  if (st == RLX_OK) st = rlx_fold_evaluate(s, f->run_step, vals);
  if (st != RLX_OK && s->err.msg[0]) g->err = s->err;
  free(outs);
  rlx_graph_destroy(s);
  return st;
}

/* Copies the kept nodes into dst (Constants only where still read); each
 * needed folded value becomes a Constant with its producer's label. */
static rlx_status rebuild(folder* f, rlx_graph* dst, const rlx_fold_value* vals) {
  rlx_graph* g = f->g;
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(dst, g)); /* the same table: the same dim codes */
  int32_t k = 0;
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!f->needed[v] || !f->foldable[g->values[v].node]) continue;
    const rlx_fold_value* fv = &vals[k++];
    RLX_RETURN_IF_ERROR(rlx_graph_add_constant(dst, fv->type.dtype, fv->type.shape, fv->type.rank,
                                               fv->data, fv->bytes, &f->map[v]));
    const char* label = g->nodes[g->values[v].node].label;
    if (label && g->values[v].index == 0)
      RLX_RETURN_IF_ERROR(rlx_graph_set_name(dst, f->map[v], label));
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (f->foldable[i] || (n->op == RLX_OP_CONSTANT && !f->needed[n->out[0]])) continue;
    RLX_RETURN_IF_ERROR(copy_node(f, dst, n));
  }
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * (size_t)(g->n_outputs + 1));
  if (!outs) return rlx_fail(&dst->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (int32_t j = 0; j < g->n_outputs; j++) outs[j] = f->map[g->outputs[j]];
  rlx_status s = g->n_outputs ? rlx_graph_set_outputs(dst, outs, g->n_outputs) : RLX_OK;
  free(outs);
  return s;
}

rlx_status rlx_fold_constants(rlx_graph* g, rlx_fold_step_fn run_step, int64_t max_bytes,
                              rlx_graph** out, int32_t* out_folded) {
  if (!g || !run_step || !out) return RLX_INVALID_ARGUMENT;
  *out = NULL;
  if (out_folded) *out_folded = 0;
  folder f = {g, run_step, calloc((size_t)g->n_nodes + 1, 1), calloc((size_t)g->n_values + 1, 1),
              calloc((size_t)g->n_values + 1, sizeof(rlx_tensor))};
  rlx_fold_value* vals = NULL;
  rlx_status s = f.foldable && f.needed && f.map
                     ? RLX_OK
                     : rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  int64_t bytes = 0;
  int32_t n_needed = s == RLX_OK ? mark(&f, &bytes) : 0;
  if (s == RLX_OK && (n_needed == 0 || bytes > max_bytes)) {
    s = rlx_graph_clone(g, out);
    n_needed = 0;
  } else if (s == RLX_OK) {
    vals = calloc((size_t)n_needed, sizeof *vals);
    s = vals ? evaluate_needed(&f, n_needed, vals)
             : rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    if (s == RLX_OK) s = rlx_graph_create(out);
    if (s == RLX_OK && (s = rebuild(&f, *out, vals)) != RLX_OK) {
      g->err = (*out)->err;
      rlx_graph_destroy(*out);
      *out = NULL;
    }
    for (int32_t k = 0; vals && s == RLX_OK && k < n_needed; k++) rlx_fold_value_free(&vals[k]);
  }
  if (s == RLX_OK && out_folded && n_needed > 0)
    for (int32_t i = 0; i < g->n_nodes; i++) *out_folded += f.foldable[i];
  if (s != RLX_OK && vals)
    for (int32_t k = 0; k < n_needed; k++) rlx_fold_value_free(&vals[k]);
  free(vals);
  free(f.foldable);
  free(f.needed);
  free(f.map);
  return s;
}
