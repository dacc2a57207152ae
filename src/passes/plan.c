/* Memory planner (see plan.h).
 *
 * Three stages:
 *  1. sizes and own lifetimes of every value (static dims only);
 *  2. ownership: views (and identity casts) join their source's "view class";
 *     an elementwise node may then hand its output class to a dying input
 *     class (in place). Each value ends up with a root that owns its bytes,
 *     and each root's lifetime covers every value sharing its bytes;
 *  3. offsets: roots are placed first-fit among the roots live at the same
 *     time, in a few orders; the smallest arena wins.
 * Positions: node i's outputs are written at position i; a value read by
 * node j is live through j. Persistent values span [0, n_nodes]. */
#include "passes/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ small helpers */

static const char* value_str(const rlx_graph* g, int32_t v, char* buf, size_t cap) {
  char nb[160];
  const rlx_value* val = &g->values[v];
  if (val->node < 0 || val->node >= g->n_nodes)
    snprintf(buf, cap, "value %d (no producer)", (int)v);
  else
    snprintf(buf, cap, "value %d (output %d of %s)", (int)v, (int)val->index,
             rlx_node_str(g, val->node, nb, sizeof nb));
  return buf;
}

static int is_leaf_node(const rlx_graph* g, int32_t ni) {
  return (rlx_op_table[g->nodes[ni].op].flags & OPF_LEAF) != 0;
}

/* Views and identity casts produce no bytes of their own. */
static int is_alias_node(const rlx_graph* g, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  if (n->n_in < 1 || n->n_out != 1 || n->in[0] < 0) return 0;
  if (rlx_op_table[n->op].flags & OPF_VIEW) return 1;
  return n->op == RLX_OP_CAST &&
         g->values[n->out[0]].type.dtype == g->values[n->in[0]].type.dtype;
}

static int value_in_range(const rlx_graph* g, rlx_tensor t) {
  return t >= 0 && t < g->n_values;
}

/* Follows views / identity casts up to the value that holds the bytes. The
 * walk is bounded so a malformed (cyclic) graph cannot hang it. */
static rlx_tensor view_root_of(const rlx_graph* g, rlx_tensor t) {
  for (int32_t steps = 0; steps < g->n_values; steps++) {
    int32_t ni = g->values[t].node;
    if (ni < 0 || ni >= g->n_nodes || !is_alias_node(g, ni)) break;
    rlx_tensor src = g->nodes[ni].in[0];
    if (!value_in_range(g, src) || src >= t) break;
    t = src;
  }
  return t;
}

/* Shape half of rlx_plan_inplace_ok: exact shape, same element size. */
static int inplace_shape_ok(const rlx_graph* g, int32_t ni, int32_t slot) {
  if (ni < 0 || ni >= g->n_nodes) return 0;
  const rlx_node* n = &g->nodes[ni];
  if (!(rlx_op_table[n->op].flags & OPF_ELEMENTWISE) || n->n_out != 1) return 0;
  if (slot < 0 || slot >= n->n_in || !value_in_range(g, n->in[slot])) return 0;
  if (!value_in_range(g, n->out[0])) return 0;
  const rlx_type* in = &g->values[n->in[slot]].type;
  const rlx_type* out = &g->values[n->out[0]].type;
  if (in->rank != out->rank) return 0;
  if (rlx_dtype_size(in->dtype) != rlx_dtype_size(out->dtype)) return 0;
  for (int32_t d = 0; d < in->rank; d++)
    if (in->shape[d] != out->shape[d]) return 0;
  return 1;
}

int rlx_plan_inplace_ok(const rlx_graph* g, int32_t ni, int32_t slot) {
  if (!g || !inplace_shape_ok(g, ni, slot)) return 0;
  rlx_tensor root = view_root_of(g, g->nodes[ni].in[slot]);
  if (is_leaf_node(g, g->values[root].node)) return 0;
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (value_in_range(g, g->outputs[i]) && view_root_of(g, g->outputs[i]) == root) return 0;
  return 1;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* ------------------------------------------------------------ plan storage */

void rlx_plan_free(rlx_plan* p) {
  if (!p) return;
  free(p->offset);
  free(p->bytes);
  free(p->root);
  free(p->first);
  free(p->last);
  memset(p, 0, sizeof *p);
}

static rlx_status plan_alloc(rlx_graph* g, rlx_plan* p) {
  size_t n = g->n_values > 0 ? (size_t)g->n_values : 1;
  p->offset = calloc(n, sizeof *p->offset);
  p->bytes = calloc(n, sizeof *p->bytes);
  p->root = calloc(n, sizeof *p->root);
  p->first = calloc(n, sizeof *p->first);
  p->last = calloc(n, sizeof *p->last);
  if (!p->offset || !p->bytes || !p->root || !p->first || !p->last) {
    rlx_plan_free(p);
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "memory plan: out of host memory");
  }
  p->n_values = g->n_values;
  return RLX_OK;
}

