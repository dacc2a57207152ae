/* The executable: compile pipeline, bindings of symbolic dims, params, inputs,
 * feeds, active extent, outputs, and the dispatch report.
 *
 * One executable holds the user's graph (symbolic) and a cache of variants,
 * one per binding of its symbols. A variant is the graph specialised to
 * static sizes, decomposed for the backend, planned and lowered (the
 * compiled part: immutable, shared with clones and through the compile
 * cache, see compile_cache.h), plus this executable's own backend exec and
 * arena. Params and inputs are kept on the host as the user set them, so a
 * new variant can be filled without asking the user again. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "ir/dtype.h"
#include "passes/bn_fold.h"
#include "passes/precision.h"
#include "passes/decompose.h"
#include "passes/layout.h"
#include "passes/hoist.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_residual_norm.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "runtime/compile_cache.h"
#include "runtime/executable.h"
#include "runtime/trace.h"
#include "runtime/value_inputs.h"

#define MAX_VARIANTS 16

enum { ORIGIN_BUILT, ORIGIN_CACHE, ORIGIN_CLONE };
static const char* const origin_text[] = {"compiled by this executable", "reused from the compile cache",
                                          "shared with the executable this one was cloned from"};

/* One binding's compiled part (shared with clones and the compile cache,
 * never changed) and what this executable keeps for it. */
typedef struct variant {
  rlx_compiled* c;
  rlx_backend_exec* be;  /* own arena; NULL until first needed (a clone's other bindings) */
  uint64_t params_version; /* params uploaded up to this version */
  int origin;            /* where c came from: ORIGIN_* (the dispatch report says) */
  /* active extent: steps lowered at extent_n with the same plan */
  int64_t extent_n;
  rlx_step_list extent_steps;
  rlx_exec* hoist_exec;  /* CPU executable of c->derived; NULL until first needed */
  uint64_t hoist_version; /* hoisted values in the arena are from params up to this version
                             (kept over a switch of variant, like params_version) */
} variant;

/* A param's host bytes, shared by an executable and its clones until one
 * of them sets the param again (copy on write): a clone copies no bytes. */
typedef struct param_bytes {
  atomic_int refs;
  void* data;
} param_bytes;

/* A named host-side buffer: a param's value or an input's last data. */
typedef struct host_slot {
  char* name;
  rlx_type type;       /* declared (may be symbolic for inputs) */
  void* data;          /* params: shared->data (NULL until first set) */
  param_bytes* shared; /* params only */
  size_t bytes;
  int64_t shape[RLX_MAX_RANK]; /* shape given with the data (inputs) */
  int set;             /* the user has given a value (params: ever; inputs: host copy valid) */
  int dirty;           /* inputs: host copy newer than the device copy */
  uint64_t version;    /* params: bumped on every set */
  int fed;             /* inputs: the device copy was written by a feed */
  int32_t state;       /* inputs: 1 + the output fed back as device state (0: none) */
} host_slot;

typedef struct feed {
  int32_t input;  /* index into inputs */
  int32_t output; /* graph output index */
  int64_t row;    /* -1: whole output */
} feed;

struct rlx_exec {
  rlx_graph* src;
  const rlx_backend* backend;
  rlx_compile_options opt;
  char* symbol_storage; /* owned copies of option symbol names (unused beyond compile) */
  int64_t* bound;       /* per symbol: size from options, or -1 */
  int32_t extent_symbol; /* -1 if none */
  int64_t extent;        /* active extent (<= bound) */
  rlx_error err;
  char* graph_text;      /* canonical text of src, for compile cache keys (made on first use) */
  int uncacheable;       /* src is not keyed: too large to cache, or it did not print */
  variant* variants[MAX_VARIANTS];
  int32_t n_variants;
  variant* cur;
  host_slot* params;
  int32_t n_params;
  host_slot* inputs;
  int32_t n_inputs;
  uint64_t params_version;
  feed* feeds;
  int32_t n_feeds;
  uint8_t* selected; /* per output */
  uint64_t seed;
  int ran;
  int attempted;     /* rlx_exec_run was called */
  int outputs_valid; /* the last run succeeded: outputs hold its results */
  rlx_vi* vi;        /* the source has Deferred outputs: runs go to builds per input value */
  int quiet;         /* an executable of hoisted params: never prints a dispatch report */
  /* RLX_TRACE / rlx_exec_set_trace: where runs add their steps (NULL: off);
   * the process row is made at the first traced run (0: not yet). */
  rlx_trace_file* trace;
  int32_t trace_pid;
  int64_t trace_runs;
};

/* ------------------------------------------------------------ helpers */

void rlx_compile_options_init(rlx_compile_options* o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->use_blas = -1;
}

static char* dup_str(const char* s) {
  size_t n = strlen(s) + 1;
  char* d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static int find_slot(const host_slot* slots, int32_t n, const char* name) {
  for (int32_t i = 0; i < n; i++)
    if (strcmp(slots[i].name, name) == 0) return i;
  return -1;
}

static void param_bytes_unref(param_bytes* b) {
  if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  free(b->data);
  free(b);
}

/* Gives param p bytes of its own, shared with no clone, before they are
 * written (the values are about to be replaced as a whole). */
static rlx_status param_own(rlx_exec* e, host_slot* p) {
  if (p->shared && atomic_load_explicit(&p->shared->refs, memory_order_acquire) == 1) return RLX_OK;
  param_bytes* b = calloc(1, sizeof *b);
  if (b) b->data = malloc(p->bytes ? p->bytes : 1);
  if (!b || !b->data) {
    free(b);
    return rlx_fail(&e->err, RLX_RESOURCE_EXHAUSTED, "param '%s': no host memory for %zu bytes",
                    p->name, p->bytes);
  }
  atomic_init(&b->refs, 1);
  param_bytes_unref(p->shared);
  p->shared = b;
  p->data = b->data;
  return RLX_OK;
}

/* NOT_FOUND for an unknown input/param name, listing the valid ones (the
 * first few, then how many more), so a typo is fixed from the message. */
static rlx_status fail_unknown_name(rlx_exec* e, const char* what, const char* name,
                                    const host_slot* slots, int32_t n) {
  char list[512] = "";
  size_t len = 0;
  int32_t shown = 0;
  for (; shown < n && len + strlen(slots[shown].name) + 8 < sizeof list; shown++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", shown ? ", " : "",
                            slots[shown].name);
  if (shown < n) snprintf(list + len, sizeof list - len, ", ... %d more", (int)(n - shown));
  if (n == 0) return rlx_fail(&e->err, RLX_NOT_FOUND, "no %s named '%s' (the graph has no %ss)",
                              what, name, what);
  return rlx_fail(&e->err, RLX_NOT_FOUND, "no %s named '%s' (%ss: %s)", what, name, what, list);
}

/* Value of the leaf named `name` of op `op` in graph g, or -1. */
static rlx_tensor find_leaf(const rlx_graph* g, rlx_op op, const char* name) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (n->op == op && n->a.name && strcmp(n->a.name, name) == 0) return n->out[0];
  }
  return -1;
}

static int64_t static_bytes(const rlx_type* t) { return rlx_type_bytes(t); }

/* ------------------------------------------------------------ compiled parts */

static int always_supported(const rlx_graph* g, int32_t ni) { return 1; }

static rlx_supports_fn backend_supports(const rlx_exec* e) {
  return e->backend->supports ? e->backend->supports : always_supported;
}

static int has_op(const rlx_graph* g, rlx_op op) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == op) return 1;
  return 0;
}

/* One graph-to-graph pass over *g: the result replaces *g, which is
 * destroyed unless it is `keep` (the caller's graph). Failures are reported
 * on `report`. */
typedef rlx_status (*graph_pass)(rlx_graph* g, rlx_graph** out, int32_t* count);
static rlx_status apply_pass(graph_pass pass, rlx_graph** g, const rlx_graph* keep,
                             rlx_graph* report) {
  rlx_graph* next = NULL;
  rlx_status s = pass(*g, &next, NULL);
  if (s != RLX_OK) {
    if (*g != report) report->err = (*g)->err;
    return s;
  }
  if (*g != keep) rlx_graph_destroy(*g);
  *g = next;
  return RLX_OK;
}

/* Adds to fused[op] (may be NULL) the nodes of each op that a fusion pass
 * took from `before` into fused forms (the fused ops themselves only grow):
 * the dispatch report's "fused" column. */
static void count_absorbed(const rlx_graph* before, const rlx_graph* after, int32_t* fused) {
  if (!fused) return;
  int32_t diff[RLX_OP_COUNT] = {0};
  for (int32_t i = 0; i < before->n_nodes; i++) diff[before->nodes[i].op]++;
  for (int32_t i = 0; i < after->n_nodes; i++) diff[after->nodes[i].op]--;
  for (int32_t op = 0; op < RLX_OP_COUNT; op++)
    if (diff[op] > 0) fused[op] += diff[op];
}

/* Conv / matmul epilogues fused (bn_fold.h); like apply_pass, *g is
 * replaced. */
static rlx_status apply_epilogues(int kinds, rlx_graph** g, rlx_graph* spec, int32_t* fused) {
  rlx_graph* next = NULL;
  rlx_status s = rlx_fuse_epilogues(*g, kinds, &next, NULL);
  if (s != RLX_OK) {
    if (*g != spec) spec->err = (*g)->err;
    return s;
  }
  count_absorbed(*g, next, fused);
  if (*g != spec) rlx_graph_destroy(*g);
  *g = next;
  return RLX_OK;
}

/* Residual Add + LayerNorm / RmsNorm fused (fuse_residual_norm.h); like
 * apply_pass, *g is replaced. */
static rlx_status apply_residual_norms(rlx_graph** g, rlx_graph* spec, int32_t* fused) {
  int32_t n = 0;
  rlx_graph* next = NULL;
  rlx_status s = rlx_fuse_residual_norms(*g, &next, &n);
  if (s != RLX_OK) {
    if (*g != spec) spec->err = (*g)->err;
    return s;
  }
  count_absorbed(*g, next, fused);
  if (*g != spec) rlx_graph_destroy(*g);
  *g = next;
  return RLX_OK;
}

/* The graph computed in the reduced dtype the options ask for
 * (precision.h); like apply_pass, *g is replaced. */
static rlx_status apply_precision(const rlx_exec* e, rlx_graph** g, rlx_graph* spec) {
  rlx_dtype low = e->opt.precision == RLX_PRECISION_F16 ? RLX_F16 : RLX_BF16;
  rlx_graph* next = NULL;
  rlx_status s = rlx_lower_precision(*g, low, &next, NULL);
  if (s != RLX_OK) {
    if (*g != spec) spec->err = (*g)->err;
    return s;
  }
  if (*g != spec) rlx_graph_destroy(*g);
  *g = next;
  return RLX_OK;
}

