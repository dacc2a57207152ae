/* Hoisting parameter-only work out of every run (see hoist.h). */
#include "passes/hoist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/bn_fold.h" /* rlx_copy_node, rlx_copy_outputs */

/* ------------------------------------------------------------ selection */

/* What the selection knows of each value of g. */
typedef struct selector {
  const rlx_graph* g;
  uint8_t* src_only;    /* computed from PARAM / CONSTANT leaves only */
  uint8_t* works;       /* its cone has a step that is not a view */
  uint64_t* leaves;     /* per value: `words` words, bit l = source leaf l in its cone */
  int32_t words;
  int64_t* leaf_bytes;  /* per source leaf */
  uint8_t* run_reads;   /* read by a node that stays in the run, or a graph output */
  uint8_t* hoist_reads; /* read by a hoisted node */
  uint8_t* is_output;
} selector;

static int is_source_leaf(rlx_op op) { return op == RLX_OP_PARAM || op == RLX_OP_CONSTANT; }

/* Ops whose result is a function of their inputs alone: Sample draws from
 * the run's seed; Deferred stands for a body not built yet. An optimizer
 * update is one step of state fed back every run (even where its inputs are
 * params only), never a once-per-param-change result. */
static int deterministic(rlx_op op) {
  return op != RLX_OP_SAMPLE && op != RLX_OP_DEFERRED && op != RLX_OP_INPUT &&
         op != RLX_OP_SGD_UPDATE && op != RLX_OP_ADAM_UPDATE;
}

static uint64_t* leaf_bits(const selector* s, rlx_tensor v) {
  return s->leaves + (size_t)v * (size_t)s->words;
}

/* Forward: which values are param-only, what leaves feed them, and
 * whether their cone does work. */
static void classify_values(selector* s) {
  const rlx_graph* g = s->g;
  int32_t leaf = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (is_source_leaf(n->op)) {
      rlx_tensor v = n->out[0];
      s->src_only[v] = 1;
      leaf_bits(s, v)[leaf / 64] |= 1ull << (leaf % 64);
      s->leaf_bytes[leaf++] = rlx_type_bytes(rlx_tensor_type(g, v));
      continue;
    }
    int only = deterministic(n->op) && n->n_in > 0;
    int works = !(rlx_op_table[n->op].flags & OPF_VIEW);
    for (int32_t k = 0; only && k < n->n_in; k++) {
      rlx_tensor in = n->in[k];
      if (in < 0) continue;
      only = s->src_only[in];
      works |= s->works[in];
    }
    for (int32_t o = 0; only && o < n->n_out; o++) {
      rlx_tensor v = n->out[o];
      s->src_only[v] = 1;
      s->works[v] = (uint8_t)works;
      for (int32_t k = 0; k < n->n_in; k++)
        for (int32_t w = 0; n->in[k] >= 0 && w < s->words; w++)
          leaf_bits(s, v)[w] |= leaf_bits(s, n->in[k])[w];
    }
  }
}

/* Bytes of the distinct source leaves value v is computed from. */
static uint64_t source_bytes(const selector* s, rlx_tensor v) {
  uint64_t total = 0;
  const uint64_t* bits = leaf_bits(s, v);
  for (int32_t w = 0; w < s->words; w++)
    for (int32_t b = 0; b < 64; b++)
      if (bits[w] >> b & 1) total += (uint64_t)s->leaf_bytes[w * 64 + b];
  return total;
}

/* Whether a param-only value the run reads may become a leaf (hoist.h). */
static int worth_a_leaf(const selector* s, rlx_tensor v) {
  int64_t bytes = rlx_type_bytes(rlx_tensor_type(s->g, v));
  return !s->is_output[v] && s->works[v] && bytes >= 0 && (uint64_t)bytes <= source_bytes(s, v);
}

/* Whether node n (param-only) leaves the run, given the decisions already
 * made for every node after it. */
static int decide(const selector* s, const rlx_node* n) {
  int run_needed = 0, hoist_needed = 0;
  for (int32_t o = 0; o < n->n_out; o++) {
    rlx_tensor v = n->out[o];
    if (s->is_output[v]) return 0;
    if (s->run_reads[v] && !worth_a_leaf(s, v)) return 0;
    run_needed |= s->run_reads[v];
    hoist_needed |= s->hoist_reads[v];
  }
  return run_needed || hoist_needed; /* a dead node stays where it was */
}

/* Backward: each node is decided once every reader of its outputs is. */
static void decide_nodes(selector* s, uint8_t* hoisted) {
  const rlx_graph* g = s->g;
  for (int32_t i = 0; i < g->n_outputs; i++) s->run_reads[g->outputs[i]] = s->is_output[g->outputs[i]] = 1;
  for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
    const rlx_node* n = &g->nodes[i];
    if (rlx_op_table[n->op].flags & OPF_LEAF) continue;
    hoisted[i] = (uint8_t)(n->n_out > 0 && s->src_only[n->out[0]] && decide(s, n));
    uint8_t* reads = hoisted[i] ? s->hoist_reads : s->run_reads;
    for (int32_t k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) reads[n->in[k]] = 1;
  }
}

