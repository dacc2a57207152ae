/* Compiled variants shared between executables.
 *
 * A variant of an executable (its graph at one binding of the symbols) has
 * two parts. The compiled part (rlx_compiled) is the graph specialised and
 * decomposed for a backend, its memory plan and step list, the per-node host
 * fallback flags, the dispatch counts and the derived graph of hoisted param
 * work (passes/hoist.h): it depends only on the source
 * graph, the binding, the device, strict mode, the device-state pairs and the
 * environment switches, and never changes once built. The per-executable
 * part (executable.c) is the backend exec with its own arena, params, inputs
 * and feeds; the backends' own compiled code (Vulkan/WebGPU pipelines, CUDA
 * modules) is already process-wide in each backend's context.
 *
 * The compiled part is reference-counted: rlx_exec_clone takes a reference
 * instead of recompiling, and a process-wide cache (below) hands the same
 * part to a later rlx_compile of an identical graph. It is freed when the
 * last reference goes. */
#ifndef RLX_RUNTIME_COMPILE_CACHE_H
#define RLX_RUNTIME_COMPILE_CACHE_H

#include "base/buf.h"
#include <stdatomic.h>

#include "passes/hoist.h"
#include "passes/lower.h"

typedef struct rlx_op_counts {
  int32_t native[RLX_OP_COUNT];
  int32_t decomposed[RLX_OP_COUNT];
  int32_t host[RLX_OP_COUNT];
  int32_t fused[RLX_OP_COUNT]; /* nodes absorbed into fused forms (epilogues, residual norms, ElementwiseRegions) */
} rlx_op_counts;

typedef struct rlx_compiled {
  atomic_int refs;
  int32_t n_sizes;
  int64_t* sizes;        /* per symbol of the source graph: the binding */
  rlx_graph* g;          /* specialised + decomposed */
  rlx_plan plan;
  rlx_step_list steps;   /* at the full binding */
  uint8_t* host_node;    /* per node of g: runs on the host fallback */
  rlx_op_counts counts;
  /* Param-only work hoisted out of the run (passes/hoist.h); derived is
   * NULL when nothing was. */
  rlx_graph* derived;        /* params -> hoisted values (outputs in leaf order) */
  rlx_tensor* hoisted_leaf;  /* per hoisted value: its PARAM leaf in g */
  uint8_t* hoist_mask;       /* per node before hoisting: the extent path reapplies it */
  int32_t hoist_mask_nodes;
  rlx_hoist_stats hoist;
  int hoist_off;             /* RLX_NO_HOIST was set */
} rlx_compiled;

/* An empty part with one reference (the caller's), or NULL without memory. */
rlx_compiled* rlx_compiled_new(void);
/* Takes one more reference; returns c. */
rlx_compiled* rlx_compiled_ref(rlx_compiled* c);
/* Drops one reference; the last one frees the part. NULL is ignored. */
void rlx_compiled_unref(rlx_compiled* c);
/* Host bytes the part holds (an estimate, for the cache's bound). */
uint64_t rlx_compiled_bytes(const rlx_compiled* c);

/* ------------------------------------------------------------ keys */

/* Everything that decides a compiled part, as bytes: two parts are
 * interchangeable exactly when their keys are equal. The 64-bit hash only
 * picks candidates; a hit compares every byte. */
typedef struct rlx_compile_key {
  rlx_buf buf;   /* buf.oom: an append failed, the key is unusable */
  uint64_t hash;
} rlx_compile_key;

void rlx_compile_key_add(rlx_compile_key* k, const void* data, size_t n);
void rlx_compile_key_add_str(rlx_compile_key* k, const char* s); /* with its length; NULL differs from "" */
void rlx_compile_key_add_i64(rlx_compile_key* k, int64_t v);
/* Appends the value of every environment switch the library reads (some
 * change what a backend runs natively, e.g. RLX_VK_HOST_OPS). */
void rlx_compile_key_add_env(rlx_compile_key* k);
/* Computes the hash; call once all parts are added. */
void rlx_compile_key_finish(rlx_compile_key* k);
void rlx_compile_key_free(rlx_compile_key* k);

/* ------------------------------------------------------------ the cache */

/* The cache is on unless RLX_COMPILE_CACHE=0 (read at every call). */
int rlx_compile_cache_enabled(void);
/* The part stored under key k with a new reference for the caller, or NULL
 * (a miss). Counts the hit or miss. */
rlx_compiled* rlx_compile_cache_find(const rlx_compile_key* k);
/* Stores c under key k (the cache takes its own reference), evicting the
 * least recently used entries beyond RLX_COMPILE_CACHE entries or
 * RLX_COMPILE_CACHE_BYTES bytes. If another thread stored the same key
 * first, that part is returned (with a reference for the caller) and the
 * caller's c is released; otherwise c is returned. */
rlx_compiled* rlx_compile_cache_insert(const rlx_compile_key* k, rlx_compiled* c);

typedef struct rlx_compile_cache_stats {
  uint64_t hits, misses, inserts, evictions;
  int32_t entries;
  uint64_t bytes; /* held by the entries (keys included) */
} rlx_compile_cache_stats;
void rlx_compile_cache_get_stats(rlx_compile_cache_stats* out);
/* Zeroes the hit/miss/insert/eviction counters (tests). */
void rlx_compile_cache_reset_stats(void);

#endif