/* BatchNorms folded into their Convs, Conv / MatMul epilogues (residual
 * or bias Add, activation) fused (bn_fold.h), residual Adds fused into the
 * norms after them (fuse_residual_norm.h), the precision lowering
 * (precision.h), then the backend's decomposition; counts (decomposed) and
 * fused (absorbed nodes) per op may be NULL; failures are reported on spec. */
static rlx_status fold_and_decompose(const rlx_exec* e, rlx_graph* spec, rlx_graph** out,
                                     int32_t* counts, int32_t* fused) {
  rlx_graph* g = spec;
  rlx_status s = RLX_OK;
  if (has_op(spec, RLX_OP_BATCH_NORM)) s = apply_pass(rlx_fold_batch_norm, &g, spec, spec);
  int convs = has_op(g, RLX_OP_CONV) || has_op(g, RLX_OP_CONV_TRANSPOSE);
  int kinds = (convs && !rlx_env_flag(RLX_ENV_NO_CONV_FUSION) ? RLX_EPILOGUE_CONV : 0) |
              (has_op(g, RLX_OP_MATMUL) && !rlx_env_flag(RLX_ENV_NO_MATMUL_FUSION)
                   ? RLX_EPILOGUE_MATMUL : 0);
  if (s == RLX_OK && kinds) s = apply_epilogues(kinds, &g, spec, fused);
  if (s == RLX_OK && (has_op(g, RLX_OP_LAYER_NORM) || has_op(g, RLX_OP_RMS_NORM)) &&
      !rlx_env_flag(RLX_ENV_NO_NORM_FUSION))
    s = apply_residual_norms(&g, spec, fused);
  if (s == RLX_OK && convs && e->opt.channels_last)
    s = apply_pass(rlx_layout_channels_last, &g, spec, spec);
  if (s == RLX_OK && e->opt.precision != RLX_PRECISION_DEFAULT)
    s = apply_precision(e, &g, spec);
  if (s == RLX_OK) {
    s = rlx_decompose(g, backend_supports(e), out, counts);
    if (s && g != spec) spec->err = g->err;
  }
  if (g != spec) rlx_graph_destroy(g);
  return s;
}

/* The memory plan, with the device-state pairs (input, output) of e mapped
 * onto the values of g, so the planner may keep each output in its input. */
static rlx_status plan_with_states(rlx_exec* e, rlx_graph* g, const rlx_plan_options* po,
                                   rlx_plan* plan) {
  int32_t* pairs = malloc(sizeof(int32_t) * 2 * (size_t)(e->n_inputs + 1));
  if (!pairs) return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  int32_t n = 0;
  for (int32_t i = 0; i < e->n_inputs; i++) {
    if (!e->inputs[i].state) continue;
    rlx_tensor x = find_leaf(g, RLX_OP_INPUT, e->inputs[i].name);
    if (x < 0) continue;
    pairs[2 * n] = x;
    pairs[2 * n + 1] = g->outputs[e->inputs[i].state - 1];
    n++;
  }
  rlx_status s = rlx_plan_memory_states(g, po, pairs, n, plan);
  free(pairs);
  return s;
}

/* Marks the nodes of c->g the backend cannot run (host fallback, or an
 * error in strict mode) and counts where every op runs. */
static rlx_status mark_host_nodes(rlx_exec* e, rlx_compiled* c) {
  rlx_supports_fn sup = backend_supports(e);
  c->host_node = calloc((size_t)c->g->n_nodes + 1, 1);
  RLX_CHECK_ALLOC(&e->err, c->host_node);
  for (int32_t i = 0; i < c->g->n_nodes; i++) {
    const rlx_node* n = &c->g->nodes[i];
    if (rlx_op_table[n->op].flags & (OPF_LEAF | OPF_VIEW)) continue;
    if (sup(c->g, i)) {
      c->counts.native[n->op]++;
      continue;
    }
    if (e->opt.strict) {
      char nb[160];
      return rlx_fail(&e->err, RLX_UNIMPLEMENTED, "%s: no native kernel on %s (strict mode)",
                      rlx_node_str(c->g, i, nb, sizeof nb), e->backend->name);
    }
    c->host_node[i] = 1;
    c->counts.host[n->op]++;
  }
  return RLX_OK;
}

static int any_set(const uint8_t* flags, int32_t n) {
  for (int32_t i = 0; i < n; i++)
    if (flags[i]) return 1;
  return 0;
}

/* Param-only work leaves the run (passes/hoist.h): c->g becomes the run
 * graph, and the derived graph is kept for upload_params to evaluate. */
static rlx_status hoist_params(rlx_exec* e, rlx_compiled* c) {
  c->hoist_off = rlx_env_flag(RLX_ENV_NO_HOIST);
  if (c->hoist_off) return RLX_OK;
  uint8_t* mask = NULL;
  rlx_status s = rlx_hoist_select(c->g, &mask);
  if (s == RLX_OK && any_set(mask, c->g->n_nodes)) {
    rlx_graph* run = NULL;
    s = rlx_hoist_apply(c->g, mask, &run, &c->derived, &c->hoisted_leaf, &c->hoist);
    if (s == RLX_OK) {
      c->hoist_mask_nodes = c->g->n_nodes;
      c->hoist_mask = mask;
      mask = NULL;
      rlx_graph_destroy(c->g);
      c->g = run;
    }
  }
  if (s) e->err = c->g->err;
  free(mask);
  return s;
}

/* Chains of elementwise ops become ElementwiseRegions where that is faster
 * (fuse_elementwise.h): on the CPU, and on CUDA when its regions run as
 * generated code (NVRTC, backends/cuda/cuda_nvrtc.h). CUDA's interpreter
 * kernel (region.cu) is slower than the unfused kernels (on the H200 it ran
 * GPT-2's fused GELU derivative, [4096, 3072], 27 ops, in 975 us against
 * ~580 us unfused): without libnvrtc CUDA does not fuse;
 * RLX_CUDA_NO_NVRTC=1 fuses for the interpreter (A/B), its 16-register file
 * bounding the programs. Vulkan and WebGPU have no region kernel yet. */
static rlx_status fuse_elementwise(rlx_exec* e, rlx_compiled* c) {
  const char* name = e->backend->name;
  int cpu = strcmp(name, "cpu") == 0, cuda = strcmp(name, "cuda") == 0;
  int interpreter = cuda && rlx_env_flag(RLX_ENV_CUDA_NO_NVRTC);
  int generated = cuda && !interpreter && rlx_nvrtc_available(NULL, 0);
  if (rlx_env_flag(RLX_ENV_NO_FUSION) || !(cpu || generated || interpreter)) return RLX_OK;
  if (e->opt.debug_nans) return RLX_OK; /* names the very node that made a NaN */
  /* What hoisting will move out of the run stays out of regions. */
  uint8_t* hoisted = NULL;
  rlx_status s = rlx_env_flag(RLX_ENV_NO_HOIST) ? RLX_OK : rlx_hoist_select(c->g, &hoisted);
  if (s) {
    e->err = c->g->err;
    return s;
  }
  /* CUDA's interpreter holds 16 values in registers (kernels/params.h) */
  rlx_fuse_options fo = {cpu, backend_supports(e), hoisted, interpreter ? 16 : 0};
  rlx_graph* fused = NULL;
  s = rlx_fuse_elementwise(c->g, &fo, &fused, c->counts.fused, NULL);
  free(hoisted);
  if (s) {
    e->err = c->g->err;
    return s;
  }
  rlx_graph_destroy(c->g);
  c->g = fused;
  return RLX_OK;
}

/* Specialise -> fold BatchNorms -> decompose -> fuse -> hoist -> plan -> lower:
 * everything but the backend. */
static rlx_status compiled_build(rlx_exec* e, const int64_t* sizes, rlx_compiled** out) {
  rlx_graph* src = e->src;
  rlx_compiled* c = rlx_compiled_new();
  RLX_CHECK_ALLOC(&e->err, c);
  rlx_graph* spec = NULL;
  rlx_status s = RLX_OK;
  c->n_sizes = src->n_symbols;
  c->sizes = malloc(sizeof(int64_t) * (size_t)(src->n_symbols + 1));
  if (!c->sizes) { s = rlx_fail(&e->err, RLX_RESOURCE_EXHAUSTED, "out of host memory"); goto done; }
  memcpy(c->sizes, sizes, sizeof(int64_t) * (size_t)src->n_symbols);
  s = src->n_symbols > 0 ? rlx_graph_specialize(src, sizes, &spec) : rlx_graph_clone(src, &spec);
  if (s) { e->err = src->err; goto done; }
  s = fold_and_decompose(e, spec, &c->g, c->counts.decomposed, c->counts.fused);
  if (s) { e->err = spec->err; goto done; }
  s = fuse_elementwise(e, c);
  if (s) goto done;
  s = hoist_params(e, c);
  if (s) goto done;
  s = mark_host_nodes(e, c);
  if (s) goto done;
  rlx_plan_options po = {e->backend->alignment ? e->backend->alignment : 64, 1,
                         e->backend->arena_chunk ? e->backend->arena_chunk() : 0};
  s = plan_with_states(e, c->g, &po, &c->plan);
  if (s) { e->err = c->g->err; goto done; }
  s = rlx_lower(c->g, &c->plan, c->host_node, &c->steps, &e->err);
done:
  rlx_graph_destroy(spec);
  if (s) rlx_compiled_unref(c);
  else *out = c;
  return s;
}

/* The compile cache's key for e's source graph at `sizes`: everything
 * compiled_build reads besides the graph's canonical text (which covers its
 * structure, types, attributes, names and constant bytes): the device,
 * strict mode, the precision, channels_last, debug_nans (no fusion), the state pairs and the
 * environment switches (some change what a backend supports). Options that only reach the
 * backend's create (threads, use_blas, allow_tf32, reference) are not in it:
 * every executable creates its own backend exec from its own options. */
