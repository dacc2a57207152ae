/* Reference-counted compiled parts and the process-wide compile cache (see
 * compile_cache.h). The cache is a small array scanned linearly: it holds
 * tens of entries, and a lookup's cost is dominated by comparing the key. */
#include "runtime/compile_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "rlx.h"

/* ------------------------------------------------------------ compiled parts */

rlx_compiled* rlx_compiled_new(void) {
  rlx_compiled* c = calloc(1, sizeof *c);
  if (c) atomic_init(&c->refs, 1);
  return c;
}

rlx_compiled* rlx_compiled_ref(rlx_compiled* c) {
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  return c;
}

void rlx_compiled_unref(rlx_compiled* c) {
  if (!c) return;
  /* acq_rel: whoever frees sees every other holder's last reads finished. */
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  rlx_step_list_free(&c->steps);
  rlx_plan_free(&c->plan);
  rlx_graph_destroy(c->g);
  free(c->host_node);
  free(c->sizes);
  rlx_graph_destroy(c->derived);
  free(c->hoisted_leaf);
  free(c->hoist_mask);
  free(c);
}

uint64_t rlx_compiled_bytes(const rlx_compiled* c) {
  uint64_t b = sizeof *c + sizeof(int64_t) * (uint64_t)c->n_sizes;
  b += (uint64_t)c->steps.n * sizeof(rlx_step);
  if (!c->g) return b;
  b += (uint64_t)c->g->n_nodes * (sizeof(rlx_node) + 1); /* + host_node */
  b += (uint64_t)c->g->n_values * (sizeof(rlx_value) + 2 * sizeof(uint64_t) + 3 * sizeof(int32_t));
  for (int32_t i = 0; i < c->g->n_nodes; i++) b += c->g->nodes[i].a.data_bytes;
  b += (uint64_t)c->hoist_mask_nodes + sizeof(rlx_tensor) * (uint64_t)c->hoist.values;
  if (!c->derived) return b;
  b += (uint64_t)c->derived->n_nodes * sizeof(rlx_node) + (uint64_t)c->derived->n_values * sizeof(rlx_value);
  for (int32_t i = 0; i < c->derived->n_nodes; i++) b += c->derived->nodes[i].a.data_bytes;
  return b;
}

/* ------------------------------------------------------------ keys */

void rlx_compile_key_add(rlx_compile_key* k, const void* data, size_t n) {
  rlx_buf_add(&k->buf, data, n);
}

void rlx_compile_key_add_i64(rlx_compile_key* k, int64_t v) { rlx_compile_key_add(k, &v, sizeof v); }

void rlx_compile_key_add_str(rlx_compile_key* k, const char* s) {
  /* Length first, so that no two lists of strings run together alike. */
  rlx_compile_key_add_i64(k, s ? (int64_t)strlen(s) : -1);
  if (s) rlx_compile_key_add(k, s, strlen(s));
}

void rlx_compile_key_add_env(rlx_compile_key* k) {
  for (rlx_env_id i = 0; i < RLX_ENV_COUNT; i++) {
    if (rlx_env_table[i].cls == RLX_ENV_CLASS_HARNESS) continue; /* the library never reads them */
    if (i == RLX_ENV_COMPILE_CACHE.id || i == RLX_ENV_COMPILE_CACHE_BYTES.id ||
        i == RLX_ENV_DISPATCH_REPORT.id)
      continue; /* they change what is kept or printed, never what is compiled */
    rlx_env_str_key raw = {i}; /* the raw text of any switch, whatever its kind */
    rlx_compile_key_add_str(k, rlx_env_str(raw));
  }
}

void rlx_compile_key_finish(rlx_compile_key* k) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a, then a final mix */
  for (size_t i = 0; i < k->buf.n; i++) h = (h ^ (uint8_t)k->buf.p[i]) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  k->hash = h;
}

void rlx_compile_key_free(rlx_compile_key* k) {
  rlx_buf_free(&k->buf);
  k->hash = 0;
}

/* ------------------------------------------------------------ the cache */

typedef struct entry {
  rlx_compile_key key;
  rlx_compiled* part;
  uint64_t bytes; /* part + key */
  uint64_t used;  /* clock of the last hit or insert */
} entry;