/* ------------------------------------------------------------ stage 1: sizes, lifetimes */

static rlx_status value_bytes(rlx_graph* g, int32_t v, uint64_t* out) {
  char vb[256];
  const rlx_type* t = &g->values[v].type;
  if ((unsigned)t->dtype >= RLX_DTYPE_COUNT || t->rank < 0 || t->rank > RLX_MAX_RANK)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "memory plan: %s has an invalid type",
                    value_str(g, v, vb, sizeof vb));
  uint64_t bytes = rlx_dtype_size(t->dtype);
  for (int32_t d = 0; d < t->rank; d++) {
    if (t->shape[d] < 0) {
      char tb[160];
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                      "memory plan: %s has symbolic dim %d in %s; specialize the graph first",
                      value_str(g, v, vb, sizeof vb), (int)d,
                      rlx_type_str(g, t, tb, sizeof tb));
    }
    uint64_t dim = (uint64_t)t->shape[d];
    if (dim != 0 && bytes > (UINT64_MAX >> 2) / dim)
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "memory plan: %s is too large to address",
                      value_str(g, v, vb, sizeof vb));
    bytes *= dim;
  }
  *out = bytes;
  return RLX_OK;
}

/* Every input must be produced by an earlier node: liveness by position
 * relies on the topological order. */
static rlx_status check_structure(rlx_graph* g) {
  char nb[160];
  for (int32_t v = 0; v < g->n_values; v++) {
    int32_t ni = g->values[v].node;
    if (ni < 0 || ni >= g->n_nodes)
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "memory plan: value %d has no producer",
                      (int)v);
  }
  for (int32_t ni = 0; ni < g->n_nodes; ni++) {
    const rlx_node* n = &g->nodes[ni];
    for (int32_t s = 0; s < n->n_in; s++) {
      rlx_tensor t = n->in[s];
      if (t == RLX_NONE) continue;
      if (!value_in_range(g, t) || g->values[t].node >= ni)
        return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                        "memory plan: %s input %d (value %d) is not produced by an earlier node",
                        rlx_node_str(g, ni, nb, sizeof nb), (int)s, (int)t);
    }
    for (int32_t k = 0; k < n->n_out; k++)
      if (!value_in_range(g, n->out[k]) || g->values[n->out[k]].node != ni)
        return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                        "memory plan: %s output %d is inconsistent",
                        rlx_node_str(g, ni, nb, sizeof nb), (int)k);
  }
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (!value_in_range(g, g->outputs[i]))
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                      "memory plan: graph output %d (value %d) does not exist", (int)i,
                      (int)g->outputs[i]);
  return RLX_OK;
}

/* Own lifetime of each value, ignoring aliasing: [producer, last reader];
 * persistent values (leaves, graph outputs) span [0, n_nodes]. */
static void own_lifetimes(const rlx_graph* g, uint8_t* persistent, rlx_plan* p) {
  int32_t n = g->n_nodes;
  for (int32_t v = 0; v < g->n_values; v++) {
    int32_t ni = g->values[v].node;
    persistent[v] = (uint8_t)is_leaf_node(g, ni);
    p->first[v] = ni;
    p->last[v] = ni;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) persistent[g->outputs[i]] = 1;
  for (int32_t ni = 0; ni < n; ni++) {
    const rlx_node* node = &g->nodes[ni];
    for (int32_t s = 0; s < node->n_in; s++)
      if (node->in[s] != RLX_NONE && p->last[node->in[s]] < ni) p->last[node->in[s]] = ni;
  }
  for (int32_t v = 0; v < g->n_values; v++)
    if (persistent[v]) {
      p->first[v] = 0;
      p->last[v] = n;
    }
}

/* ------------------------------------------------------------ stage 2: ownership */