static int compiled_key(rlx_exec* e, const int64_t* sizes, rlx_compile_key* k) {
  if (!e->graph_text && !e->uncacheable) {
    /* Constants print as hex, two characters a byte: a graph whose key alone
     * would not fit in the cache is not printed at all. */
    uint64_t constants = 0;
    for (int32_t i = 0; i < e->src->n_nodes; i++) constants += e->src->nodes[i].a.data_bytes;
    e->uncacheable = 2 * constants > rlx_env_size(RLX_ENV_COMPILE_CACHE_BYTES) ||
                     rlx_graph_print(e->src, &e->graph_text) != RLX_OK;
    if (e->uncacheable) { free(e->graph_text); e->graph_text = NULL; } /* compiled as always */
  }
  if (!e->graph_text) return 0;
  memset(k, 0, sizeof *k);
  rlx_compile_key_add_str(k, "rlx compile key 1");
  rlx_compile_key_add_str(k, e->backend->name);
  rlx_compile_key_add_i64(k, e->opt.strict != 0);
  rlx_compile_key_add_i64(k, e->opt.precision);
  rlx_compile_key_add_i64(k, e->opt.channels_last != 0); /* changes the compiled graph */
  rlx_compile_key_add_i64(k, e->opt.debug_nans != 0);    /* so does it: no fusion then */
  rlx_compile_key_add_i64(k, e->src->n_symbols);
  for (int32_t i = 0; i < e->src->n_symbols; i++) rlx_compile_key_add_i64(k, sizes[i]);
  for (int32_t i = 0; i < e->n_inputs; i++) {
    if (!e->inputs[i].state) continue;
    rlx_compile_key_add_str(k, e->inputs[i].name);
    rlx_compile_key_add_i64(k, e->inputs[i].state);
  }
  rlx_compile_key_add_env(k);
  rlx_compile_key_add_str(k, e->graph_text);
  rlx_compile_key_finish(k);
  if (!k->buf.oom) return 1;
  rlx_compile_key_free(k);
  return 0;
}

/* The compiled part for `sizes`: from the compile cache when it holds one,
 * else built (and offered to the cache). */
static rlx_status compiled_get(rlx_exec* e, const int64_t* sizes, rlx_compiled** out,
                               int* from_cache) {
  rlx_compile_key key;
  int keyed = rlx_compile_cache_enabled() && compiled_key(e, sizes, &key);
  *from_cache = 0;
  if (keyed && (*out = rlx_compile_cache_find(&key)) != NULL) {
    *from_cache = 1;
    rlx_compile_key_free(&key);
    return RLX_OK;
  }
  rlx_status s = compiled_build(e, sizes, out);
  if (s == RLX_OK && keyed) *out = rlx_compile_cache_insert(&key, *out);
  if (keyed) rlx_compile_key_free(&key);
  return s;
}

/* ------------------------------------------------------------ variants */

static void variant_free(const rlx_backend* b, variant* v) {
  if (!v) return;
  if (v->be) b->destroy(v->be);
  rlx_exec_destroy(v->hoist_exec);
  rlx_step_list_free(&v->extent_steps);
  rlx_compiled_unref(v->c);
  free(v);
}

/* A variant of compiled part c (the variant takes its own reference); its
 * backend exec is made by variant_ready. */
static rlx_status variant_new(rlx_exec* e, rlx_compiled* c, variant** out) {
  variant* v = calloc(1, sizeof *v);
  RLX_CHECK_ALLOC(&e->err, v);
  v->c = rlx_compiled_ref(c);
  v->extent_n = -1;
  *out = v;
  return RLX_OK;
}

/* Creates v's backend exec (its own arena) if it has none, with the
 * constants in place from the start. */
static rlx_status variant_ready(rlx_exec* e, variant* v) {
  if (v->be) return RLX_OK;
  const rlx_compiled* c = v->c;
  rlx_backend_exec* be = NULL;
  RLX_RETURN_IF_ERROR(e->backend->create(&c->steps, c->plan.arena_bytes, &e->opt, &e->err, &be));
  for (int32_t i = 0; i < c->g->n_nodes; i++) {
    const rlx_node* n = &c->g->nodes[i];
    if (n->op != RLX_OP_CONSTANT || n->a.data_bytes == 0) continue;
    rlx_status s = e->backend->upload(be, c->plan.offset[n->out[0]], n->a.data, n->a.data_bytes, &e->err);
    if (s) {
      e->backend->destroy(be);
      return s;
    }
  }
  v->be = be;
  v->params_version = 0; /* a fresh arena holds no params yet */
  v->hoist_version = 0;
  return RLX_OK;
}

/* Adds v to e's variants, evicting the oldest that is not current. */
static void variant_add(rlx_exec* e, variant* v) {
  if (e->n_variants == MAX_VARIANTS) {
    int victim = e->variants[0] == e->cur ? 1 : 0;
    variant_free(e->backend, e->variants[victim]);
    memmove(&e->variants[victim], &e->variants[victim + 1],
            sizeof(variant*) * (size_t)(MAX_VARIANTS - victim - 1));
    e->n_variants--;
  }
  e->variants[e->n_variants++] = v;
}

/* The variant for `sizes`, ready to run; compiled (or taken from the
 * compile cache) if new. */
static rlx_status variant_get(rlx_exec* e, const int64_t* sizes, variant** out) {
  size_t n = sizeof(int64_t) * (size_t)e->src->n_symbols;
  for (int32_t i = 0; i < e->n_variants; i++) {
    if (n == 0 || memcmp(e->variants[i]->c->sizes, sizes, n) == 0) {
      RLX_RETURN_IF_ERROR(variant_ready(e, e->variants[i]));
      *out = e->variants[i];
      return RLX_OK;
    }
  }
  rlx_compiled* c = NULL;
  int from_cache = 0;
  RLX_RETURN_IF_ERROR(compiled_get(e, sizes, &c, &from_cache));
  variant* v = NULL;
  rlx_status s = variant_new(e, c, &v);
  rlx_compiled_unref(c); /* the variant holds it now */
  if (s) return s;
  v->origin = from_cache ? ORIGIN_CACHE : ORIGIN_BUILT;
  s = variant_ready(e, v);
  if (s) {
    variant_free(e->backend, v);
    return s;
  }
  variant_add(e, v);
  *out = v;
  return RLX_OK;
}

/* ------------------------------------------------------------ compile */

static rlx_status collect_leaves(rlx_exec* e) {
  const rlx_graph* g = e->src;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (n->op != RLX_OP_INPUT && n->op != RLX_OP_PARAM) continue;
    host_slot** slots = n->op == RLX_OP_PARAM ? &e->params : &e->inputs;
    int32_t* count = n->op == RLX_OP_PARAM ? &e->n_params : &e->n_inputs;
    host_slot* grown = realloc(*slots, sizeof(host_slot) * (size_t)(*count + 1));
    RLX_CHECK_ALLOC(&e->err, grown);
    *slots = grown;
    host_slot* s = &grown[(*count)++];
    memset(s, 0, sizeof *s);
    s->name = dup_str(n->a.name);
    RLX_CHECK_ALLOC(&e->err, s->name);
    s->type = g->values[n->out[0]].type;
    if (n->op == RLX_OP_PARAM) {
      int64_t b = static_bytes(&s->type);
      if (b < 0)
        return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "param '%s' has a symbolic shape", s->name);
      s->bytes = (size_t)b; /* the bytes are allocated when first set */
    }
  }
  return RLX_OK;
}

static rlx_status bind_options(rlx_exec* e, const rlx_compile_options* o) {
  rlx_graph* g = e->src;
  e->bound = malloc(sizeof(int64_t) * (size_t)(g->n_symbols + 1));
  RLX_CHECK_ALLOC(&e->err, e->bound);
  for (int32_t i = 0; i < g->n_symbols; i++) e->bound[i] = -1;
  e->extent_symbol = -1;
  if (o->n_symbols < 0 || (o->n_symbols > 0 && (!o->symbol_names || !o->symbol_sizes)))
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT,
                    "compile options: n_symbols is %d but symbol_names/symbol_sizes are %s",
                    (int)o->n_symbols, o->n_symbols < 0 ? "ignored" : "NULL");
  for (int32_t i = 0; i < o->n_symbols; i++) {
    if (!o->symbol_names[i])
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "compile options: symbol_names[%d] is NULL", (int)i);
    int found = 0;
    for (int32_t k = 0; k < g->n_symbols; k++) {
      if (strcmp(g->symbols[k], o->symbol_names[i]) != 0) continue;
      if (o->symbol_sizes[i] < 0)
        return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "symbol '%s' bound to %lld",
                        g->symbols[k], (long long)o->symbol_sizes[i]);
      e->bound[k] = o->symbol_sizes[i];
      found = 1;
    }
    if (!found)
      return rlx_fail(&e->err, RLX_NOT_FOUND, "compile option binds unknown symbol '%s'",
                      o->symbol_names[i]);
  }
  if (o->extent_symbol) {
    for (int32_t k = 0; k < g->n_symbols; k++)
      if (strcmp(g->symbols[k], o->extent_symbol) == 0) e->extent_symbol = k;
    if (e->extent_symbol < 0 || e->bound[e->extent_symbol] < 0)
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT,
                      "extent symbol '%s' must be a symbol of the graph bound in the options",
                      o->extent_symbol);
    rlx_dim code = -(rlx_dim)e->extent_symbol - 1;
    for (int32_t v = 0; v < g->n_values; v++) {
      const rlx_type* t = &g->values[v].type;
      for (int32_t d = 1; d < t->rank; d++)
        if (t->shape[d] == code)
          return rlx_fail(&e->err, RLX_INVALID_ARGUMENT,
                          "extent symbol '%s' appears as dim %d of %%%d; it may only be dim 0",
                          o->extent_symbol, d, v);
    }
    e->extent = e->bound[e->extent_symbol];
  }
  return RLX_OK;
}

static rlx_status add_feed(rlx_exec* e, int32_t input, int32_t output, int64_t row);

/* Device state pairs of the options: each becomes a fixed whole-output feed
 * that the planner may turn into an in-place update. */
static rlx_status bind_states(rlx_exec* e, const rlx_compile_options* o) {
  if (o->n_states < 0 || (o->n_states > 0 && (!o->state_inputs || !o->state_outputs)))
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "n_states %d without state arrays", o->n_states);
  for (int32_t k = 0; k < o->n_states; k++) {
    const char* name = o->state_inputs[k];
    int i = name ? find_slot(e->inputs, e->n_inputs, name) : -1;
    if (!name) return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "state_inputs[%d] is NULL", k);
    if (i < 0) return fail_unknown_name(e, "input", name, e->inputs, e->n_inputs);
    int32_t out = o->state_outputs[k];
    if (out < 0 || out >= e->src->n_outputs)
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "state '%s': output index %d out of range [0, %d)",
                      name, out, e->src->n_outputs);
    const rlx_type* ot = rlx_tensor_type(e->src, e->src->outputs[out]);
    if (ot->dtype != e->inputs[i].type.dtype)
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "state '%s' is %s, output %d is %s", name,
                      rlx_dtype_name(e->inputs[i].type.dtype), out, rlx_dtype_name(ot->dtype));
    if (e->inputs[i].state)
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "state '%s' declared twice", name);
    RLX_RETURN_IF_ERROR(add_feed(e, i, out, -1));
    e->inputs[i].state = out + 1;
  }
  return RLX_OK;
}

