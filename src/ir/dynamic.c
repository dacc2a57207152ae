/* Symbol binding: a symbolic graph specialized to one set of sizes. */
#include "ir/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bind_dim(rlx_dim* d, const int64_t* sizes, int32_t n_symbols) {
  if (*d >= 0) return;
  int64_t sym = -(*d + 1); /* no overflow even for INT64_MIN */
  if (sym < n_symbols) *d = sizes[sym];
}

static void bind_type(rlx_type* t, const int64_t* sizes, int32_t n_symbols) {
  for (int32_t i = 0; i < t->rank && i < RLX_MAX_RANK; i++) bind_dim(&t->shape[i], sizes, n_symbols);
}

/* Attributes that hold sizes: narrow's start and len may be symbolic dims
 * (an ONNX Slice up to a symbolic end). */
static void bind_attrs(rlx_op op, rlx_node_attrs* a, const int64_t* sizes, int32_t n_symbols) {
  if (rlx_op_table[op].flags & OPF_DECLARED) bind_type(&a->type, sizes, n_symbols);
  if (op == RLX_OP_NARROW) {
    bind_dim(&a->start, sizes, n_symbols);
    bind_dim(&a->len, sizes, n_symbols);
  }
}

/* Re-adds every node of g to s with declared types bound; node and value
 * numbering stay the same because nodes are appended in order. Errors land
 * in s->err; *failed_node says which node of g (-1: none). */
static rlx_status specialize_into(const rlx_graph* g, const int64_t* sizes, rlx_graph* s,
                                  int32_t* failed_node) {
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(s, g));
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    rlx_node_attrs a = n->a;
    bind_attrs(n->op, &a, sizes, g->n_symbols);
    rlx_tensor outs[RLX_MAX_OUTPUTS];
    *failed_node = i;
    RLX_RETURN_IF_ERROR(rlx_graph_add_node(s, n->op, &a, n->in, n->n_in, outs));
    if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(s, outs[0], n->label));
  }
  *failed_node = -1;
  return rlx_graph_set_outputs(s, g->outputs, g->n_outputs);
}

rlx_status rlx_graph_specialize(rlx_graph* g, const int64_t* sizes, rlx_graph** out) {
  if (!g || !out) return RLX_INVALID_ARGUMENT;
  *out = NULL;
  if (g->n_symbols > 0 && !sizes)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "specialize: no sizes for %d symbols",
                    (int)g->n_symbols);
  for (int32_t i = 0; i < g->n_symbols; i++)
    if (!rlx_dim_is_expr(g, -(rlx_dim)i - 1) && sizes[i] < 0)
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "specialize: symbol '%s' bound to %lld",
                      g->symbols[i], (long long)sizes[i]);
  /* Expressions follow from the leaves, whatever the caller passed for them. */
  int64_t* all = malloc(sizeof(int64_t) * (size_t)(g->n_symbols + 1));
  if (!all) return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  if (g->n_symbols) memcpy(all, sizes, sizeof(int64_t) * (size_t)g->n_symbols);
  rlx_status st = rlx_graph_eval_dims(g, all, &g->err);
  if (st != RLX_OK) {
    free(all);
    return st;
  }
  rlx_graph* s = NULL;
  st = rlx_graph_create(&s);
  if (st != RLX_OK) {
    free(all);
    return st;
  }
  int32_t failed = -1;
  st = specialize_into(g, all, s, &failed);
  free(all);
  if (st != RLX_OK) {
    char buf[96] = "";
    if (failed >= 0) rlx_node_str(g, failed, buf, sizeof buf);
    rlx_fail(&g->err, st, "specialize: %s%s%s", buf, failed >= 0 ? ": " : "", s->err.msg);
    rlx_graph_destroy(s);
    return st;
  }
  *out = s;
  return RLX_OK;
}
