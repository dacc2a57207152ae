/* Elementwise fusion into ElementwiseRegion nodes (see fuse_elementwise.h). */
#include "passes/fuse_elementwise.h"

#include <stdlib.h>
#include <string.h>

#include "ir/dtype.h"
#include "ir/region.h"
#include "passes/bn_fold.h"

/* One region being grown (or made). */
typedef struct region {
  int32_t root;
  int32_t n_members;
  int32_t members[RLX_REGION_MAX_INSTRS];
  int32_t n_ext;
  rlx_tensor ext[RLX_REGION_MAX_INPUTS]; /* inputs, in slot order */
  int32_t n_imm;
  rlx_tensor imm[RLX_REGION_MAX_INSTRS]; /* scalar constants read as immediates */
} region;

#define HEAP_CAP (4 * RLX_REGION_MAX_INSTRS + 4)

typedef struct fuser {
  const rlx_graph* g;
  const rlx_fuse_options* opt;
  int32_t* readers;   /* node inputs + graph outputs reading each value */
  int32_t* is_output; /* graph outputs per value */
  int32_t* used_in;   /* reads by the members of the region being grown */
  int32_t* owner;     /* node -> root of its region, -1 */
  int32_t* seen;      /* node -> root of the last attempt that looked at it */
  int32_t* imm_reads; /* value -> reads turned into immediates (committed regions) */
  int32_t heap[HEAP_CAP];
  int32_t n_heap;
} fuser;

/* ------------------------------------------------------------ what may join */

static int region_dtype_ok(const fuser* f, rlx_dtype t) {
  if (t == RLX_F64) return f->opt->allow_f64;
  return rlx_dtype_is_compute_float(t);
}

static int same_type(const rlx_type* a, const rlx_type* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* Node ni computes one float elementwise result the programs can express. */
static int fusible(const fuser* f, int32_t ni) {
  const rlx_node* n = &f->g->nodes[ni];
  const rlx_type* t = rlx_tensor_type(f->g, n->out[0]);
  if (!region_dtype_ok(f, t->dtype) || rlx_type_numel(t) < 0) return 0;
  int ok = 0;
  switch (n->op) {
    case RLX_OP_BINARY: ok = n->a.kind >= 0 && n->a.kind < RLX_BIN_COUNT; break;
    case RLX_OP_ACTIVATION: ok = n->a.kind > RLX_ACT_NONE && n->a.kind < RLX_ACT_COUNT; break;
    case RLX_OP_CAST: {
      rlx_dtype from = rlx_tensor_type(f->g, n->in[0])->dtype;
      ok = from != t->dtype && rlx_dtype_is_compute_float(from);
      break;
    }
    default: return 0;
  }
  if (f->opt->keep_out && f->opt->keep_out[ni]) return 0;
  return ok && (!f->opt->supports || f->opt->supports(f->g, ni));
}

/* A one-element Constant of dtype t: read as an immediate. */
static int is_immediate(const fuser* f, rlx_tensor v, rlx_dtype t) {
  const rlx_node* p = rlx_producer(f->g, v);
  const rlx_type* vt = rlx_tensor_type(f->g, v);
  return p->op == RLX_OP_CONSTANT && vt->dtype == t && rlx_type_numel(vt) == 1 && p->a.data;
}

/* ------------------------------------------------------------ the frontier */

static void heap_push(fuser* f, int32_t ni) {
  if (f->n_heap == HEAP_CAP) return; /* cannot happen: members are bounded */
  int32_t i = f->n_heap++;
  while (i > 0 && f->heap[(i - 1) / 2] < ni) {
    f->heap[i] = f->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  f->heap[i] = ni;
}

static int32_t heap_pop(fuser* f) {
  int32_t top = f->heap[0], last = f->heap[--f->n_heap], i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= f->n_heap) break;
    if (c + 1 < f->n_heap && f->heap[c + 1] > f->heap[c]) c++;
    if (f->heap[c] <= last) break;
    f->heap[i] = f->heap[c];
    i = c;
  }
  if (f->n_heap > 0) f->heap[i] = last;
  return top;
}

/* ------------------------------------------------------------ growing */

