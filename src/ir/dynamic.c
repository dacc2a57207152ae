/* Symbol binding: a symbolic graph specialized to one set of sizes. */
#include "ir/graph.h"

#include <stdio.h>
#include <string.h>

static void bind_type(rlx_type* t, const int64_t* sizes, int32_t n_symbols) {
  for (int32_t i = 0; i < t->rank && i < RLX_MAX_RANK; i++) {
    if (t->shape[i] >= 0) continue;
    int64_t sym = -(t->shape[i] + 1); /* no overflow even for INT64_MIN */
    if (sym < n_symbols) t->shape[i] = sizes[sym];
  }
}

/* Re-adds every node of g to s with declared types bound; node and value
 * numbering stay the same because nodes are appended in order. Errors land
 * in s->err; *failed_node says which node of g (-1: none). */
static rlx_status specialize_into(const rlx_graph* g, const int64_t* sizes, rlx_graph* s,
                                  int32_t* failed_node) {
  for (int32_t i = 0; i < g->n_symbols; i++) {
    rlx_dim d;
    RLX_RETURN_IF_ERROR(rlx_graph_symbol(s, g->symbols[i], &d));
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    rlx_node_attrs a = n->a;
    if (rlx_op_table[n->op].flags & OPF_DECLARED) bind_type(&a.type, sizes, g->n_symbols);
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
    if (sizes[i] < 0)
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "specialize: symbol '%s' bound to %lld",
                      g->symbols[i], (long long)sizes[i]);
  rlx_graph* s = NULL;
  RLX_RETURN_IF_ERROR(rlx_graph_create(&s));
  int32_t failed = -1;
  rlx_status st = specialize_into(g, sizes, s, &failed);
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