/* Per class of values sharing bytes: the union of their lifetimes. */
typedef struct klass {
  int32_t first, last;
  uint8_t persistent;
} klass;

static void klass_merge(klass* into, const klass* from) {
  if (from->first < into->first) into->first = from->first;
  if (from->last > into->last) into->last = from->last;
  into->persistent |= from->persistent;
}

typedef struct owner_ctx {
  rlx_graph* g;
  rlx_plan* p;
  const uint8_t* persistent;
  int32_t* vroot; /* per value: view-class root */
  int32_t* owner; /* per view-class root: the root owning its bytes */
  klass* cls;     /* per view-class root, then per owner */
} owner_ctx;

/* Views and identity casts join their source's class. */
static rlx_status build_view_classes(owner_ctx* c) {
  rlx_graph* g = c->g;
  for (int32_t v = 0; v < g->n_values; v++) c->vroot[v] = v;
  for (int32_t ni = 0; ni < g->n_nodes; ni++) {
    if (!is_alias_node(g, ni)) continue;
    rlx_tensor src = g->nodes[ni].in[0], dst = g->nodes[ni].out[0];
    if (c->p->bytes[dst] != c->p->bytes[src]) {
      char nb[160];
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                      "memory plan: view %s has %llu bytes but its source has %llu",
                      rlx_node_str(g, ni, nb, sizeof nb),
                      (unsigned long long)c->p->bytes[dst], (unsigned long long)c->p->bytes[src]);
    }
    c->vroot[dst] = c->vroot[src];
  }
  for (int32_t v = 0; v < g->n_values; v++) {
    c->owner[v] = v;
    c->cls[v] = (klass){c->p->first[v], c->p->last[v], c->persistent[v]};
  }
  for (int32_t v = 0; v < g->n_values; v++)
    if (c->vroot[v] != v) klass_merge(&c->cls[c->vroot[v]], &c->cls[v]);
  return RLX_OK;
}

/* Can node ni write its output over the bytes owned by `owner` (reached
 * through input slot `slot`)? The owner's class must end exactly here, and
 * every other slot reading those bytes must read them with the output's
 * shape, so each element is read before it is overwritten at the same index. */
static int can_take(const owner_ctx* c, int32_t ni, int32_t slot, int32_t owner) {
  const rlx_graph* g = c->g;
  const rlx_node* n = &g->nodes[ni];
  const klass* k = &c->cls[owner];
  if (k->persistent || k->last != ni || c->p->bytes[owner] != c->p->bytes[n->out[0]]) return 0;
  for (int32_t s = 0; s < n->n_in; s++) {
    rlx_tensor t = n->in[s];
    if (s == slot || t == RLX_NONE) continue;
    if (c->owner[c->vroot[t]] == owner && !inplace_shape_ok(g, ni, s)) return 0;
  }
  return 1;
}

static void assign_inplace(owner_ctx* c) {
  rlx_graph* g = c->g;
  for (int32_t ni = 0; ni < g->n_nodes; ni++) {
    const rlx_node* n = &g->nodes[ni];
    if (is_alias_node(g, ni) || n->n_out != 1) continue;
    rlx_tensor out = n->out[0];
    /* an output given a state input's bytes (assign_states) keeps them */
    if (c->p->bytes[out] == 0 || c->owner[out] != out) continue;
    for (int32_t s = 0; s < n->n_in; s++) {
      if (!inplace_shape_ok(g, ni, s)) continue;
      int32_t owner = c->owner[c->vroot[n->in[s]]];
      if (!can_take(c, ni, s, owner)) continue;
      c->owner[out] = owner; /* out is its own view-class root */
      klass_merge(&c->cls[owner], &c->cls[out]);
      break;
    }
  }
}

/* The optimizer updates are elementwise with several outputs: each lane
 * reads every operand of its element before writing any output, so any
 * output may take the bytes of an input read at the same index. */
static int is_update_node(const rlx_graph* g, int32_t ni) {
  rlx_op op = g->nodes[ni].op;
  return op == RLX_OP_SGD_UPDATE || op == RLX_OP_ADAM_UPDATE;
}

/* Does slot s of y's producer read element i exactly where y writes
 * element i (same shape and element size)? */