static int index_of(const rlx_tensor* list, int32_t n, rlx_tensor v) {
  for (int32_t i = 0; i < n; i++)
    if (list[i] == v) return i;
  return -1;
}

/* Adds node ni's operands to r's inputs / immediates (its own output, if
 * r read it, stops being an input); 0 when a limit would be passed, r
 * unchanged then. */
static int take_operands(const fuser* f, region* r, int32_t ni, rlx_dtype t) {
  region next = *r;
  const rlx_node* n = &f->g->nodes[ni];
  int32_t at = index_of(next.ext, next.n_ext, n->out[0]);
  if (at >= 0) {
    memmove(&next.ext[at], &next.ext[at + 1], sizeof(rlx_tensor) * (size_t)(next.n_ext - at - 1));
    next.n_ext--;
  }
  for (int32_t k = 0; k < n->n_in; k++) {
    rlx_tensor u = n->in[k];
    if (n->op != RLX_OP_CAST && is_immediate(f, u, t)) {
      if (index_of(next.imm, next.n_imm, u) >= 0) continue;
      if (next.n_members + 1 + next.n_imm + 1 > RLX_REGION_MAX_INSTRS) return 0;
      next.imm[next.n_imm++] = u;
    } else if (index_of(next.ext, next.n_ext, u) < 0) {
      if (next.n_ext == RLX_REGION_MAX_INPUTS) return 0;
      next.ext[next.n_ext++] = u;
    }
  }
  if (next.n_members + 1 + next.n_imm > RLX_REGION_MAX_INSTRS) return 0;
  next.members[next.n_members++] = ni;
  *r = next;
  return 1;
}

/* Records ni's reads and queues the producers of its operands. */
static void note_member(fuser* f, int32_t root, int32_t ni) {
  const rlx_node* n = &f->g->nodes[ni];
  for (int32_t k = 0; k < n->n_in; k++) {
    f->used_in[n->in[k]]++;
    int32_t p = f->g->values[n->in[k]].node;
    if (p >= 0 && f->seen[p] != root) heap_push(f, p);
  }
}

/* Whether producer p may join r: fusible, the root's type, every reader in
 * the region, not a graph output, not taken. */
static int may_join(const fuser* f, const region* r, int32_t p) {
  if (f->owner[p] >= 0 || !fusible(f, p)) return 0;
  const rlx_graph* g = f->g;
  rlx_tensor v = g->nodes[p].out[0];
  if (!same_type(rlx_tensor_type(g, v), rlx_tensor_type(g, g->nodes[r->root].out[0]))) return 0;
  return f->is_output[v] == 0 && f->used_in[v] == f->readers[v];
}

static void build_program(const fuser* f, region* r, rlx_region_program* p);

/* Whether r's program fits the interpreter's register file. */
static int live_ok(const fuser* f, const region* r) {
  if (f->opt->max_live <= 0) return 1;
  region sorted = *r;
  rlx_region_program p;
  build_program(f, &sorted, &p);
  return rlx_region_max_live(&p) <= f->opt->max_live;
}

static void grow(fuser* f, region* r) {
  rlx_dtype t = rlx_tensor_type(f->g, f->g->nodes[r->root].out[0])->dtype;
  f->n_heap = 0;
  take_operands(f, r, r->root, t);
  f->seen[r->root] = r->root;
  note_member(f, r->root, r->root);
  while (f->n_heap > 0) {
    int32_t p = heap_pop(f);
    if (f->seen[p] == r->root) continue; /* queued twice */
    f->seen[p] = r->root;
    region before = *r;
    if (!may_join(f, r, p) || !take_operands(f, r, p, t)) continue;
    if (!live_ok(f, r)) { /* p's output stays an input */
      *r = before;
      continue;
    }
    note_member(f, r->root, p);
  }
}

/* Undoes the read counts of an attempt. */
static void forget_reads(fuser* f, const region* r) {
  for (int32_t m = 0; m < r->n_members; m++) {
    const rlx_node* n = &f->g->nodes[r->members[m]];
    for (int32_t k = 0; k < n->n_in; k++) f->used_in[n->in[k]] = 0;
  }
}

