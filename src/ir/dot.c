/* Graphviz export (rlx_graph_print_dot, public in rlx.h): one box per node
 * (op, label, output types), an edge per use. Leaves get their own shapes and colours so the weights and the
 * data entering the graph stand out from the computation. */
#include "ir/graph.h" /* rlx_graph_print_dot is declared in rlx.h */

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dbuf {
  char* p;
  size_t n, cap;
  int oom;
} dbuf;

static void db_putn(dbuf* b, const char* s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->n + n + 1) cap *= 2;
    char* p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void db_puts(dbuf* b, const char* s) { db_putn(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void db_printf(dbuf* b, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) { b->oom = 1; return; }
  db_putn(b, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Inside a DOT double-quoted string: escape quotes and backslashes; other
 * control bytes are dropped (a label is one line per field). */
static void db_escaped(dbuf* b, const char* s) {
  for (const char* c = s ? s : ""; *c; c++) {
    unsigned char u = (unsigned char)*c;
    if (u == '"' || u == '\\') { db_putn(b, "\\", 1); db_putn(b, c, 1); }
    else if (u >= 0x20 && u != 0x7f) db_putn(b, c, 1);
  }
}

static void db_type(dbuf* b, const rlx_graph* g, const rlx_type* t) {
  db_puts(b, rlx_dtype_name(t->dtype));
  db_putn(b, "[", 1);
  for (int32_t i = 0; i < t->rank && i < RLX_MAX_RANK; i++) {
    if (i) db_putn(b, ",", 1);
    rlx_dim d = t->shape[i];
    int64_t sym = -(d + 1);
    if (d >= 0) db_printf(b, "%" PRId64, d);
    else if (sym < g->n_symbols) db_escaped(b, g->symbols[sym]);
    else db_putn(b, "?", 1);
  }
  db_putn(b, "]", 1);
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

static void db_node(dbuf* b, const rlx_graph* g, int32_t idx) {
  const rlx_node* n = &g->nodes[idx];
  db_printf(b, "  n%" PRId32 " [%s%s, label=\"", idx, node_style(n->op),
            is_graph_output(g, n) ? ", peripheries=2" : "");
  db_escaped(b, rlx_op_name(n->op, n->a.kind));
  if ((n->op == RLX_OP_INPUT || n->op == RLX_OP_PARAM) && n->a.name) {
    db_puts(b, " '");
    db_escaped(b, n->a.name);
    db_puts(b, "'");
  }
  if (n->label) {
    db_puts(b, "\\n");
    db_escaped(b, n->label);
  }
  for (int32_t j = 0; j < n->n_out; j++) {
    db_printf(b, "\\n%%%" PRId32 ": ", n->out[j]);
    db_type(b, g, &g->values[n->out[j]].type);
  }
  db_puts(b, "\"];\n");
}

static void db_edges(dbuf* b, const rlx_graph* g, int32_t idx) {
  const rlx_node* n = &g->nodes[idx];
  for (int32_t i = 0; i < n->n_in; i++) {
    rlx_tensor t = n->in[i];
    if (t < 0 || t >= g->n_values) continue;
    int32_t producer = g->values[t].node;
    db_printf(b, "  n%" PRId32 " -> n%" PRId32, producer, idx);
    /* Name the operand slot only where order matters to a reader. */
    if (n->n_in > 1) db_printf(b, " [label=\"%" PRId32 "\"]", i);
    db_puts(b, ";\n");
  }
}

rlx_status rlx_graph_print_dot(const rlx_graph* g, const char* title, char** out_text) {
  if (!out_text) return RLX_INVALID_ARGUMENT;
  *out_text = NULL;
  if (!g) return RLX_INVALID_ARGUMENT;
  dbuf b = {0};
  db_puts(&b, "digraph \"");
  db_escaped(&b, title ? title : "rlx");
  db_puts(&b, "\" {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
  db_puts(&b, "  edge [fontname=\"Helvetica\", fontsize=8];\n");
  if (title) {
    db_puts(&b, "  labelloc=t;\n  label=\"");
    db_escaped(&b, title);
    db_puts(&b, "\";\n");
  }
  for (int32_t i = 0; i < g->n_nodes; i++) db_node(&b, g, i);
  for (int32_t i = 0; i < g->n_nodes; i++) db_edges(&b, g, i);
  db_puts(&b, "}\n");
  if (b.oom) {
    free(b.p);
    return RLX_RESOURCE_EXHAUSTED;
  }
  *out_text = b.p;
  return RLX_OK;
}
