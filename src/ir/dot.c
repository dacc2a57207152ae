/* Graphviz export (rlx_graph_print_dot, public in rlx.h): one box per node
 * (op, label, output types), an edge per use. Leaves get their own shapes and colours so the weights and the
 * data entering the graph stand out from the computation. */
#include "ir/graph.h" /* rlx_graph_print_dot is declared in rlx.h */
#include "base/buf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inside a DOT double-quoted string: escape quotes and backslashes; other
 * control bytes are dropped (a label is one line per field). */
static void db_escaped(rlx_buf* b, const char* s) {
  for (const char* c = s ? s : ""; *c; c++) {
    unsigned char u = (unsigned char)*c;
    if (u == '"' || u == '\\') { rlx_buf_add(b, "\\", 1); rlx_buf_add(b, c, 1); }
    else if (u >= 0x20 && u != 0x7f) rlx_buf_add(b, c, 1);
  }
}

static void db_type(rlx_buf* b, const rlx_graph* g, const rlx_type* t) {
  rlx_buf_puts(b, rlx_dtype_name(t->dtype));
  rlx_buf_add(b, "[", 1);
  for (int32_t i = 0; i < t->rank && i < RLX_MAX_RANK; i++) {
    if (i) rlx_buf_add(b, ",", 1);
    rlx_dim d = t->shape[i];
    int64_t sym = -(d + 1);
    if (d >= 0) rlx_buf_printf(b, "%" PRId64, d);
    else if (sym < g->n_symbols) db_escaped(b, g->symbols[sym]);
    else rlx_buf_add(b, "?", 1);
  }
  rlx_buf_add(b, "]", 1);
}

static const char* node_style(rlx_op op) {
  switch (op) {
    case RLX_OP_INPUT: return "shape=ellipse, style=filled, fillcolor=\"#cfe8ff\"";
    case RLX_OP_PARAM: return "shape=box, style=\"filled,rounded\", fillcolor=\"#fff2c2\"";
    case RLX_OP_CONSTANT: return "shape=box, style=\"filled,dashed\", fillcolor=\"#e8e8e8\"";
    default: return "shape=box";
  }
}

static int is_graph_output(const rlx_graph* g, const rlx_node* n) {
  for (int32_t i = 0; i < g->n_outputs; i++)
    for (int32_t j = 0; j < n->n_out; j++)
      if (g->outputs[i] == n->out[j]) return 1;
  return 0;
}

static void db_node(rlx_buf* b, const rlx_graph* g, int32_t idx) {
  const rlx_node* n = &g->nodes[idx];
  rlx_buf_printf(b, "  n%" PRId32 " [%s%s, label=\"", idx, node_style(n->op),
            is_graph_output(g, n) ? ", peripheries=2" : "");
  db_escaped(b, rlx_op_name(n->op, n->a.kind));
  if ((n->op == RLX_OP_INPUT || n->op == RLX_OP_PARAM) && n->a.name) {
    rlx_buf_puts(b, " '");
    db_escaped(b, n->a.name);
    rlx_buf_puts(b, "'");
  }
  if (n->label) {
    rlx_buf_puts(b, "\\n");
    db_escaped(b, n->label);
  }
  for (int32_t j = 0; j < n->n_out; j++) {
    rlx_buf_printf(b, "\\n%%%" PRId32 ": ", n->out[j]);
    db_type(b, g, &g->values[n->out[j]].type);
  }
  rlx_buf_puts(b, "\"];\n");
}

static void db_edges(rlx_buf* b, const rlx_graph* g, int32_t idx) {
  const rlx_node* n = &g->nodes[idx];
  for (int32_t i = 0; i < n->n_in; i++) {
    rlx_tensor t = n->in[i];
    if (t < 0 || t >= g->n_values) continue;
    int32_t producer = g->values[t].node;
    rlx_buf_printf(b, "  n%" PRId32 " -> n%" PRId32, producer, idx);
    /* Name the operand slot only where order matters to a reader. */
    if (n->n_in > 1) rlx_buf_printf(b, " [label=\"%" PRId32 "\"]", i);
    rlx_buf_puts(b, ";\n");
  }
}

rlx_status rlx_graph_print_dot(const rlx_graph* g, const char* title, char** out_text) {
  if (!out_text) return RLX_INVALID_ARGUMENT;
  *out_text = NULL;
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_buf b = {0};
  rlx_buf_puts(&b, "digraph \"");
  db_escaped(&b, title ? title : "rlx");
  rlx_buf_puts(&b, "\" {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
  rlx_buf_puts(&b, "  edge [fontname=\"Helvetica\", fontsize=8];\n");
  if (title) {
    rlx_buf_puts(&b, "  labelloc=t;\n  label=\"");
    db_escaped(&b, title);
    rlx_buf_puts(&b, "\";\n");
  }
  for (int32_t i = 0; i < g->n_nodes; i++) db_node(&b, g, i);
  for (int32_t i = 0; i < g->n_nodes; i++) db_edges(&b, g, i);
  rlx_buf_puts(&b, "}\n");
  if (b.oom) {
    free(b.p);
    return RLX_RESOURCE_EXHAUSTED;
  }
  *out_text = b.p;
  return RLX_OK;
}
