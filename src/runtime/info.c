/* Static questions about a graph on a device, answered without starting it:
 * rlx_graph_op_support (what `rlx info` prints). The counts follow the same
 * steps as compiling (executable.c): a node the backend's support rule
 * accepts is native, an unsupported node with a decomposition rule is
 * rewritten, and the rest run on the host fallback. */
#include <stdlib.h>
#include <string.h>

#include "passes/decompose.h"
#include "runtime/backend.h"

static int always_supported(const rlx_graph* g, int32_t ni) {
  (void)g; (void)ni;
  return 1;
}

/* Node counts per op (leaves left out), into nodes[RLX_OP_COUNT]. */
static void count_nodes(const rlx_graph* g, int32_t* nodes) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    rlx_op op = g->nodes[i].op;
    if (!(rlx_op_table[op].flags & OPF_LEAF)) nodes[op]++;
  }
}

/* The node whose decomposition is asked for, and the backend's rule: every
 * other node reads as supported, so rlx_decompose rewrites that node alone. */
typedef struct isolate { rlx_supports_fn real; int32_t target; } isolate;
static _Thread_local isolate g_isolate;

static int supports_only_target(const rlx_graph* g, int32_t ni) {
  return ni != g_isolate.target || g_isolate.real(g, ni);
}

/* Rewrites node ni of g alone. *out_rewritten says whether a rule applied,
 * *out_host whether a node of its expansion still lacks a kernel. The pass
 * copies every other node one to one, so the expansion is the nodes
 * [ni, ni + added + 1) of the result. */
static rlx_status decompose_one(rlx_graph* g, rlx_supports_fn sup, int32_t ni,
                                int* out_rewritten, int* out_host) {
  int32_t counts[RLX_OP_COUNT] = {0};
  rlx_graph* dec = NULL;
  g_isolate = (isolate){sup, ni};
  RLX_RETURN_IF_ERROR(rlx_decompose(g, supports_only_target, &dec, counts));
  *out_rewritten = counts[g->nodes[ni].op] > 0;
  *out_host = 0;
  int32_t end = ni + dec->n_nodes - g->n_nodes + 1;
  for (int32_t j = ni; *out_rewritten && j < end && j < dec->n_nodes; j++) {
    uint32_t flags = rlx_op_table[dec->nodes[j].op].flags;
    if (!(flags & (OPF_LEAF | OPF_VIEW)) && !sup(dec, j)) *out_host = 1;
  }
  rlx_graph_destroy(dec);
  return RLX_OK;
}

typedef struct dispatch_counts {
  int32_t native[RLX_OP_COUNT], decomposed[RLX_OP_COUNT], decomposed_host[RLX_OP_COUNT],
      host[RLX_OP_COUNT], views[RLX_OP_COUNT];
} dispatch_counts;

/* Per op kind: what the support rule runs, what the decompose pass rewrites
 * (on a copy: the pass may set the graph's error), and what is left to the
 * host fallback. */
static rlx_status count_dispatch(const rlx_graph* g, rlx_supports_fn sup, dispatch_counts* c) {
  rlx_graph* copy = NULL;
  RLX_RETURN_IF_ERROR(rlx_graph_clone(g, &copy));
  rlx_status s = RLX_OK;
  for (int32_t i = 0; i < copy->n_nodes && s == RLX_OK; i++) {
    rlx_op op = copy->nodes[i].op;
    uint32_t flags = rlx_op_table[op].flags;
    int rewritten = 0, host = 0;
    /* A deferred node stands for the part of an imported model that is
     * built once shape-valued inputs arrive (value_inputs.c): nothing runs
     * it as such, so it counts under no heading. */
    if ((flags & OPF_LEAF) || op == RLX_OP_DEFERRED) continue;
    if (flags & OPF_VIEW) { c->views[op]++; continue; }
    if (sup(copy, i)) { c->native[op]++; continue; }
    s = decompose_one(copy, sup, i, &rewritten, &host);
    if (s != RLX_OK) rlx_fail((rlx_error*)&g->err, s, "%s", copy->err.msg);
    else if (!rewritten) c->host[op]++;
    else { c->decomposed[op]++; c->decomposed_host[op] += host; }
  }
  rlx_graph_destroy(copy);
  return s;
}

rlx_status rlx_graph_op_support(const rlx_graph* g, const char* device, rlx_op_support* out,
                                int32_t cap, int32_t* out_n) {
  if (!g || !out_n || (cap > 0 && !out)) return RLX_INVALID_ARGUMENT;
  *out_n = 0;
  const rlx_backend* b = NULL;
  rlx_status s = device ? rlx_backend_lookup(device, &b) : RLX_OK;
  if (s == RLX_NOT_FOUND)
    return rlx_fail((rlx_error*)&g->err, s, "unknown device '%s' (devices: cpu, cuda, vulkan, webgpu)",
                    device);
  if (s != RLX_OK)
    return rlx_fail((rlx_error*)&g->err, s, "device '%s' is not built into this library", device);
  int32_t nodes[RLX_OP_COUNT] = {0};
  count_nodes(g, nodes);
  dispatch_counts* c = calloc(1, sizeof *c);
  if (!c) return rlx_fail((rlx_error*)&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  if (b) {
    s = count_dispatch(g, b->supports ? b->supports : always_supported, c);
    if (s != RLX_OK) { free(c); return s; }
  }
  int32_t n = 0;
  for (int op = 0; op < RLX_OP_COUNT; op++) {
    if (!nodes[op]) continue;
    if (n < cap) {
      rlx_op_support* o = &out[n];
      memset(o, 0, sizeof *o);
      o->op = rlx_op_table[op].text;
      o->nodes = nodes[op];
      if (b) {
        o->native = c->native[op];
        o->decomposed = c->decomposed[op];
        o->decomposed_host = c->decomposed_host[op];
        o->host = c->host[op];
        o->views = c->views[op];
      }
    }
    n++;
  }
  free(c);
  *out_n = n;
  return RLX_OK;
}