static int reads_aligned_with(const rlx_graph* g, int32_t ni, int32_t s, rlx_tensor y) {
  if (!is_update_node(g, ni)) return inplace_shape_ok(g, ni, s);
  const rlx_type* in = &g->values[g->nodes[ni].in[s]].type;
  const rlx_type* out = &g->values[y].type;
  if (in->rank != out->rank || rlx_dtype_size(in->dtype) != rlx_dtype_size(out->dtype)) return 0;
  for (int32_t d = 0; d < in->rank; d++)
    if (in->shape[d] != out->shape[d]) return 0;
  return 1;
}

/* Whether some other value already lives in the bytes of x's class. */
static int class_taken(const owner_ctx* c, int32_t xr) {
  for (int32_t v = 0; v < c->g->n_values; v++)
    if (c->vroot[v] == v && v != xr && c->owner[v] == xr) return 1;
  return 0;
}

/* Device state: output y may live in the bytes of input x (both persistent)
 * when y's producer writes elementwise over x at the same index (every slot
 * reading x's bytes has y's exact shape; an optimizer update may do so for
 * each of its outputs), no later node reads x's bytes, x is not a graph
 * output, and neither side was given away already. */
static int state_alias_ok(const owner_ctx* c, rlx_tensor x, rlx_tensor y) {
  const rlx_graph* g = c->g;
  if (!value_in_range(g, x) || !value_in_range(g, y) || x == y) return 0;
  int32_t ni = g->values[y].node, xr = c->vroot[x];
  if (ni < 0 || ni >= g->n_nodes || is_alias_node(g, ni)) return 0;
  if (g->nodes[ni].n_out != 1 && !is_update_node(g, ni)) return 0;
  if (c->vroot[y] != y || c->owner[y] != y || c->owner[xr] != xr || class_taken(c, xr)) return 0;
  if (c->p->bytes[xr] != c->p->bytes[y] || c->p->bytes[y] == 0) return 0;
  const rlx_node* n = &g->nodes[ni];
  int reads = 0;
  for (int32_t s = 0; s < n->n_in; s++) {
    if (n->in[s] == RLX_NONE || c->vroot[n->in[s]] != xr) continue;
    if (!reads_aligned_with(g, ni, s, y)) return 0;
    reads = 1;
  }
  if (!reads) return 0;
  for (int32_t nj = ni + 1; nj < g->n_nodes; nj++)
    for (int32_t s = 0; s < g->nodes[nj].n_in; s++)
      if (g->nodes[nj].in[s] != RLX_NONE && c->vroot[g->nodes[nj].in[s]] == xr) return 0;
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (value_in_range(g, g->outputs[i]) && c->vroot[g->outputs[i]] == xr) return 0;
  return 1;
}

static void assign_states(owner_ctx* c, const int32_t* pairs, int32_t n_pairs) {
  for (int32_t k = 0; k < n_pairs; k++) {
    rlx_tensor x = pairs[2 * k], y = pairs[2 * k + 1];
    if (!state_alias_ok(c, x, y)) continue;
    int32_t owner = c->owner[c->vroot[x]];
    c->owner[y] = owner;
    klass_merge(&c->cls[owner], &c->cls[y]);
  }
}

/* Fills p->root and widens each root's lifetime to its whole class. */
static void finish_roots(owner_ctx* c) {
  rlx_graph* g = c->g;
  rlx_plan* p = c->p;
  for (int32_t v = 0; v < g->n_values; v++) p->root[v] = c->owner[c->vroot[v]];
  for (int32_t v = 0; v < g->n_values; v++) {
    if (p->root[v] != v) continue;
    const klass* k = &c->cls[v];
    p->first[v] = k->persistent ? 0 : k->first;
    p->last[v] = k->persistent ? g->n_nodes : k->last;
  }
}

static rlx_status assign_owners(rlx_graph* g, const rlx_plan_options* opt,
                                const int32_t* state_pairs, int32_t n_pairs,
                                const uint8_t* persistent, rlx_plan* p) {
  size_t n = g->n_values > 0 ? (size_t)g->n_values : 1;
  owner_ctx c = {g, p, persistent, calloc(n, sizeof(int32_t)), calloc(n, sizeof(int32_t)),
                 calloc(n, sizeof(klass))};
  rlx_status st = RLX_OK;
  if (!c.vroot || !c.owner || !c.cls)
    st = rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "memory plan: out of host memory");
  if (st == RLX_OK) st = build_view_classes(&c);
  if (st == RLX_OK) assign_states(&c, state_pairs, n_pairs);
  if (st == RLX_OK && opt->inplace) assign_inplace(&c);
  if (st == RLX_OK) finish_roots(&c);
  free(c.vroot);
  free(c.owner);
  free(c.cls);
  return st;
}