static int symbol_needed(const rlx_graph* g, int32_t sym);

/* The compile options' binding in sizes (a symbol no tensor that matters
 * has gets 1, as at run time); 1 if that binds every needed symbol. */
static int options_bind_all(const rlx_exec* e, int64_t* sizes) {
  for (int32_t i = 0; i < e->src->n_symbols; i++) {
    sizes[i] = e->bound[i];
    if (sizes[i] >= 0 || rlx_dim_is_expr(e->src, -(rlx_dim)i - 1)) continue; /* computed */
    if (symbol_needed(e->src, i)) return 0;
    sizes[i] = 1;
  }
  /* Expressions as at run time, so the variant's key matches a run's; a bad
   * one (T-1 at T = 0) is left for the run to report. */
  rlx_error err;
  return rlx_graph_eval_dims(e->src, sizes, &err) == RLX_OK;
}

void rlx_exec_destroy(rlx_exec* e) {
  if (!e) return;
  for (int32_t i = 0; i < e->n_variants; i++) variant_free(e->backend, e->variants[i]);
  for (int32_t i = 0; i < e->n_params; i++) {
    free(e->params[i].name);
    param_bytes_unref(e->params[i].shared);
  }
  for (int32_t i = 0; i < e->n_inputs; i++) { free(e->inputs[i].name); free(e->inputs[i].data); }
  free(e->params);
  free(e->inputs);
  free(e->feeds);
  free(e->selected);
  free(e->bound);
  free(e->graph_text);
  rlx_graph_destroy(e->src);
  rlx_vi_destroy(e->vi);
  rlx_trace_release(e->trace);
  free(e);
}

rlx_status rlx_compile(rlx_graph* g, const char* device, const rlx_compile_options* options,
                       rlx_exec** out_exec) {
  if (!g || !out_exec) return RLX_INVALID_ARGUMENT;
  *out_exec = NULL;
  const char* resolved = NULL;
  rlx_status s = rlx_device_resolve(device ? device : "best", &resolved);
  if (s == RLX_NOT_FOUND)
    return rlx_fail(&g->err, s, "unknown device '%s' (devices: cpu, cuda, vulkan, webgpu, best)",
                    device);
  if (s != RLX_OK)
    return rlx_fail(&g->err, s, "device '%s' is %s", resolved, rlx_device_detail(resolved));
  if (g->n_outputs == 0) return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "graph has no outputs");
  if (options && (options->precision < RLX_PRECISION_DEFAULT || options->precision > RLX_PRECISION_F16))
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                    "precision %d is not an rlx_precision (0 default, 1 bf16, 2 f16)",
                    (int)options->precision);

  rlx_exec* e = calloc(1, sizeof *e);
  RLX_CHECK_ALLOC(&g->err, e);
  e->backend = rlx_backend_find(resolved);
  if (options) e->opt = *options; else rlx_compile_options_init(&e->opt);
  e->opt.symbol_names = NULL; /* not kept: the caller owns them */
  e->opt.symbol_sizes = NULL;
  e->opt.extent_symbol = NULL;
  e->opt.state_inputs = NULL;
  e->opt.state_outputs = NULL;
  e->opt.n_states = 0;
  e->extent = -1;
  s = rlx_graph_clone(g, &e->src);
  if (s == RLX_OK) {
    rlx_compile_options o;
    if (options) o = *options; else rlx_compile_options_init(&o);
    s = bind_options(e, &o);
  }
  if (s == RLX_OK) s = collect_leaves(e);
  if (s == RLX_OK && rlx_graph_has_deferred(g)) s = rlx_vi_create(e->src, options, &e->vi, &e->err);
  if (s == RLX_OK && options) s = bind_states(e, options);
  if (s == RLX_OK && rlx_env_str(RLX_ENV_TRACE)) s = rlx_exec_set_trace(e, rlx_env_str(RLX_ENV_TRACE));
  if (s == RLX_OK) {
    e->selected = malloc((size_t)g->n_outputs);
    if (!e->selected) s = rlx_fail(&e->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    else memset(e->selected, 1, (size_t)g->n_outputs);
  }
  /* Fully bound graphs compile now, so errors surface at compile time. */
  if (s == RLX_OK) {
    int64_t* sizes = malloc(sizeof(int64_t) * (size_t)(g->n_symbols + 1));
    if (!sizes) s = rlx_fail(&e->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    else if (!e->vi && options_bind_all(e, sizes)) s = variant_get(e, sizes, &e->cur);
    free(sizes);
  }
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "%s", e->err.msg);
    rlx_exec_destroy(e);
    return s;
  }
  *out_exec = e;
  return RLX_OK;
}

const char* rlx_exec_last_error(const rlx_exec* e) { return e ? e->err.msg : "null executable"; }

/* Copies slot `from` into `to`: name, type, state, and for a param its
 * value (bytes shared until either sets it again); an input's data is not
 * carried over. */
static rlx_status copy_slot(host_slot* to, const host_slot* from, int is_param) {
  memset(to, 0, sizeof *to);
  to->name = dup_str(from->name);
  if (!to->name) return RLX_RESOURCE_EXHAUSTED;
  to->type = from->type;
  to->state = from->state;
  if (!is_param) return RLX_OK;
  if (from->shared) {
    to->shared = from->shared;
    atomic_fetch_add_explicit(&to->shared->refs, 1, memory_order_relaxed);
    to->data = from->data;
  }
  to->bytes = from->bytes;
  to->set = from->set;
  to->version = from->version;
  return RLX_OK;
}

static rlx_status copy_slots(host_slot** to, int32_t* n_to, const host_slot* from, int32_t n,
                             int is_param) {
  *to = calloc((size_t)n + 1, sizeof **to);
  if (!*to) return RLX_RESOURCE_EXHAUSTED;
  for (int32_t i = 0; i < n; i++) {
    *n_to = i + 1; /* counted first: destroy frees a half-copied slot */
    RLX_RETURN_IF_ERROR(copy_slot(&(*to)[i], &from[i], is_param));
  }
  return RLX_OK;
}

/* The clone's host side: source graph, bindings, params (with their
 * values), inputs (without), the device-state feeds. Everything the user
 * sets per run (inputs, other feeds, selection, seed, active extent) starts
 * afresh, as after rlx_compile. */
static rlx_status clone_host_side(const rlx_exec* e, rlx_exec* c) {
  c->backend = e->backend;
  c->opt = e->opt;
  c->extent_symbol = e->extent_symbol;
  c->params_version = e->params_version;
  RLX_RETURN_IF_ERROR(rlx_graph_clone(e->src, &c->src));
  int32_t ns = e->src->n_symbols, no = e->src->n_outputs;
  c->bound = malloc(sizeof(int64_t) * (size_t)(ns + 1));
  c->selected = malloc((size_t)no + 1);
  c->feeds = malloc(sizeof(feed) * (size_t)(e->n_feeds + 1));
  if (!c->bound || !c->selected || !c->feeds) return RLX_RESOURCE_EXHAUSTED;
  memcpy(c->bound, e->bound, sizeof(int64_t) * (size_t)ns);
  memset(c->selected, 1, (size_t)no);
  c->extent = e->extent_symbol >= 0 ? e->bound[e->extent_symbol] : -1;
  for (int32_t k = 0; k < e->n_feeds; k++)
    if (e->inputs[e->feeds[k].input].state) c->feeds[c->n_feeds++] = e->feeds[k];
  if (e->graph_text) {
    c->graph_text = dup_str(e->graph_text);
    if (!c->graph_text) return RLX_RESOURCE_EXHAUSTED;
  }
  c->uncacheable = e->uncacheable;
  c->trace = rlx_trace_retain(e->trace); /* the clone traces where e does */
  RLX_RETURN_IF_ERROR(copy_slots(&c->params, &c->n_params, e->params, e->n_params, 1));
  return copy_slots(&c->inputs, &c->n_inputs, e->inputs, e->n_inputs, 0);
}

/* The clone's variants share e's compiled parts; only the current one gets
 * its backend exec (arena) now, the others when first run. */
static rlx_status clone_variants(const rlx_exec* e, rlx_exec* c) {
  for (int32_t i = 0; i < e->n_variants; i++) {
    variant* v = NULL;
    RLX_RETURN_IF_ERROR(variant_new(c, e->variants[i]->c, &v));
    v->origin = ORIGIN_CLONE;
    c->variants[c->n_variants++] = v;
    if (e->variants[i] == e->cur) c->cur = v;
  }
  return c->cur ? variant_ready(c, c->cur) : RLX_OK;
}

rlx_status rlx_exec_clone(const rlx_exec* e, rlx_exec** out_exec) {
  if (!e || !out_exec) return RLX_INVALID_ARGUMENT;
  *out_exec = NULL;
  rlx_exec* c = calloc(1, sizeof *c);
  rlx_error* err = (rlx_error*)&e->err; /* failures are reported on the original */
  RLX_CHECK_ALLOC(err, c);
  rlx_status s = clone_host_side(e, c);
  if (s) rlx_fail(err, s, "clone: out of host memory");
  if (s == RLX_OK) {
    s = e->vi ? rlx_vi_clone(e->vi, c, &c->vi, &c->err) : clone_variants(e, c);
    if (s) rlx_fail(err, s, "clone: %s", c->err.msg);
  }
  if (s) {
    rlx_exec_destroy(c);
    return s;
  }
  *out_exec = c;
  return RLX_OK;
}

/* ------------------------------------------------------------ params, inputs */

rlx_status rlx_exec_set_param(rlx_exec* e, const char* name, rlx_dtype src_dtype,
                              const void* data, size_t bytes) {
  if (!e) return RLX_INVALID_ARGUMENT;
  if (!name || (!data && bytes))
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "set_param: %s is NULL", !name ? "name" : "data");
  int i = find_slot(e->params, e->n_params, name);
  if (i < 0) return fail_unknown_name(e, "param", name, e->params, e->n_params);
  host_slot* p = &e->params[i];
  rlx_dtype pt = p->type.dtype;
  int convert = src_dtype != pt;
  if (convert && !(src_dtype == RLX_F32 && rlx_dtype_is_float(pt)))
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT,
                    "param '%s' is %s; data given as %s (only %s%s data is accepted)", name,
                    rlx_dtype_name(pt), rlx_dtype_name(src_dtype), rlx_dtype_name(pt),
                    /* f32 data converts to the other float dtypes only */
                    rlx_dtype_is_float(pt) && pt != RLX_F32 ? " or f32" : "");
  if ((unsigned)src_dtype >= RLX_DTYPE_COUNT) return RLX_INVALID_ARGUMENT;
  size_t numel = p->bytes / rlx_dtype_size(pt);
  size_t want = numel * rlx_dtype_size(src_dtype);
  if (bytes != want)
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "param '%s' needs %zu bytes of %s, got %zu",
                    name, want, rlx_dtype_name(src_dtype), bytes);
  RLX_RETURN_IF_ERROR(param_own(e, p));
  if (convert) rlx_convert(p->data, pt, data, src_dtype, (int64_t)numel);
  else memcpy(p->data, data, bytes);
  p->set = 1;
  p->version = ++e->params_version;
  return RLX_OK;
}