static void selector_free(selector* s) {
  free(s->src_only);
  free(s->works);
  free(s->leaves);
  free(s->leaf_bytes);
  free(s->run_reads);
  free(s->hoist_reads);
  free(s->is_output);
}

/* Whether a node of g reads an INPUT leaf: a graph that reads none is param
 * work as a whole (the derived graph itself, when compiled), and hoisting
 * from it would only peel its last layer into another derived graph. */
static int reads_an_input(const rlx_graph* g) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k = 0; k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] >= 0 && rlx_producer(g, g->nodes[i].in[k])->op == RLX_OP_INPUT) return 1;
  return 0;
}

rlx_status rlx_hoist_select(const rlx_graph* g, uint8_t** out_hoisted) {
  if (!g || !out_hoisted) return RLX_INVALID_ARGUMENT;
  *out_hoisted = NULL;
  int32_t n_leaves = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) n_leaves += is_source_leaf(g->nodes[i].op);
  selector s = {.g = g};
  size_t nv = (size_t)g->n_values + 1;
  s.words = (n_leaves + 63) / 64;
  s.src_only = calloc(nv, 1);
  s.works = calloc(nv, 1);
  s.run_reads = calloc(nv, 1);
  s.hoist_reads = calloc(nv, 1);
  s.is_output = calloc(nv, 1);
  s.leaves = calloc(nv * (size_t)(s.words + 1), sizeof(uint64_t));
  s.leaf_bytes = calloc((size_t)n_leaves + 1, sizeof(int64_t));
  uint8_t* hoisted = calloc((size_t)g->n_nodes + 1, 1);
  if (!s.src_only || !s.works || !s.run_reads || !s.hoist_reads || !s.is_output || !s.leaves ||
      !s.leaf_bytes || !hoisted) {
    selector_free(&s);
    free(hoisted);
    return rlx_fail((rlx_error*)&g->err, RLX_RESOURCE_EXHAUSTED, "hoist: out of host memory");
  }
  if (reads_an_input(g)) {
    classify_values(&s);
    decide_nodes(&s, hoisted);
  }
  selector_free(&s);
  *out_hoisted = hoisted;
  return RLX_OK;
}

/* ------------------------------------------------------------ rewrite */

typedef struct rewriter {
  rlx_graph* g;
  const uint8_t* hoisted;
  uint8_t* run_reads;   /* per value of g: read by a node kept in the run, or an output */
  uint8_t* hoist_reads; /* per value of g: read by a hoisted node */
  rlx_tensor* map;      /* g value -> run graph value */
  rlx_tensor* leaves;   /* per hoisted value: its leaf in the run graph */
  rlx_hoist_stats stats;
} rewriter;

static void mark_readers(rewriter* r) {
  const rlx_graph* g = r->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    uint8_t* reads = r->hoisted[i] ? r->hoist_reads : r->run_reads;
    for (int32_t k = 0; k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] >= 0) reads[g->nodes[i].in[k]] = 1;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) r->run_reads[g->outputs[i]] = 1;
}

static int name_taken(const rlx_graph* g, const char* name) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].a.name && strcmp(g->nodes[i].a.name, name) == 0) return 1;
  return 0;
}

/* "hoisted.<k>", or with a suffix when g already has that name. */
static void leaf_name(const rlx_graph* g, int32_t k, char* buf, size_t cap) {
  snprintf(buf, cap, "hoisted.%d", (int)k);
  for (int32_t extra = 1; name_taken(g, buf); extra++)
    snprintf(buf, cap, "hoisted.%d.%d", (int)k, (int)extra);
}

/* A hoisted node leaves the run: each output the run reads becomes a leaf. */
static rlx_status emit_leaves(rewriter* r, rlx_graph* run, const rlx_node* n) {
  r->stats.nodes++;
  for (int32_t o = 0; o < n->n_out; o++) {
    rlx_tensor v = n->out[o];
    if (!r->run_reads[v]) continue;
    const rlx_type* t = rlx_tensor_type(r->g, v);
    char name[64];
    leaf_name(r->g, r->stats.values, name, sizeof name);
    RLX_RETURN_IF_ERROR(rlx_graph_add_param(run, name, t->dtype, t->shape, t->rank, &r->map[v]));
    r->leaves[r->stats.values++] = r->map[v];
    r->stats.bytes += (uint64_t)rlx_type_bytes(t);
  }
  return RLX_OK;
}

/* A param or constant that only hoisted nodes read. */
static int dropped_leaf(const rewriter* r, const rlx_node* n) {
  return is_source_leaf(n->op) && !r->run_reads[n->out[0]] && r->hoist_reads[n->out[0]];
}