/* ------------------------------------------------------------ stage 3: offsets */

typedef struct block {
  int32_t value;
  int32_t first, last;
  uint64_t size;
  uint64_t offset;
} block;

typedef int (*block_cmp)(const void*, const void*);

static int cmp_by_size(const void* a, const void* b) {
  const block *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->value < y->value ? -1 : x->value > y->value;
}

static int cmp_by_first(const void* a, const void* b) {
  const block *x = a, *y = b;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  return x->value < y->value ? -1 : x->value > y->value;
}

/* Longest-lived first: the blocks that constrain everything get the bottom. */
static int cmp_by_span(const void* a, const void* b) {
  const block *x = a, *y = b;
  int32_t sx = x->last - x->first, sy = y->last - y->first;
  if (sx != sy) return sx > sy ? -1 : 1;
  return cmp_by_size(a, b);
}

/* Where a block of `size` bytes goes at or after cand so that it does not
 * straddle a multiple of boundary (0: anywhere), if it can. */
static uint64_t past_boundary(uint64_t cand, uint64_t size, uint64_t boundary, uint64_t align) {
  if (boundary == 0 || size > boundary || cand > UINT64_MAX - 2 * boundary) return cand;
  uint64_t next = (cand / boundary + 1) * boundary;
  return cand + size > next ? align_up(next, align) : cand;
}

/* First fit: `placed` holds indices of already-placed blocks sorted by
 * offset; the new block goes into the lowest aligned gap among those whose
 * lifetime intersects its own, not straddling a multiple of boundary where
 * it fits between two. Returns 0 if the arena would pass 2^64. */
static int first_fit(const block* b, const int32_t* placed, int32_t n_placed, const block* nb,
                     uint64_t align, uint64_t boundary, uint64_t* out_offset) {
  uint64_t cand = 0;
  for (int32_t i = 0; i < n_placed; i++) {
    const block* o = &b[placed[i]];
    if (o->last < nb->first || nb->last < o->first) continue;
    if (o->offset >= cand) cand = past_boundary(cand, nb->size, boundary, align);
    if (o->offset >= cand && o->offset - cand >= nb->size) break;
    uint64_t end = o->offset + o->size;
    if (end > cand) {
      if (end > UINT64_MAX - align) return 0;
      cand = align_up(end, align);
    }
  }
  cand = past_boundary(cand, nb->size, boundary, align);
  if (cand > UINT64_MAX - nb->size) return 0;
  *out_offset = cand;
  return 1;
}

/* Places blocks in the order given by cmp; returns the arena size (or
 * UINT64_MAX on overflow). `placed` is scratch of n entries. */
static uint64_t place_blocks(block* b, int32_t n, block_cmp cmp, uint64_t align,
                             uint64_t boundary, int32_t* placed) {
  qsort(b, (size_t)n, sizeof *b, cmp);
  uint64_t arena = 0;
  for (int32_t k = 0; k < n; k++) {
    uint64_t off;
    if (!first_fit(b, placed, k, &b[k], align, boundary, &off)) return UINT64_MAX;
    b[k].offset = off;
    int32_t pos = k; /* insert keeping `placed` sorted by offset */
    while (pos > 0 && b[placed[pos - 1]].offset > off) {
      placed[pos] = placed[pos - 1];
      pos--;
    }
    placed[pos] = k;
    if (off + b[k].size > arena) arena = off + b[k].size;
  }
  return arena;
}