rlx_status rlx_exec_set_input(rlx_exec* e, const char* name, rlx_dtype dtype,
                              const rlx_dim* shape, int32_t rank, const void* data,
                              size_t bytes) {
  if (!e) return RLX_INVALID_ARGUMENT;
  if (!name || (!data && bytes) || (!shape && rank))
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "set_input: %s is NULL",
                    !name ? "name" : !shape && rank ? "shape" : "data");
  int i = find_slot(e->inputs, e->n_inputs, name);
  if (i < 0) {
    if (find_slot(e->params, e->n_params, name) >= 0)
      return rlx_fail(&e->err, RLX_NOT_FOUND, "'%s' is a param, not an input: use set_param", name);
    return fail_unknown_name(e, "input", name, e->inputs, e->n_inputs);
  }
  host_slot* in = &e->inputs[i];
  const rlx_type* t = &in->type;
  if (dtype != t->dtype)
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "input '%s' is %s, data given as %s", name,
                    rlx_dtype_name(t->dtype), rlx_dtype_name(dtype));
  if (rank != t->rank)
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "input '%s' has rank %d, got rank %d", name,
                    t->rank, rank);
  uint64_t numel = 1;
  for (int32_t d = 0; d < rank; d++) {
    rlx_dim want = t->shape[d];
    if (shape[d] < 0)
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "input '%s': dim %d is negative", name, d);
    if (want >= 0 && shape[d] != want)
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "input '%s': dim %d is %lld, expected %lld",
                      name, d, (long long)shape[d], (long long)want);
    if (want < 0) {
      int32_t sym = (int32_t)(-want - 1);
      int64_t b = e->bound[sym];
      if (sym == e->extent_symbol) {
        if (shape[d] > b)
          return rlx_fail(&e->err, RLX_INVALID_ARGUMENT,
                          "input '%s': dim %d is %lld, above the compiled bound %lld of '%s'",
                          name, d, (long long)shape[d], (long long)b, e->src->symbols[sym]);
      }
    }
    if (shape[d] > 0 && numel > UINT64_MAX / (uint64_t)shape[d])
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "input '%s': shape overflows", name);
    numel *= (uint64_t)shape[d];
  }
  uint64_t want_bytes = numel * rlx_dtype_size(dtype);
  if (bytes != want_bytes)
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "input '%s' needs %llu bytes, got %zu", name,
                    (unsigned long long)want_bytes, bytes);
  if (bytes > in->bytes || !in->data) {
    void* grown = realloc(in->data, bytes ? bytes : 1);
    RLX_CHECK_ALLOC(&e->err, grown);
    in->data = grown;
  }
  if (bytes) memcpy(in->data, data, bytes); /* data may be NULL for an empty tensor */
  in->bytes = bytes;
  for (int32_t d = 0; d < rank; d++) in->shape[d] = shape[d];
  in->set = 1;
  in->dirty = 1;
  in->fed = 0;
  return RLX_OK;
}

rlx_status rlx_exec_set_seed(rlx_exec* e, uint64_t seed) {
  if (!e) return RLX_INVALID_ARGUMENT;
  e->seed = seed;
  return RLX_OK;
}

rlx_status rlx_exec_set_active_extent(rlx_exec* e, int64_t n) {
  if (!e) return RLX_INVALID_ARGUMENT;
  if (e->extent_symbol < 0)
    return rlx_fail(&e->err, RLX_FAILED_PRECONDITION,
                    "no extent symbol: compile with options.extent_symbol to use an active extent");
  int64_t b = e->bound[e->extent_symbol];
  if (n < 1 || n > b)
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "active extent %lld outside [1, %lld]",
                    (long long)n, (long long)b);
  e->extent = n;
  return RLX_OK;
}

rlx_status rlx_exec_feed(rlx_exec* e, const char* input_name, int32_t output_index, int64_t row) {
  if (!e || !input_name) return RLX_INVALID_ARGUMENT;
  int i = find_slot(e->inputs, e->n_inputs, input_name);
  if (i < 0) return fail_unknown_name(e, "input", input_name, e->inputs, e->n_inputs);
  if (e->vi)
    return rlx_fail(&e->err, RLX_FAILED_PRECONDITION,
                    "feeds are not supported on a model whose shapes depend on input values");
  if (output_index < 0 || output_index >= e->src->n_outputs)
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "output index %d out of range [0, %d)",
                    output_index, e->src->n_outputs);
  const rlx_type* ot = rlx_tensor_type(e->src, e->src->outputs[output_index]);
  const rlx_type* it = &e->inputs[i].type;
  if (ot->dtype != it->dtype)
    return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "feed: output %d is %s, input '%s' is %s",
                    output_index, rlx_dtype_name(ot->dtype), input_name, rlx_dtype_name(it->dtype));
  if (e->inputs[i].state)
    return rlx_fail(&e->err, RLX_FAILED_PRECONDITION,
                    "input '%s' is device state of output %d (compile options); it cannot be re-fed",
                    input_name, e->inputs[i].state - 1);
  return add_feed(e, i, output_index, row);
}

/* Sizes are checked per run (they may be symbolic). */
static rlx_status add_feed(rlx_exec* e, int32_t input, int32_t output, int64_t row) {
  for (int32_t k = 0; k < e->n_feeds; k++)
    if (e->feeds[k].input == input) {
      e->feeds[k].output = output;
      e->feeds[k].row = row;
      return RLX_OK;
    }
  feed* grown = realloc(e->feeds, sizeof(feed) * (size_t)(e->n_feeds + 1));
  RLX_CHECK_ALLOC(&e->err, grown);
  e->feeds = grown;
  e->feeds[e->n_feeds++] = (feed){input, output, row};
  return RLX_OK;
}

rlx_status rlx_exec_select_outputs(rlx_exec* e, const int32_t* indices, int32_t n) {
  if (!e) return RLX_INVALID_ARGUMENT;
  int32_t no = e->src->n_outputs;
  if (n < 0) {
    memset(e->selected, 1, (size_t)no);
    return RLX_OK;
  }
  for (int32_t k = 0; k < n; k++)
    if (!indices || indices[k] < 0 || indices[k] >= no)
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "selected output index out of range [0, %d)",
                      no);
  memset(e->selected, 0, (size_t)no);
  for (int32_t k = 0; k < n; k++) e->selected[indices[k]] = 1;
  return RLX_OK;
}

/* ------------------------------------------------------------ run */


/* A symbol must be bound when some value that is computed, or read, has it
 * as a dim. An input no node reads may be left unset (an ONNX input that
 * only Shape or CastLike looked at, a declared but unused input), and so
 * may a symbol that only such inputs, or no tensor at all, have. */
static int symbol_needed(const rlx_graph* g, int32_t sym) {
  rlx_dim code = -(rlx_dim)sym - 1;
  for (int32_t v = 0; v < g->n_values; v++) {
    const rlx_type* t = &g->values[v].type;
    int has = 0;
    for (int32_t d = 0; d < t->rank; d++) has |= rlx_dim_mentions(g, t->shape[d], code);
    if (!has) continue;
    if (g->nodes[g->values[v].node].op != RLX_OP_INPUT || rlx_graph_value_is_read(g, v)) return 1;
  }
  return 0;
}

/* Input dims that are expressions (B*T) follow from the leaves: checked
 * once the leaves are bound. */
static rlx_status check_expr_dims(rlx_exec* e, const int64_t* sizes) {
  rlx_graph* g = e->src;
  for (int32_t i = 0; i < e->n_inputs; i++) {
    host_slot* in = &e->inputs[i];
    for (int32_t d = 0; in->set && d < in->type.rank; d++) {
      rlx_dim want = in->type.shape[d];
      if (!rlx_dim_is_expr(g, want)) continue;
      int64_t v = rlx_dim_value(g, want, sizes);
      if (v >= 0 && v != in->shape[d])
        return rlx_fail(&e->err, RLX_INVALID_ARGUMENT,
                        "input '%s' dim %d is %lld but its declared dim '%s' is %lld", in->name,
                        d, (long long)in->shape[d], g->symbols[-want - 1], (long long)v);
    }
  }
  return RLX_OK;
}

/* Binds every symbol: options first, then the shapes of the inputs given. */
static rlx_status resolve_binding(rlx_exec* e, int64_t* sizes) {
  rlx_graph* g = e->src;
  for (int32_t k = 0; k < g->n_symbols; k++) sizes[k] = e->bound[k];
  for (int32_t i = 0; i < e->n_inputs; i++) {
    host_slot* in = &e->inputs[i];
    if (!in->set) continue;
    for (int32_t d = 0; d < in->type.rank; d++) {
      rlx_dim want = in->type.shape[d];
      if (want >= 0 || rlx_dim_is_expr(g, want)) continue;
      int32_t sym = (int32_t)(-want - 1);
      if (sym == e->extent_symbol) continue; /* shrinks via the active extent */
      if (sizes[sym] < 0) sizes[sym] = in->shape[d];
      else if (sizes[sym] != in->shape[d])
        return rlx_fail(&e->err, RLX_INVALID_ARGUMENT,
                        "symbol '%s' is %lld but input '%s' dim %d is %lld", g->symbols[sym],
                        (long long)sizes[sym], in->name, d, (long long)in->shape[d]);
    }
  }
  for (int32_t k = 0; k < g->n_symbols; k++)
    if (sizes[k] < 0 && !rlx_dim_is_expr(g, -(rlx_dim)k - 1) && !symbol_needed(g, k))
      sizes[k] = 1; /* no tensor that matters has it: any size specialises the same */
  for (int32_t k = 0; k < g->n_symbols; k++)
    if (sizes[k] < 0 && !rlx_dim_is_expr(g, -(rlx_dim)k - 1))
      return rlx_fail(&e->err, RLX_FAILED_PRECONDITION,
                      "symbol '%s' is not bound: set an input that uses it or bind it in the "
                      "compile options", g->symbols[k]);
  RLX_RETURN_IF_ERROR(rlx_graph_eval_dims(g, sizes, &e->err));
  return check_expr_dims(e, sizes);
}

/* Whether a param the derived graph reads was set after version `since`
 * (0: nothing uploaded yet). */