/* Immediate reads of a committed region, so unread Constants are dropped. */
static void count_immediate_reads(fuser* f, const region* r) {
  for (int32_t m = 0; m < r->n_members; m++) {
    const rlx_node* n = &f->g->nodes[r->members[m]];
    for (int32_t k = 0; k < n->n_in; k++)
      if (index_of(r->imm, r->n_imm, n->in[k]) >= 0) f->imm_reads[n->in[k]]++;
  }
}

/* ------------------------------------------------------------ emitting */

static int cmp_i32(const void* a, const void* b) {
  int32_t x = *(const int32_t*)a, y = *(const int32_t*)b;
  return (x > y) - (x < y);
}

/* Slot of value v in r's program (members sorted, immediates first). */
static uint8_t slot_of(const fuser* f, const region* r, rlx_tensor v) {
  int32_t i = index_of(r->ext, r->n_ext, v);
  if (i >= 0) return (uint8_t)i;
  i = index_of(r->imm, r->n_imm, v);
  if (i >= 0) return (uint8_t)(r->n_ext + i);
  for (int32_t m = 0; m < r->n_members; m++)
    if (f->g->nodes[r->members[m]].out[0] == v) return (uint8_t)(r->n_ext + r->n_imm + m);
  return 0; /* unreachable: every operand is one of the three */
}

static void build_program(const fuser* f, region* r, rlx_region_program* p) {
  memset(p, 0, sizeof *p);
  qsort(r->members, (size_t)r->n_members, sizeof r->members[0], cmp_i32);
  p->dtype = rlx_tensor_type(f->g, f->g->nodes[r->root].out[0])->dtype;
  p->n_inputs = r->n_ext;
  for (int32_t i = 0; i < r->n_imm; i++) {
    p->code[p->n_instrs] = (rlx_region_instr){RLX_RI_CONST, 0, 0, 0};
    const rlx_node* c = rlx_producer(f->g, r->imm[i]);
    p->imm[p->n_instrs++] = rlx_load_f64(c->a.data, (rlx_dtype)p->dtype, 0);
  }
  for (int32_t m = 0; m < r->n_members; m++) {
    const rlx_node* n = &f->g->nodes[r->members[m]];
    rlx_region_instr* in = &p->code[p->n_instrs++];
    in->a = slot_of(f, r, n->in[0]);
    if (n->op == RLX_OP_BINARY) {
      *in = (rlx_region_instr){RLX_RI_BINARY, (uint8_t)n->a.kind, in->a, slot_of(f, r, n->in[1])};
    } else if (n->op == RLX_OP_ACTIVATION) {
      *in = (rlx_region_instr){RLX_RI_UNARY, (uint8_t)n->a.kind, in->a, 0};
    } else {
      *in = (rlx_region_instr){RLX_RI_CAST, 0, in->a, 0};
    }
  }
}

static rlx_status emit_region(const fuser* f, region* r, rlx_graph* dst, rlx_tensor* map) {
  rlx_region_program p;
  build_program(f, r, &p);
  uint8_t bytes[RLX_REGION_HEADER + RLX_REGION_MAX_INSTRS * RLX_REGION_INSTR_BYTES];
  rlx_region_encode(&p, bytes);
  rlx_node_attrs a;
  memset(&a, 0, sizeof a);
  a.data = bytes;
  a.data_bytes = rlx_region_bytes(p.n_instrs);
  rlx_tensor in[RLX_REGION_MAX_INPUTS], y;
  for (int32_t i = 0; i < r->n_ext; i++) in[i] = map[r->ext[i]];
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(dst, RLX_OP_ELEMENTWISE_REGION, &a, in, r->n_ext, &y));
  const rlx_node* root = &f->g->nodes[r->root];
  map[root->out[0]] = y;
  if (root->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(dst, y, root->label));
  return RLX_OK;
}

/* A Constant every reader of which became an immediate. */
static int dropped_constant(const fuser* f, const rlx_node* n) {
  return n->op == RLX_OP_CONSTANT && f->imm_reads[n->out[0]] > 0 &&
         f->imm_reads[n->out[0]] == f->readers[n->out[0]];
}