static rlx_status assign_offsets(rlx_graph* g, uint64_t align, uint64_t boundary, rlx_plan* p) {
  int32_t n = 0;
  for (int32_t v = 0; v < g->n_values; v++)
    if (p->root[v] == v && p->bytes[v] > 0) n++;
  size_t cap = n > 0 ? (size_t)n : 1;
  block* b = malloc(cap * sizeof *b);
  int32_t* placed = malloc(cap * sizeof *placed);
  if (!b || !placed) {
    free(b);
    free(placed);
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "memory plan: out of host memory");
  }
  static const block_cmp orders[] = {cmp_by_size, cmp_by_first, cmp_by_span};
  uint64_t best = UINT64_MAX;
  int best_order = -1;
  for (int o = 0; o < (int)(sizeof orders / sizeof *orders); o++) {
    int32_t k = 0;
    for (int32_t v = 0; v < g->n_values; v++)
      if (p->root[v] == v && p->bytes[v] > 0)
        b[k++] = (block){v, p->first[v], p->last[v], p->bytes[v], 0};
    uint64_t arena = place_blocks(b, n, orders[o], align, boundary, placed);
    if (arena < best || best_order < 0) {
      best = arena;
      best_order = o;
      for (int32_t i = 0; i < n; i++) p->offset[b[i].value] = b[i].offset;
    }
  }
  free(b);
  free(placed);
  if (best == UINT64_MAX)
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED,
                    "memory plan: the arena would exceed 2^64 bytes");
  p->arena_bytes = best;
  for (int32_t v = 0; v < g->n_values; v++)
    p->offset[v] = p->bytes[v] ? p->offset[p->root[v]] : 0;
  return RLX_OK;
}

/* Sum of root bytes, and the largest sum live at any one position (a lower
 * bound for any plan that keeps these lifetimes). */
static rlx_status measure(rlx_graph* g, rlx_plan* p) {
  int32_t n = g->n_nodes;
  uint64_t* delta = calloc((size_t)n + 2, sizeof *delta);
  uint64_t* ends = calloc((size_t)n + 2, sizeof *ends);
  if (!delta || !ends) {
    free(delta);
    free(ends);
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "memory plan: out of host memory");
  }
  p->tensor_bytes = 0;
  for (int32_t v = 0; v < g->n_values; v++) {
    if (p->root[v] != v || !p->bytes[v]) continue;
    p->tensor_bytes += p->bytes[v];
    delta[p->first[v]] += p->bytes[v];
    ends[p->last[v] + 1] += p->bytes[v];
  }
  uint64_t live = 0, peak = 0;
  for (int32_t pos = 0; pos <= n; pos++) {
    live = live + delta[pos] - ends[pos];
    if (live > peak) peak = live;
  }
  p->peak_live_bytes = peak;
  free(delta);
  free(ends);
  return RLX_OK;
}

/* ------------------------------------------------------------ entry point */

static rlx_status plan_all(rlx_graph* g, const rlx_plan_options* opt, const int32_t* state_pairs,
                           int32_t n_pairs, rlx_plan* out) {
  RLX_RETURN_IF_ERROR(check_structure(g));
  RLX_RETURN_IF_ERROR(plan_alloc(g, out));
  out->alignment = opt->alignment;
  for (int32_t v = 0; v < g->n_values; v++) RLX_RETURN_IF_ERROR(value_bytes(g, v, &out->bytes[v]));
  uint8_t* persistent = calloc(g->n_values > 0 ? (size_t)g->n_values : 1, 1);
  if (!persistent)
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "memory plan: out of host memory");
  own_lifetimes(g, persistent, out);
  rlx_status st = assign_owners(g, opt, state_pairs, n_pairs, persistent, out);
  free(persistent);
  RLX_RETURN_IF_ERROR(st);
  RLX_RETURN_IF_ERROR(assign_offsets(g, opt->alignment, opt->boundary, out));
  return measure(g, out);
}

rlx_status rlx_plan_memory(rlx_graph* g, const rlx_plan_options* opt, rlx_plan* out) {
  return rlx_plan_memory_states(g, opt, NULL, 0, out);
}

rlx_status rlx_plan_memory_states(rlx_graph* g, const rlx_plan_options* opt,
                                  const int32_t* state_pairs, int32_t n_pairs, rlx_plan* out) {
  if (!g || !out || (n_pairs > 0 && !state_pairs)) return RLX_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  rlx_plan_options defaults = {64, 1, 0};
  if (!opt) opt = &defaults;
  uint64_t a = opt->alignment;
  if (a < 16 || (a & (a - 1)) != 0)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                    "memory plan: alignment %llu is not a power of two >= 16",
                    (unsigned long long)a);
  rlx_status st = plan_all(g, opt, state_pairs, n_pairs, out);
  if (st != RLX_OK) rlx_plan_free(out);
  return st;
}

/* ------------------------------------------------------------ verification */

static int lifetimes_meet(const rlx_plan* p, int32_t a, int32_t b) {
  return p->first[a] <= p->last[b] && p->first[b] <= p->last[a];
}