static rlx_status build_run(rewriter* r, rlx_graph* run) {
  const rlx_graph* g = r->g;
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(run, g));
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (r->hoisted[i]) RLX_RETURN_IF_ERROR(emit_leaves(r, run, n));
    else if (!dropped_leaf(r, n)) RLX_RETURN_IF_ERROR(rlx_copy_node(run, n, r->map));
  }
  return rlx_copy_outputs(g, run, r->map);
}

/* Per node of g: whether the derived graph needs it: the hoisted nodes and
 * everything they are computed from. That includes a param-only node kept
 * in the run (a graph output, or a value too large to be a leaf) when a
 * hoisted node reads it: the derived graph computes it again. */
static uint8_t* derived_nodes(const rewriter* r) {
  const rlx_graph* g = r->g;
  uint8_t* need = calloc((size_t)g->n_nodes + 1, 1);
  uint8_t* read = calloc((size_t)g->n_values + 1, 1);
  for (int32_t i = g->n_nodes - 1; need && read && i >= 0; i--) {
    const rlx_node* n = &g->nodes[i];
    need[i] = r->hoisted[i];
    for (int32_t o = 0; o < n->n_out; o++) need[i] |= read[n->out[o]];
    for (int32_t k = 0; need[i] && k < n->n_in; k++)
      if (n->in[k] >= 0) read[n->in[k]] = 1;
  }
  if (!read) {
    free(need);
    need = NULL;
  }
  free(read);
  return need;
}

/* The derived graph: what derived_nodes names, and as outputs the values
 * that became leaves of the run, in the same order. */
static rlx_status build_derived(rewriter* r, rlx_graph* d) {
  const rlx_graph* g = r->g;
  rlx_tensor* map = malloc(sizeof(rlx_tensor) * ((size_t)g->n_values + 1));
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * ((size_t)r->stats.values + 1));
  uint8_t* need = derived_nodes(r);
  /* No dim table: every shape here is static, and symbols the derived graph
   * never uses would still need sizes that make their expressions valid. */
  rlx_status s = map && outs && need ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
  for (int32_t v = 0; s == RLX_OK && v < g->n_values; v++) map[v] = RLX_NONE;
  int32_t n_outs = 0;
  for (int32_t i = 0; s == RLX_OK && i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (!need[i]) continue;
    s = rlx_copy_node(d, n, map);
    for (int32_t o = 0; s == RLX_OK && r->hoisted[i] && o < n->n_out; o++)
      if (r->run_reads[n->out[o]]) outs[n_outs++] = map[n->out[o]];
  }
  if (s == RLX_OK) s = rlx_graph_set_outputs(d, outs, n_outs);
  free(need);
  free(map);
  free(outs);
  return s;
}

static rlx_status rewrite(rewriter* r, rlx_graph** out_run, rlx_graph** out_derived) {
  RLX_RETURN_IF_ERROR(rlx_graph_create(out_run));
  RLX_RETURN_IF_ERROR(build_run(r, *out_run));
  if (!out_derived || r->stats.values == 0) return RLX_OK;
  RLX_RETURN_IF_ERROR(rlx_graph_create(out_derived));
  return build_derived(r, *out_derived);
}

/* The message of the first graph that failed. */
static const char* failure_text(const rlx_graph* run, const rlx_graph* derived) {
  if (derived && derived->err.msg[0]) return derived->err.msg;
  if (run && run->err.msg[0]) return run->err.msg;
  return "out of host memory";
}

rlx_status rlx_hoist_apply(rlx_graph* g, const uint8_t* hoisted, rlx_graph** out_run,
                           rlx_graph** out_derived, rlx_tensor** out_leaves,
                           rlx_hoist_stats* stats) {
  if (!g || !hoisted || !out_run) return RLX_INVALID_ARGUMENT;
  *out_run = NULL;
  if (out_derived) *out_derived = NULL;
  if (out_leaves) *out_leaves = NULL;
  size_t nv = (size_t)g->n_values + 1;
  rewriter r = {.g = g, .hoisted = hoisted};
  r.run_reads = calloc(nv, 1);
  r.hoist_reads = calloc(nv, 1);
  r.map = malloc(sizeof(rlx_tensor) * nv);
  r.leaves = malloc(sizeof(rlx_tensor) * nv);
  rlx_status s = r.run_reads && r.hoist_reads && r.map && r.leaves ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
  for (int32_t v = 0; s == RLX_OK && v < g->n_values; v++) r.map[v] = RLX_NONE;
  if (s == RLX_OK) {
    mark_readers(&r);
    s = rewrite(&r, out_run, out_derived);
  }
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "hoist: %s", failure_text(*out_run, out_derived ? *out_derived : NULL));
    rlx_graph_destroy(*out_run);
    *out_run = NULL;
    if (out_derived) {
      rlx_graph_destroy(*out_derived);
      *out_derived = NULL;
    }
  } else {
    if (stats) *stats = r.stats;
    if (out_leaves) *out_leaves = r.leaves;
    r.leaves = out_leaves ? NULL : r.leaves;
  }
  free(r.run_reads);
  free(r.hoist_reads);
  free(r.map);
  free(r.leaves);
  return s;
}