static rlx_status emit_graph(const fuser* f, region* regions, const int32_t* region_at,
                             rlx_graph* dst, rlx_tensor* map) {
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(dst, f->g));
  for (int32_t i = 0; i < f->g->n_nodes; i++) {
    const rlx_node* n = &f->g->nodes[i];
    if (f->owner[i] == i) RLX_RETURN_IF_ERROR(emit_region(f, &regions[region_at[i]], dst, map));
    else if (f->owner[i] < 0 && !dropped_constant(f, n))
      RLX_RETURN_IF_ERROR(rlx_copy_node(dst, n, map));
  }
  return rlx_copy_outputs(f->g, dst, map);
}

/* ------------------------------------------------------------ the pass */

/* Grows a region from every node not yet taken, last node first; keeps
 * those of two or more ops. */
static rlx_status find_regions(fuser* f, region** out, int32_t* n_out, int32_t* region_at,
                               int32_t* fused) {
  const rlx_graph* g = f->g;
  int32_t n = 0, cap = 0;
  region* list = NULL;
  for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
    if (f->owner[i] >= 0 || !fusible(f, i)) continue;
    region r;
    memset(&r, 0, sizeof r);
    r.root = i;
    grow(f, &r);
    forget_reads(f, &r);
    /* one op gains nothing; no input at all is constants only (constant
     * folding's work: a hoisted params graph evaluates such chains) */
    if (r.n_members < 2 || r.n_ext == 0) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      region* grown = realloc(list, sizeof *list * (size_t)cap);
      if (!grown) { free(list); return RLX_RESOURCE_EXHAUSTED; }
      list = grown;
    }
    for (int32_t m = 0; m < r.n_members; m++) {
      f->owner[r.members[m]] = i;
      if (fused) fused[g->nodes[r.members[m]].op]++;
    }
    count_immediate_reads(f, &r);
    region_at[i] = n;
    list[n++] = r;
  }
  *out = list;
  *n_out = n;
  return RLX_OK;
}

static rlx_status fuser_init(fuser* f, const rlx_graph* g, const rlx_fuse_options* opt) {
  memset(f, 0, sizeof *f);
  f->g = g;
  f->opt = opt;
  size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1;
  f->readers = rlx_reader_counts(g);
  f->is_output = calloc(nv, sizeof(int32_t));
  f->used_in = calloc(nv, sizeof(int32_t));
  f->imm_reads = calloc(nv, sizeof(int32_t));
  f->owner = malloc(nn * sizeof(int32_t));
  f->seen = malloc(nn * sizeof(int32_t));
  if (!f->readers || !f->is_output || !f->used_in || !f->imm_reads || !f->owner || !f->seen)
    return RLX_RESOURCE_EXHAUSTED;
  for (int32_t i = 0; i < g->n_outputs; i++) f->is_output[g->outputs[i]]++;
  for (size_t i = 0; i < nn; i++) f->owner[i] = f->seen[i] = -1;
  return RLX_OK;
}

static void fuser_free(fuser* f) {
  free(f->readers);
  free(f->is_output);
  free(f->used_in);
  free(f->imm_reads);
  free(f->owner);
  free(f->seen);
}

rlx_status rlx_fuse_elementwise(rlx_graph* g, const rlx_fuse_options* opt, rlx_graph** out,
                                int32_t* out_fused, int32_t* out_regions) {
  if (!g || !opt || !out) return RLX_INVALID_ARGUMENT;
  *out = NULL;
  fuser f;
  region* regions = NULL;
  int32_t n_regions = 0;
  int32_t* region_at = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1));
  rlx_tensor* map = malloc(sizeof(rlx_tensor) * ((size_t)g->n_values + 1));
  rlx_status s = fuser_init(&f, g, opt);
  if (s == RLX_OK && (!region_at || !map)) s = RLX_RESOURCE_EXHAUSTED;
  if (s == RLX_OK) s = find_regions(&f, &regions, &n_regions, region_at, out_fused);
  if (s == RLX_OK) s = rlx_graph_create(out);
  if (s == RLX_OK) s = emit_graph(&f, regions, region_at, *out, map);
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "elementwise fusion: %s",
             *out && (*out)->err.msg[0] ? (*out)->err.msg : "out of host memory");
    rlx_graph_destroy(*out);
    *out = NULL;
  } else if (out_regions) {
    *out_regions = n_regions;
  }
  fuser_free(&f);
  free(regions);
  free(region_at);
  free(map);
  return s;
}