/* Per-value consistency: root sane, offset aligned and inside the arena, the
 * value's own lifetime inside its root's. */
static rlx_status verify_values(rlx_graph* g, const rlx_plan* p) {
  char vb[256];
  for (int32_t v = 0; v < p->n_values; v++) {
    int32_t r = p->root[v];
    if (r < 0 || r >= p->n_values || p->root[r] != r)
      return rlx_fail(&g->err, RLX_INTERNAL, "plan verify: %s has a bad root %d",
                      value_str(g, v, vb, sizeof vb), (int)r);
    if (p->offset[v] % p->alignment != 0)
      return rlx_fail(&g->err, RLX_INTERNAL, "plan verify: %s offset %llu is not aligned",
                      value_str(g, v, vb, sizeof vb), (unsigned long long)p->offset[v]);
    if (p->offset[v] > p->arena_bytes || p->bytes[v] > p->arena_bytes - p->offset[v])
      return rlx_fail(&g->err, RLX_INTERNAL, "plan verify: %s ends past the arena",
                      value_str(g, v, vb, sizeof vb));
    if (!p->bytes[v]) continue;
    if (p->offset[v] != p->offset[r] || p->bytes[v] > p->bytes[r])
      return rlx_fail(&g->err, RLX_INTERNAL, "plan verify: %s does not match its root %d",
                      value_str(g, v, vb, sizeof vb), (int)r);
    if (p->first[v] < p->first[r] || p->last[v] > p->last[r] || p->first[v] > p->last[v])
      return rlx_fail(&g->err, RLX_INTERNAL,
                      "plan verify: %s lives [%d,%d] outside its root's [%d,%d]",
                      value_str(g, v, vb, sizeof vb), (int)p->first[v], (int)p->last[v],
                      (int)p->first[r], (int)p->last[r]);
  }
  return RLX_OK;
}

/* Liveness re-derived from the graph: every value's bytes must be live where
 * it is written and read, and persistent values over the whole run. */
static rlx_status verify_liveness(rlx_graph* g, const rlx_plan* p) {
  char vb[256];
  int32_t n = g->n_nodes;
  for (int32_t ni = 0; ni < n; ni++) {
    const rlx_node* node = &g->nodes[ni];
    int32_t leaf = is_leaf_node(g, ni);
    for (int32_t k = 0; k < node->n_in + node->n_out; k++) {
      rlx_tensor t = k < node->n_in ? node->in[k] : node->out[k - node->n_in];
      if (!value_in_range(g, t) || !p->bytes[t]) continue;
      int32_t r = p->root[t];
      int32_t lo = leaf ? 0 : ni, hi = leaf ? n : ni;
      if (p->first[r] > lo || p->last[r] < hi)
        return rlx_fail(&g->err, RLX_INTERNAL,
                        "plan verify: %s is used at %d but its bytes live [%d,%d]",
                        value_str(g, t, vb, sizeof vb), (int)ni, (int)p->first[r],
                        (int)p->last[r]);
    }
  }
  for (int32_t i = 0; i < g->n_outputs; i++) {
    rlx_tensor t = g->outputs[i];
    if (!value_in_range(g, t) || !p->bytes[t]) continue;
    if (p->first[p->root[t]] > 0 || p->last[p->root[t]] < n)
      return rlx_fail(&g->err, RLX_INTERNAL, "plan verify: graph output %s is not persistent",
                      value_str(g, t, vb, sizeof vb));
  }
  return RLX_OK;
}

/* Last reader of each value (n_nodes if persistent), from the graph alone. */
static void last_uses(const rlx_graph* g, int32_t* last) {
  for (int32_t v = 0; v < g->n_values; v++)
    last[v] = is_leaf_node(g, g->values[v].node) ? g->n_nodes : g->values[v].node;
  for (int32_t ni = 0; ni < g->n_nodes; ni++)
    for (int32_t s = 0; s < g->nodes[ni].n_in; s++) {
      rlx_tensor t = g->nodes[ni].in[s];
      if (t != RLX_NONE && last[t] < ni) last[t] = ni;
    }
  for (int32_t i = 0; i < g->n_outputs; i++) last[g->outputs[i]] = g->n_nodes;
}

/* Is value v (produced by node ni, not a view) a legal in-place write over
 * root r? Some input sharing r must allow it, and every value already on
 * those bytes must be dead after ni. */