static struct {
  pthread_mutex_t lock;
  entry* entries;
  int32_t n, cap;
  uint64_t bytes, clock;
  rlx_compile_cache_stats stats;
  int exit_hook;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

int rlx_compile_cache_enabled(void) { return rlx_env_int(RLX_ENV_COMPILE_CACHE) > 0; }

static int same_key(const rlx_compile_key* a, const rlx_compile_key* b) {
  return a->hash == b->hash && a->buf.n == b->buf.n && memcmp(a->buf.p, b->buf.p, a->buf.n) == 0;
}

/* Index of the entry stored under k, or -1. Call with the lock held. */
static int32_t find_locked(const rlx_compile_key* k) {
  for (int32_t i = 0; i < cache.n; i++)
    if (same_key(&cache.entries[i].key, k)) return i;
  return -1;
}

rlx_compiled* rlx_compile_cache_find(const rlx_compile_key* k) {
  if (k->buf.oom) return NULL;
  pthread_mutex_lock(&cache.lock);
  int32_t i = find_locked(k);
  rlx_compiled* c = NULL;
  if (i >= 0) {
    cache.entries[i].used = ++cache.clock;
    c = rlx_compiled_ref(cache.entries[i].part);
    cache.stats.hits++;
  } else {
    cache.stats.misses++;
  }
  pthread_mutex_unlock(&cache.lock);
  return c;
}

/* Frees entry i (the cache's reference and key). Call with the lock held. */
static void drop_locked(int32_t i) {
  entry* en = &cache.entries[i];
  cache.bytes -= en->bytes;
  rlx_compiled_unref(en->part);
  rlx_compile_key_free(&en->key);
  cache.entries[i] = cache.entries[--cache.n];
}

/* Evicts least recently used entries until `more` bytes and one more entry
 * fit. Call with the lock held. */
static void make_room_locked(uint64_t more, int64_t max_entries, uint64_t max_bytes) {
  while (cache.n > 0 && (cache.n + 1 > max_entries || cache.bytes + more > max_bytes)) {
    int32_t oldest = 0;
    for (int32_t i = 1; i < cache.n; i++)
      if (cache.entries[i].used < cache.entries[oldest].used) oldest = i;
    drop_locked(oldest);
    cache.stats.evictions++;
  }
}

static void clear_at_exit(void) { rlx_compile_cache_clear(); }

/* Appends an entry for (k, c), taking a reference on c. 0 without memory.
 * Call with the lock held. */
static int append_locked(const rlx_compile_key* k, rlx_compiled* c, uint64_t bytes) {
  if (cache.n == cache.cap) {
    int32_t cap = cache.cap ? cache.cap * 2 : 16;
    entry* grown = realloc(cache.entries, sizeof(entry) * (size_t)cap);
    if (!grown) return 0;
    cache.entries = grown;
    cache.cap = cap;
  }
  entry* en = &cache.entries[cache.n];
  memset(en, 0, sizeof *en);
  en->key.buf = (rlx_buf){0};
  rlx_buf_add(&en->key.buf, k->buf.p, k->buf.n);
  if (en->key.buf.oom) { rlx_buf_free(&en->key.buf); return 0; }
  en->key.hash = k->hash;
  en->part = rlx_compiled_ref(c);
  en->bytes = bytes;
  en->used = ++cache.clock;
  cache.n++;
  cache.bytes += bytes;
  cache.stats.inserts++;
  if (!cache.exit_hook) cache.exit_hook = atexit(clear_at_exit) == 0;
  return 1;
}

rlx_compiled* rlx_compile_cache_insert(const rlx_compile_key* k, rlx_compiled* c) {
  int64_t max_entries = rlx_env_int(RLX_ENV_COMPILE_CACHE);
  uint64_t max_bytes = rlx_env_size(RLX_ENV_COMPILE_CACHE_BYTES);
  uint64_t bytes = rlx_compiled_bytes(c) + k->buf.n;
  if (k->buf.oom || max_entries <= 0 || bytes > max_bytes) return c; /* not kept */
  pthread_mutex_lock(&cache.lock);
  int32_t i = find_locked(k);
  if (i >= 0) { /* another thread compiled the same variant meanwhile: share its part */
    rlx_compiled* first = rlx_compiled_ref(cache.entries[i].part);
    cache.entries[i].used = ++cache.clock;
    pthread_mutex_unlock(&cache.lock);
    rlx_compiled_unref(c);
    return first;
  }
  make_room_locked(bytes, max_entries, max_bytes);
  append_locked(k, c, bytes); /* out of memory: simply not cached */
  pthread_mutex_unlock(&cache.lock);
  return c;
}

void rlx_compile_cache_clear(void) {
  pthread_mutex_lock(&cache.lock);
  while (cache.n > 0) drop_locked(cache.n - 1);
  free(cache.entries);
  cache.entries = NULL;
  cache.cap = 0;
  cache.bytes = 0;
  pthread_mutex_unlock(&cache.lock);
}

void rlx_compile_cache_get_stats(rlx_compile_cache_stats* out) {
  pthread_mutex_lock(&cache.lock);
  *out = cache.stats;
  out->entries = cache.n;
  out->bytes = cache.bytes;
  pthread_mutex_unlock(&cache.lock);
}

void rlx_compile_cache_reset_stats(void) {
  pthread_mutex_lock(&cache.lock);
  memset(&cache.stats, 0, sizeof cache.stats);
  pthread_mutex_unlock(&cache.lock);
}