static int hoisted_stale(const rlx_exec* e, const rlx_compiled* c, uint64_t since) {
  if (since == 0) return 1;
  for (int32_t i = 0; i < c->derived->n_nodes; i++) {
    const rlx_node* n = &c->derived->nodes[i];
    if (n->op != RLX_OP_PARAM) continue;
    int j = find_slot(e->params, e->n_params, n->a.name);
    if (j >= 0 && e->params[j].version > since) return 1;
  }
  return 0;
}

/* v's CPU executable of the derived graph: compiled once per variant (the
 * compile cache shares the work between clones), run whenever its params
 * change. Its options follow e's where they choose CPU kernels. */
static rlx_status hoist_exec_ready(rlx_exec* e, variant* v) {
  if (v->hoist_exec) return RLX_OK;
  rlx_graph* g = NULL; /* a copy: rlx_compile reports on its graph, and c is shared */
  rlx_status s = rlx_graph_clone(v->c->derived, &g);
  if (s) return rlx_fail(&e->err, s, "hoisted params: out of host memory");
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.threads = e->opt.threads;
  o.use_blas = e->opt.use_blas;
  o.reference = e->opt.reference;
  o.debug_nans = e->opt.debug_nans;
  s = rlx_compile(g, "cpu", &o, &v->hoist_exec);
  if (s) rlx_fail(&e->err, s, "hoisted params: %s", g->err.msg);
  else v->hoist_exec->quiet = 1;
  rlx_graph_destroy(g);
  return s;
}

/* Lends h (the derived graph's executable) the current bytes of e's
 * params for one run: shared, not copied, with e's versions, so h uploads
 * only those set since its last run. */
static rlx_status hoist_lend_params(rlx_exec* e, rlx_exec* h) {
  for (int32_t i = 0; i < h->n_params; i++) {
    host_slot* to = &h->params[i];
    int j = find_slot(e->params, e->n_params, to->name);
    const host_slot* from = j >= 0 ? &e->params[j] : NULL;
    if (!from || !from->shared || from->bytes != to->bytes)
      return rlx_fail(&e->err, RLX_INTERNAL, "hoisted params: param '%s' has no matching bytes",
                      to->name);
    atomic_fetch_add_explicit(&from->shared->refs, 1, memory_order_relaxed);
    param_bytes_unref(to->shared);
    to->shared = from->shared;
    to->data = from->data;
    to->set = 1;
    to->version = from->version;
  }
  h->params_version = e->params_version;
  return RLX_OK;
}

/* Gives the lent bytes back after the run: a later set_param of e then
 * writes its own bytes in place instead of copying them (copy on write
 * would see them shared), and no old values stay alive in h. */
static void hoist_return_params(rlx_exec* h) {
  for (int32_t i = 0; i < h->n_params; i++) {
    param_bytes_unref(h->params[i].shared);
    h->params[i].shared = NULL;
    h->params[i].data = NULL;
  }
}

/* Reads each output of h (the hoisted values, in leaf order) and uploads
 * it at its leaf in v's arena. */
static rlx_status upload_hoisted_values(rlx_exec* e, variant* v, rlx_exec* h) {
  const rlx_compiled* c = v->c;
  void* buf = NULL;
  rlx_status s = RLX_OK;
  for (int32_t k = 0; s == RLX_OK && k < c->hoist.values; k++) {
    rlx_tensor leaf = c->hoisted_leaf[k];
    const rlx_type* t = rlx_tensor_type(c->g, leaf);
    size_t bytes = (size_t)rlx_type_bytes(t);
    void* grown = realloc(buf, bytes ? bytes : 1);
    if (!grown) s = rlx_fail(&e->err, RLX_RESOURCE_EXHAUSTED, "hoisted params: no host memory for %zu bytes", bytes);
    else buf = grown;
    if (s == RLX_OK && rlx_exec_read_output(h, k, t->dtype, buf, bytes) != RLX_OK)
      s = rlx_fail(&e->err, RLX_INTERNAL, "hoisted params: %s", h->err.msg);
    if (s == RLX_OK) s = e->backend->upload(v->be, c->plan.offset[leaf], buf, bytes, &e->err);
  }
  free(buf);
  return s;
}

/* Evaluates the hoisted values on the CPU from the current params and
 * uploads them, when a param they read changed since they were last. */
static rlx_status upload_hoisted(rlx_exec* e, variant* v) {
  if (!v->c->derived || !hoisted_stale(e, v->c, v->hoist_version)) return RLX_OK;
  RLX_RETURN_IF_ERROR(hoist_exec_ready(e, v));
  rlx_exec* h = v->hoist_exec;
  rlx_status lent = hoist_lend_params(e, h);
  rlx_status ran = lent == RLX_OK ? rlx_exec_run(h) : RLX_OK;
  hoist_return_params(h);
  if (lent) return lent;
  if (ran) return rlx_fail(&e->err, ran, "hoisted params: %s", h->err.msg);
  RLX_RETURN_IF_ERROR(upload_hoisted_values(e, v, h));
  v->hoist_version = e->params_version;
  return RLX_OK;
}

static rlx_status upload_params(rlx_exec* e, variant* v) {
  if (v->params_version == e->params_version && v->params_version != 0) return RLX_OK;
  for (int32_t i = 0; i < e->n_params; i++) {
    host_slot* p = &e->params[i];
    if (!p->set)
      return rlx_fail(&e->err, RLX_FAILED_PRECONDITION, "param '%s' was not set", p->name);
    if (v->params_version != 0 && p->version <= v->params_version) continue;
    rlx_tensor t = find_leaf(v->c->g, RLX_OP_PARAM, p->name);
    if (t < 0) continue; /* optimised away */
    RLX_RETURN_IF_ERROR(e->backend->upload(v->be, v->c->plan.offset[t], p->data, p->bytes, &e->err));
  }
  RLX_RETURN_IF_ERROR(upload_hoisted(e, v));
  v->params_version = e->params_version ? e->params_version : 1;
  return RLX_OK;
}

/* Device state (an input declared in state_inputs, written by its feed)
 * carried from the arena of the variant run last into v's, so a KV cache
 * filled by runs at one binding (a prefill chunk of T tokens) is read by
 * runs at another (T = 1 decode). Backends have no copy between two
 * arenas, so the bytes go through a host buffer: once per switch of
 * binding, never per run. Sizes must agree (a state whose shape follows a
 * symbol cannot be carried: an error). */
static rlx_status carry_state(rlx_exec* e, variant* from, variant* v, host_slot* in, rlx_tensor t) {
  rlx_tensor f = find_leaf(from->c->g, RLX_OP_INPUT, in->name);
  uint64_t bytes = v->c->plan.bytes[t];
  if (f < 0 || from->c->plan.bytes[f] != bytes)
    return rlx_fail(&e->err, RLX_FAILED_PRECONDITION,
                    "device state '%s' changes size with the binding; it cannot be carried",
                    in->name);
  void* tmp = malloc(bytes ? (size_t)bytes : 1);
  RLX_CHECK_ALLOC(&e->err, tmp);
  rlx_status s = e->backend->download(from->be, from->c->plan.offset[f], tmp, bytes, &e->err);
  if (s == RLX_OK) s = e->backend->upload(v->be, v->c->plan.offset[t], tmp, bytes, &e->err);
  free(tmp);
  return s;
}

/* Inputs whose host copy is newer than the device's; all of them after a
 * switch of variant (from: the variant run before), except device state
 * written by its feed, which is carried over (carry_state). */
static rlx_status upload_inputs(rlx_exec* e, variant* v, variant* from) {
  int switched = from != v;
  for (int32_t i = 0; i < e->n_inputs; i++) {
    host_slot* in = &e->inputs[i];
    rlx_tensor t = find_leaf(v->c->g, RLX_OP_INPUT, in->name);
    if (t < 0) continue;
    if (in->fed && !switched && !in->dirty) continue;
    if (in->fed && in->state && !in->dirty && from && from->be) {
      RLX_RETURN_IF_ERROR(carry_state(e, from, v, in, t));
      continue;
    }
    /* an unread input may stay unset */
    if (!in->set && !rlx_graph_value_is_read(v->c->g, t)) continue;
    if (!in->set)
      return rlx_fail(&e->err, RLX_FAILED_PRECONDITION, "input '%s' was not set", in->name);
    if (!in->dirty && !switched) continue;
    if (in->bytes > v->c->plan.bytes[t])
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT, "input '%s' is larger than compiled", in->name);
    RLX_RETURN_IF_ERROR(e->backend->upload(v->be, v->c->plan.offset[t], in->data, in->bytes, &e->err));
    in->dirty = 0;
    in->fed = 0;
  }
  return RLX_OK;
}

/* The extent graph *g (decomposed) with the nodes hoisted that were hoisted
 * from the bound graph, so it keeps the structure of c->g. A hoisted value
 * whose shape follows the extent cannot be a fixed leaf: an error. */
static rlx_status hoist_as_compiled(const rlx_compiled* c, rlx_graph** g) {
  if (!c->hoist_mask) return RLX_OK;
  if ((*g)->n_nodes != c->hoist_mask_nodes)
    return rlx_fail(&(*g)->err, RLX_INTERNAL, "extent graph differs in structure from the bound graph");
  rlx_graph* run = NULL;
  rlx_tensor* leaves = NULL;
  rlx_hoist_stats st = {0};
  RLX_RETURN_IF_ERROR(rlx_hoist_apply(*g, c->hoist_mask, &run, NULL, &leaves, &st));
  rlx_status s = RLX_OK;
  for (int32_t k = 0; s == RLX_OK && k < st.values && k < c->hoist.values; k++)
    if (!rlx_type_equal(rlx_tensor_type(run, leaves[k]), rlx_tensor_type(c->g, c->hoisted_leaf[k])))
      s = rlx_fail(&(*g)->err, RLX_UNIMPLEMENTED,
                   "hoisted value %d changes shape with the active extent (set RLX_NO_HOIST=1)", k);
  if (s == RLX_OK && st.values != c->hoist.values)
    s = rlx_fail(&(*g)->err, RLX_INTERNAL, "extent graph hoists differently from the bound graph");
  free(leaves);
  if (s) {
    rlx_graph_destroy(run);
    return s;
  }
  rlx_graph_destroy(*g);
  *g = run;
  return RLX_OK;
}

/* Steps for the current active extent: lowered from the graph specialised
 * at the extent, with the plan made at the bound (offsets stay valid: the
 * extent only shrinks dim 0, which never changes inner strides). */