static int legal_inplace(const rlx_graph* g, const rlx_plan* p, const int32_t* last, int32_t v) {
  int32_t r = p->root[v], ni = g->values[v].node;
  const rlx_node* node = &g->nodes[ni];
  int ok = 0;
  for (int32_t s = 0; s < node->n_in && !ok; s++)
    ok = value_in_range(g, node->in[s]) && p->root[node->in[s]] == r &&
         rlx_plan_inplace_ok(g, ni, s);
  for (int32_t u = 0; u < p->n_values && ok; u++)
    if (p->root[u] == r && g->values[u].node < ni && last[u] > ni) ok = 0;
  return ok;
}

/* A value sharing its root must be a view of a value on that root, or an
 * in-place write. */
static rlx_status verify_sharing(rlx_graph* g, const rlx_plan* p) {
  char vb[256];
  int32_t* last = malloc((g->n_values > 0 ? (size_t)g->n_values : 1) * sizeof *last);
  if (!last) return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "plan verify: out of memory");
  last_uses(g, last);
  rlx_status st = RLX_OK;
  for (int32_t v = 0; v < p->n_values && st == RLX_OK; v++) {
    int32_t r = p->root[v], ni = g->values[v].node;
    if (r == v || !p->bytes[v]) continue;
    int ok = is_alias_node(g, ni) ? p->root[g->nodes[ni].in[0]] == r
                                  : legal_inplace(g, p, last, v);
    if (!ok)
      st = rlx_fail(&g->err, RLX_INTERNAL,
                    "plan verify: %s shares the bytes of value %d without a view or a legal "
                    "in-place write",
                    value_str(g, v, vb, sizeof vb), (int)r);
  }
  free(last);
  return st;
}

/* Distinct roots live at the same time must not overlap. */
static rlx_status verify_overlap(rlx_graph* g, const rlx_plan* p) {
  for (int32_t a = 0; a < p->n_values; a++) {
    if (p->root[a] != a || !p->bytes[a]) continue;
    for (int32_t b = a + 1; b < p->n_values; b++) {
      if (p->root[b] != b || !p->bytes[b] || !lifetimes_meet(p, a, b)) continue;
      uint64_t a0 = p->offset[a], a1 = a0 + p->bytes[a];
      uint64_t b0 = p->offset[b], b1 = b0 + p->bytes[b];
      if (a0 < b1 && b0 < a1) {
        char va[256], vb[256];
        return rlx_fail(&g->err, RLX_INTERNAL,
                        "plan verify: %s [%llu,%llu) live [%d,%d] overlaps %s [%llu,%llu) "
                        "live [%d,%d]",
                        value_str(g, a, va, sizeof va), (unsigned long long)a0,
                        (unsigned long long)a1, (int)p->first[a], (int)p->last[a],
                        value_str(g, b, vb, sizeof vb), (unsigned long long)b0,
                        (unsigned long long)b1, (int)p->first[b], (int)p->last[b]);
      }
    }
  }
  return RLX_OK;
}

rlx_status rlx_plan_verify(rlx_graph* g, const rlx_plan* p) {
  if (!g || !p) return RLX_INVALID_ARGUMENT;
  if (p->n_values != g->n_values || (p->n_values > 0 && (!p->offset || !p->bytes || !p->root ||
                                                         !p->first || !p->last)))
    return rlx_fail(&g->err, RLX_INTERNAL, "plan verify: plan has %d values, graph has %d",
                    (int)p->n_values, (int)g->n_values);
  uint64_t a = p->alignment;
  if (a == 0 || (a & (a - 1)) != 0)
    return rlx_fail(&g->err, RLX_INTERNAL, "plan verify: alignment %llu",
                    (unsigned long long)a);
  RLX_RETURN_IF_ERROR(check_structure(g));
  RLX_RETURN_IF_ERROR(verify_values(g, p));
  RLX_RETURN_IF_ERROR(verify_liveness(g, p));
  RLX_RETURN_IF_ERROR(verify_sharing(g, p));
  RLX_RETURN_IF_ERROR(verify_overlap(g, p));
  if (p->arena_bytes < p->peak_live_bytes)
    return rlx_fail(&g->err, RLX_INTERNAL, "plan verify: arena %llu below peak live %llu",
                    (unsigned long long)p->arena_bytes, (unsigned long long)p->peak_live_bytes);
  return RLX_OK;
}