static rlx_status extent_steps(rlx_exec* e, variant* v, const rlx_step_list** out) {
  if (e->extent_symbol < 0 || e->extent == v->c->sizes[e->extent_symbol]) {
    *out = &v->c->steps;
    return RLX_OK;
  }
  if (v->extent_n == e->extent) {
    *out = &v->extent_steps;
    return RLX_OK;
  }
  rlx_step_list_free(&v->extent_steps);
  v->extent_n = -1;
  int64_t* sizes = malloc(sizeof(int64_t) * (size_t)e->src->n_symbols);
  RLX_CHECK_ALLOC(&e->err, sizes);
  memcpy(sizes, v->c->sizes, sizeof(int64_t) * (size_t)e->src->n_symbols);
  sizes[e->extent_symbol] = e->extent;
  rlx_graph *spec = NULL, *dec = NULL;
  rlx_status s = rlx_graph_specialize(e->src, sizes, &spec);
  free(sizes);
  if (s) return rlx_fail(&e->err, s, "%s", e->src->err.msg);
  s = fold_and_decompose(e, spec, &dec, NULL, NULL);
  if (s == RLX_OK) s = hoist_as_compiled(v->c, &dec);
  if (s == RLX_OK && dec->n_values != v->c->g->n_values)
    s = rlx_fail(&dec->err, RLX_INTERNAL, "extent graph differs in structure from the bound graph");
  rlx_error why = {{0}};
  if (s == RLX_OK) s = rlx_lower(dec, &v->c->plan, v->c->host_node, &v->extent_steps, &why);
  if (s) rlx_fail(&e->err, s, "%s", why.msg[0] ? why.msg : dec ? dec->err.msg : spec->err.msg);
  rlx_graph_destroy(dec);
  rlx_graph_destroy(spec);
  if (s) return s;
  v->extent_n = e->extent;
  *out = &v->extent_steps;
  return RLX_OK;
}

static rlx_status apply_feeds(rlx_exec* e, variant* v) {
  for (int32_t k = 0; k < e->n_feeds; k++) {
    feed* f = &e->feeds[k];
    host_slot* in = &e->inputs[f->input];
    rlx_tensor ti = find_leaf(v->c->g, RLX_OP_INPUT, in->name);
    rlx_tensor to = v->c->g->outputs[f->output];
    if (ti < 0) continue;
    uint64_t in_bytes = v->c->plan.bytes[ti];
    uint64_t src = v->c->plan.offset[to], n = v->c->plan.bytes[to];
    const rlx_type* ot = rlx_tensor_type(v->c->g, to);
    if (f->row >= 0) {
      if (ot->rank < 1 || f->row >= ot->shape[0])
        return rlx_fail(&e->err, RLX_OUT_OF_RANGE, "feed of '%s': row %lld outside output %d",
                        in->name, (long long)f->row, f->output);
      n = v->c->plan.bytes[to] / (uint64_t)ot->shape[0];
      src += n * (uint64_t)f->row;
    }
    if (n != in_bytes)
      return rlx_fail(&e->err, RLX_INVALID_ARGUMENT,
                      "feed of '%s': %llu bytes from output %d, input holds %llu", in->name,
                      (unsigned long long)n, f->output, (unsigned long long)in_bytes);
    if (src != v->c->plan.offset[ti])
      RLX_RETURN_IF_ERROR(e->backend->copy(v->be, v->c->plan.offset[ti], src, n, &e->err));
    in->fed = 1; /* the device copy is now the truth until the user sets it again */
    in->dirty = 0;
  }
  return RLX_OK;
}

/* ------------------------------------------------------------ tracing */

rlx_status rlx_exec_set_trace(rlx_exec* e, const char* path) {
  if (!e) return RLX_INVALID_ARGUMENT;
  rlx_trace_file* f = NULL;
  if (path && *path) RLX_RETURN_IF_ERROR(rlx_trace_open(path, &e->err, &f));
  rlx_trace_release(e->trace);
  e->trace = f;
  e->trace_pid = 0; /* a new file: a new process row there, runs from 0 */
  e->trace_runs = 0;
  return RLX_OK;
}

/* The run's trace context, or NULL when this executable does not trace. */
static const rlx_trace_run* trace_begin(rlx_exec* e, const rlx_graph* g, rlx_trace_run* tr) {
  if (!e->trace) return NULL;
  if (!e->trace_pid) {
    char label[96];
    snprintf(label, sizeof label, "rlx executable %p (%s)", (void*)e, e->backend->name);
    e->trace_pid = rlx_trace_new_pid(e->trace, label);
  }
  *tr = (rlx_trace_run){e->trace, e->backend->name, e->trace_pid, e->trace_runs++, g};
  return tr;
}

/* RLX_DISPATCH_REPORT=1: print the report to stderr whenever a binding is
 * first run. */
static void maybe_print_report(const rlx_exec* e) {
  if (e->quiet || !rlx_env_flag(RLX_ENV_DISPATCH_REPORT)) return;
  char* text = NULL;
  if (rlx_exec_report(e, &text) == RLX_OK) fputs(text, stderr);
  free(text);
}

rlx_status rlx_exec_run(rlx_exec* e) {
  if (!e) return RLX_INVALID_ARGUMENT;
  rlx_error_clear(&e->err);
  e->outputs_valid = 0; /* until this run succeeds */
  e->attempted = 1;
  if (e->vi) {
    RLX_RETURN_IF_ERROR(rlx_vi_run(e, e->vi));
    e->ran = e->outputs_valid = 1;
    return RLX_OK;
  }
  int64_t* sizes = malloc(sizeof(int64_t) * (size_t)(e->src->n_symbols + 1));
  RLX_CHECK_ALLOC(&e->err, sizes);
  rlx_status s = resolve_binding(e, sizes);
  variant* v = NULL;
  if (s == RLX_OK) s = variant_get(e, sizes, &v);
  free(sizes);
  if (s) return s;
  variant* from = e->cur;
  int switched = v != from;
  /* no param upload on a mere switch: v's arena keeps the params it was
   * given (params are persistent there), upload_params sends newer ones */
  e->cur = v;
  if (switched || !e->ran) maybe_print_report(e);
  RLX_RETURN_IF_ERROR(upload_params(e, v));
  RLX_RETURN_IF_ERROR(upload_inputs(e, v, from));
  const rlx_step_list* steps = NULL;
  RLX_RETURN_IF_ERROR(extent_steps(e, v, &steps));
  if (e->backend->select_outputs) e->backend->select_outputs(v->be, e->selected, e->src->n_outputs);
  rlx_trace_run tr;
  rlx_run_ctx ctx = {e->seed, v->c->g, &v->c->plan, trace_begin(e, v->c->g, &tr)};
  RLX_RETURN_IF_ERROR(e->backend->run(v->be, steps, &ctx, &e->err));
  RLX_RETURN_IF_ERROR(apply_feeds(e, v));
  e->ran = 1;
  e->outputs_valid = 1;
  return RLX_OK;
}

/* ------------------------------------------------------------ outputs */

int32_t rlx_exec_output_count(const rlx_exec* e) { return e ? e->src->n_outputs : 0; }

/* The output type of the build that ran last (value inputs). */
static rlx_status vi_output_type(const rlx_exec* e, int32_t index, rlx_type* out) {
  const rlx_exec* in = rlx_vi_current(e->vi);
  if (!in)
    return rlx_fail((rlx_error*)&e->err, RLX_FAILED_PRECONDITION,
                    "output %d depends on input values and nothing has run yet", index);
  rlx_status s = rlx_exec_output_type(in, index, &out->dtype, &out->rank, out->shape);
  if (s) rlx_fail((rlx_error*)&e->err, s, "%s", rlx_exec_last_error(in));
  return s;
}

/* Output type at the current binding and extent. */
static rlx_status output_type(const rlx_exec* e, int32_t index, rlx_type* out) {
  if (index < 0 || index >= e->src->n_outputs)
    return rlx_fail((rlx_error*)&e->err, RLX_INVALID_ARGUMENT, "output index %d out of range [0, %d)",
                    index, e->src->n_outputs);
  const rlx_type* st = rlx_tensor_type(e->src, e->src->outputs[index]);
  if (e->vi) return vi_output_type(e, index, out);
  if (!e->cur)
    return rlx_fail((rlx_error*)&e->err, RLX_FAILED_PRECONDITION,
                    "output %d has symbolic dims and nothing has run yet", index);
  *out = *rlx_tensor_type(e->cur->c->g, e->cur->c->g->outputs[index]);
  if (e->extent_symbol >= 0 && st->rank > 0 && st->shape[0] == -(rlx_dim)e->extent_symbol - 1)
    out->shape[0] = e->extent;
  return RLX_OK;
}

rlx_status rlx_exec_output_type(const rlx_exec* e, int32_t index, rlx_dtype* out_dtype,
                                int32_t* out_rank, int64_t* out_shape) {
  if (!e) return RLX_INVALID_ARGUMENT;
  rlx_type t = {0};
  RLX_RETURN_IF_ERROR(output_type(e, index, &t));
  if (out_dtype) *out_dtype = t.dtype;
  if (out_rank) *out_rank = t.rank;
  if (out_shape) for (int32_t d = 0; d < t.rank; d++) out_shape[d] = t.shape[d];
  return RLX_OK;
}

static int convertible(rlx_dtype from, rlx_dtype to) {
  return from == to || (rlx_dtype_is_float(from) && rlx_dtype_is_float(to));
}

/* read_elements from the build that ran last (value inputs): whole
 * outputs or whole rows, as the caller asked. */
static rlx_status vi_read_elements(const rlx_exec* e, int32_t index, int64_t first, int64_t count,
                                   rlx_dtype dtype, void* dst, size_t bytes) {
  const rlx_exec* in = rlx_vi_current(e->vi);
  rlx_type t = {0};
  RLX_RETURN_IF_ERROR(vi_output_type(e, index, &t));
  int64_t numel = rlx_type_numel(&t);
  rlx_status s;
  if (first == 0 && count == numel) {
    s = rlx_exec_read_output(in, index, dtype, dst, bytes);
  } else {
    int64_t per_row = count ? count : 1;
    s = rlx_exec_read_output_row(in, index, first / per_row, dtype, dst, bytes);
  }
  if (s) rlx_fail((rlx_error*)&e->err, s, "%s", rlx_exec_last_error(in));
  return s;
}

/* Reads `count` elements starting at element `first` of output index. */
static rlx_status read_elements(const rlx_exec* e, int32_t index, int64_t first, int64_t count,
                                rlx_dtype dtype, void* dst, size_t bytes) {
  rlx_error* err = (rlx_error*)&e->err;
  if (!e->outputs_valid)
    return rlx_fail(err, RLX_FAILED_PRECONDITION, "read_output %s: no valid results until a run succeeds",
                    e->attempted ? "after a failed run" : "before any run");
  if (!e->selected[index])
    return rlx_fail(err, RLX_FAILED_PRECONDITION, "output %d was not selected for readback", index);
  if (e->vi) return vi_read_elements(e, index, first, count, dtype, dst, bytes);
  const variant* v = e->cur;
  rlx_tensor t = v->c->g->outputs[index];
  rlx_dtype st = rlx_tensor_type(v->c->g, t)->dtype;
  if (!convertible(st, dtype))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "output %d is %s; cannot read it as %s", index,
                    rlx_dtype_name(st), rlx_dtype_name(dtype));
  size_t need = (size_t)count * rlx_dtype_size(dtype);
  if (!dst || bytes < need)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "output %d needs %zu bytes as %s, buffer has %zu",
                    index, need, rlx_dtype_name(dtype), bytes);
  uint64_t off = v->c->plan.offset[t] + (uint64_t)first * rlx_dtype_size(st);
  uint64_t nb = (uint64_t)count * rlx_dtype_size(st);
  if (st == dtype) return e->backend->download(v->be, off, dst, nb, err);
  void* tmp = malloc(nb ? nb : 1);
  RLX_CHECK_ALLOC(err, tmp);
  rlx_status s = e->backend->download(v->be, off, tmp, nb, err);
  if (s == RLX_OK) rlx_convert(dst, dtype, tmp, st, count);
  free(tmp);
  return s;
}

rlx_status rlx_exec_read_output(const rlx_exec* e, int32_t index, rlx_dtype dtype, void* dst,
                                size_t bytes) {
  if (!e) return RLX_INVALID_ARGUMENT;
  rlx_type t = {0};
  RLX_RETURN_IF_ERROR(output_type(e, index, &t));
  return read_elements(e, index, 0, rlx_type_numel(&t), dtype, dst, bytes);
}

rlx_status rlx_exec_read_output_row(const rlx_exec* e, int32_t index, int64_t row,
                                    rlx_dtype dtype, void* dst, size_t bytes) {
  if (!e) return RLX_INVALID_ARGUMENT;
  rlx_type t = {0};
  RLX_RETURN_IF_ERROR(output_type(e, index, &t));
  if (t.rank < 1 || row < 0 || row >= t.shape[0])
    return rlx_fail((rlx_error*)&e->err, RLX_OUT_OF_RANGE, "row %lld outside output %d", (long long)row,
                    index);
  int64_t per_row = rlx_type_numel(&t) / (t.shape[0] ? t.shape[0] : 1);
  return read_elements(e, index, row * per_row, per_row, dtype, dst, bytes);
}

/* ------------------------------------------------------------ introspection */

rlx_status rlx_exec_graph(const rlx_exec* e, const rlx_graph** out_graph) {
  if (!e || !out_graph) return RLX_INVALID_ARGUMENT;
  if (e->vi && rlx_vi_current(e->vi)) return rlx_exec_graph(rlx_vi_current(e->vi), out_graph);
  *out_graph = e->cur ? e->cur->c->g : NULL;
  return e->cur ? RLX_OK : RLX_FAILED_PRECONDITION;
}

rlx_status rlx_exec_steps(const rlx_exec* e, const rlx_step_list** out_steps,
                          const rlx_plan** out_plan) {
  if (e && e->vi && rlx_vi_current(e->vi))
    return rlx_exec_steps(rlx_vi_current(e->vi), out_steps, out_plan);
  if (!e || !e->cur) return RLX_FAILED_PRECONDITION;
  if (out_steps) *out_steps = &e->cur->c->steps;
  if (out_plan) *out_plan = &e->cur->c->plan;
  return RLX_OK;
}

rlx_status rlx_exec_memory_stats(const rlx_exec* e, rlx_memory_stats* out) {
  if (!e || !out) return RLX_INVALID_ARGUMENT;
  if (e->vi && rlx_vi_current(e->vi)) return rlx_exec_memory_stats(rlx_vi_current(e->vi), out);
  if (!e->cur)
    return rlx_fail((rlx_error*)&e->err, RLX_FAILED_PRECONDITION, "not compiled yet (symbolic dims unbound)");
  out->arena_bytes = e->cur->c->plan.arena_bytes;
  out->tensor_bytes = e->cur->c->plan.tensor_bytes;
  out->peak_live_bytes = e->cur->c->plan.peak_live_bytes;
  out->launches = e->cur->c->steps.n;
  const rlx_backend_exec* be = e->cur->be;
  out->backend_bytes = be && e->backend->extra_bytes ? e->backend->extra_bytes(be) : 0;
  return RLX_OK;
}

/* Growable text buffer for the report. */
typedef struct strbuf { char* s; size_t n, cap; } strbuf;
static void sb_add(strbuf* b, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(strbuf* b, const char* fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int w = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (w < 0) return;
    if (b->s && b->n + (size_t)w < b->cap) { b->n += (size_t)w; return; }
    size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)w;
    char* g = realloc(b->s, cap);
    if (!g) return;
    b->s = g;
    b->cap = cap;
  }
}

static const char* op_display_name(int op) { return rlx_op_table[op].text; }

rlx_status rlx_exec_report(const rlx_exec* e, char** out_text) {
  if (!e || !out_text) return RLX_INVALID_ARGUMENT;
  if (e->vi && rlx_vi_current(e->vi)) return rlx_exec_report(rlx_vi_current(e->vi), out_text);
  if (!e->cur)
    return rlx_fail((rlx_error*)&e->err, RLX_FAILED_PRECONDITION, "not compiled yet (symbolic dims unbound)");
  const variant* v = e->cur;
  strbuf b = {0};
  sb_add(&b, "dispatch report (device %s)\n", e->backend->name);
  sb_add(&b, "  %-28s %7s %7s %10s %7s\n", "op", "native", "fused", "decomposed", "host");
  for (int op = 0; op < RLX_OP_COUNT; op++) {
    int32_t n = v->c->counts.native[op], d = v->c->counts.decomposed[op], h = v->c->counts.host[op];
    int32_t f = v->c->counts.fused[op];
    if (!n && !d && !h && !f) continue;
    sb_add(&b, "  %-28s %7d %7d %10d %7d\n", op_display_name(op), n, f, d, h);
  }
  const rlx_plan* p = &v->c->plan;
  sb_add(&b, "  arena %llu bytes, tensors %llu bytes, peak-live bound %llu bytes (arena/bound %.3f)\n",
         (unsigned long long)p->arena_bytes, (unsigned long long)p->tensor_bytes,
         (unsigned long long)p->peak_live_bytes,
         p->peak_live_bytes ? (double)p->arena_bytes / (double)p->peak_live_bytes : 1.0);
  sb_add(&b, "  launches per run %d\n", v->c->steps.n);
  if (v->c->hoist_off) sb_add(&b, "  hoisted: off (RLX_NO_HOIST)\n");
  else sb_add(&b, "  hoisted: %d values from %d nodes, %llu bytes\n", v->c->hoist.values,
              v->c->hoist.nodes, (unsigned long long)v->c->hoist.bytes);
  sb_add(&b, "  compiled code: %s\n", origin_text[v->origin]);
  if (e->backend->report && v->be) { /* what the backend itself decided */
    char line[512] = "";
    e->backend->report(v->be, line, sizeof line);
    if (line[0]) sb_add(&b, "  %s\n", line);
  }
  if (!b.s) return rlx_fail((rlx_error*)&e->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  *out_text = b.s;
  return RLX_OK;
}

/* ------------------------------------------------------------ public introspection */

int32_t rlx_exec_input_count(const rlx_exec* e) { return e ? rlx_graph_input_count(e->src) : 0; }
int32_t rlx_exec_param_count(const rlx_exec* e) { return e ? rlx_graph_param_count(e->src) : 0; }

/* The graph query's message moves to the executable, where callers look. */
static rlx_status exec_info(const rlx_exec* e, int is_param, int32_t index,
                            rlx_value_info* out_info) {
  if (!e || !out_info) return RLX_INVALID_ARGUMENT;
  rlx_status s = is_param ? rlx_graph_get_param(e->src, index, out_info)
                          : rlx_graph_get_input(e->src, index, out_info);
  if (s != RLX_OK) ((rlx_exec*)e)->err = e->src->err;
  return s;
}

rlx_status rlx_exec_get_input(const rlx_exec* e, int32_t index, rlx_value_info* out_info) {
  return exec_info(e, 0, index, out_info);
}

rlx_status rlx_exec_get_param(const rlx_exec* e, int32_t index, rlx_value_info* out_info) {
  return exec_info(e, 1, index, out_info);
}

rlx_status rlx_exec_print_dot(const rlx_exec* e, const char* title, char** out_text) {
  if (!e || !out_text) return RLX_INVALID_ARGUMENT;
  *out_text = NULL;
  if (e->vi && rlx_vi_current(e->vi)) return rlx_exec_print_dot(rlx_vi_current(e->vi), title, out_text);
  if (!e->cur)
    return rlx_fail((rlx_error*)&e->err, RLX_FAILED_PRECONDITION,
                    "not compiled yet: bind every symbolic dim first");
  return rlx_graph_print_dot(e->cur->c->g, title, out_text);
}

rlx_status rlx_exec_last_device_ms(const rlx_exec* e, double* out_ms) {
  if (!out_ms) return RLX_INVALID_ARGUMENT;
  *out_ms = -1;
  if (!e) return RLX_INVALID_ARGUMENT;
  double ms = rlx_device_last_run_ms(e->backend);
  if (ms <= -2) return RLX_UNIMPLEMENTED;
  *out_ms = ms;
  return RLX_OK;
}

/* ------------------------------------------------------------ for value_inputs.c */

int32_t rlx_exec_slot_count(const rlx_exec* e, int is_param) {
  return is_param ? e->n_params : e->n_inputs;
}

void rlx_exec_slot_get(const rlx_exec* e, int is_param, int32_t i, rlx_exec_slot* out) {
  const host_slot* h = is_param ? &e->params[i] : &e->inputs[i];
  *out = (rlx_exec_slot){h->name, h->type.dtype, h->type.rank,
                         is_param ? h->type.shape : h->shape, h->data, h->bytes, h->set,
                         h->version};
}

uint64_t rlx_exec_params_version(const rlx_exec* e) { return e->params_version; }
const char* rlx_exec_device_name(const rlx_exec* e) { return e->backend->name; }
const rlx_compile_options* rlx_exec_options(const rlx_exec* e) { return &e->opt; }
const uint8_t* rlx_exec_selection(const rlx_exec* e) { return e->selected; }
rlx_error* rlx_exec_error(const rlx_exec* e) { return (rlx_error*)&e->err; }
const rlx_vi* rlx_exec_value_inputs(const rlx_exec* e) { return e ? e->vi : NULL; }
