/* Value inputs at run time: see value_inputs.h. */
#include "runtime/value_inputs.h"

#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "ir/dtype.h"

/* One build of the real graph: its executable and the key it was built for. */
typedef struct vi_variant {
  rlx_exec* exec;
  uint8_t* key;
  size_t key_bytes;
  uint64_t last_used;      /* vi->clock at the last run */
  uint64_t params_version; /* owner's params forwarded up to this version */
  uint8_t* has_input;      /* per owner input: the variant has it (not frozen away) */
  uint8_t* has_param;      /* per owner param: the variant has it (not folded) */
} vi_variant;

struct rlx_vi {
  rlx_rebuild_hook* hook;
  char** value_names; /* the inputs that are frozen into each variant, in discovery order */
  int32_t n_values;
  vi_variant** variants;
  int32_t n_variants, cap_variants;
  vi_variant* cur;
  uint64_t clock;
  int64_t builds;
};

static char* dup_text(const char* s) {
  size_t n = strlen(s) + 1;
  char* d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static void variant_free(vi_variant* v) {
  if (!v) return;
  rlx_exec_destroy(v->exec);
  free(v->key);
  free(v->has_input);
  free(v->has_param);
  free(v);
}

static rlx_status add_value_name(rlx_vi* vi, const char* name, rlx_error* err) {
  char** grown = realloc(vi->value_names, sizeof(char*) * (size_t)(vi->n_values + 1));
  RLX_CHECK_ALLOC(err, grown);
  vi->value_names = grown;
  vi->value_names[vi->n_values] = dup_text(name);
  RLX_CHECK_ALLOC(err, vi->value_names[vi->n_values]);
  vi->n_values++;
  return RLX_OK;
}

rlx_status rlx_vi_create(const rlx_graph* src, const rlx_compile_options* o, rlx_vi** out,
                         rlx_error* err) {
  *out = NULL;
  if (!src->rebuild)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "the graph has 'deferred' outputs (a body built only once some input values "
                    "are known) but no way to build it: compile the graph rlx_onnx_load returned, "
                    "not a copy made from its text");
  if (o && (o->n_states > 0 || o->extent_symbol))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "compile options: device state and an active extent are not supported on a "
                    "graph whose body depends on input values");
  int64_t cap = rlx_env_int(RLX_ENV_VALUE_INPUT_VARIANTS);
  rlx_vi* vi = calloc(1, sizeof *vi);
  RLX_CHECK_ALLOC(err, vi);
  vi->cap_variants = cap < 1 ? 1 : cap > 1024 ? 1024 : (int32_t)cap;
  vi->variants = calloc((size_t)vi->cap_variants, sizeof *vi->variants);
  vi->hook = src->rebuild;
  rlx_rebuild_hook_ref(vi->hook);
  rlx_status s = vi->variants ? RLX_OK : rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  if (s == RLX_OK && vi->hook->first_needed) s = add_value_name(vi, vi->hook->first_needed, err);
  if (s != RLX_OK) {
    rlx_vi_destroy(vi);
    return s;
  }
  *out = vi;
  return RLX_OK;
}

void rlx_vi_destroy(rlx_vi* vi) {
  if (!vi) return;
  for (int32_t i = 0; i < vi->n_variants; i++) variant_free(vi->variants[i]);
  for (int32_t i = 0; i < vi->n_values; i++) free(vi->value_names[i]);
  free(vi->value_names);
  free(vi->variants);
  rlx_rebuild_hook_unref(vi->hook);
  free(vi);
}

/* ------------------------------------------------------------ keys */

static int find_input(const rlx_exec* e, const char* name, rlx_exec_slot* out) {
  int32_t n = rlx_exec_slot_count(e, 0);
  for (int32_t i = 0; i < n; i++) {
    rlx_exec_slot_get(e, 0, i, out);
    if (strcmp(out->name, name) == 0) return i;
  }
  return -1;
}

static int is_value_input(const rlx_vi* vi, const char* name) {
  for (int32_t k = 0; k < vi->n_values; k++)
    if (strcmp(vi->value_names[k], name) == 0) return 1;
  return 0;
}

/* The key: for each value input, dtype, rank, shape and bytes. *out_values
 * (malloc'd) describe the same inputs for the hook. */
static rlx_status make_key(const rlx_exec* e, const rlx_vi* vi, uint8_t** out_key, size_t* out_n,
                           rlx_rebuild_value** out_values) {
  rlx_error* err = rlx_exec_error(e);
  size_t n = 0;
  rlx_rebuild_value* values = calloc((size_t)vi->n_values + 1, sizeof *values);
  RLX_CHECK_ALLOC(err, values);
  for (int32_t k = 0; k < vi->n_values; k++) {
    rlx_exec_slot s;
    if (find_input(e, vi->value_names[k], &s) < 0 || !s.set) {
      free(values);
      return rlx_fail(err, RLX_FAILED_PRECONDITION,
                      "input '%s' was not set (the model's shapes depend on its value)",
                      vi->value_names[k]);
    }
    values[k] = (rlx_rebuild_value){s.name, s.dtype, s.rank, s.shape, s.data, s.bytes};
    n += sizeof(int32_t) * 2 + sizeof(int64_t) * (size_t)s.rank + s.bytes;
  }
  uint8_t* key = malloc(n + 1);
  if (!key) free(values);
  RLX_CHECK_ALLOC(err, key);
  size_t at = 0;
  for (int32_t k = 0; k < vi->n_values; k++) {
    const rlx_rebuild_value* v = &values[k];
    int32_t head[2] = {(int32_t)v->dtype, v->rank};
    memcpy(key + at, head, sizeof head);
    at += sizeof head;
    if (v->rank) memcpy(key + at, v->shape, sizeof(int64_t) * (size_t)v->rank);
    at += sizeof(int64_t) * (size_t)v->rank;
    if (v->bytes) memcpy(key + at, v->data, v->bytes);
    at += v->bytes;
  }
  *out_key = key;
  *out_n = n;
  *out_values = values;
  return RLX_OK;
}

static vi_variant* find_variant(const rlx_vi* vi, const uint8_t* key, size_t n) {
  for (int32_t i = 0; i < vi->n_variants; i++) {
    vi_variant* v = vi->variants[i];
    if (v->key_bytes == n && (n == 0 || memcmp(v->key, key, n) == 0)) return v;
  }
  return NULL;
}

/* ------------------------------------------------------------ building */

/* Which of the owner's inputs and params the variant still has. */
static rlx_status map_leaves(const rlx_exec* e, vi_variant* v) {
  rlx_error* err = rlx_exec_error(e);
  for (int is_param = 0; is_param < 2; is_param++) {
    int32_t n = rlx_exec_slot_count(e, is_param);
    uint8_t* has = calloc((size_t)n + 1, 1);
    RLX_CHECK_ALLOC(err, has);
    if (is_param) v->has_param = has;
    else v->has_input = has;
    int32_t inner_n = is_param ? rlx_exec_param_count(v->exec) : rlx_exec_input_count(v->exec);
    for (int32_t j = 0; j < inner_n; j++) {
      rlx_value_info info;
      rlx_status s = is_param ? rlx_exec_get_param(v->exec, j, &info)
                              : rlx_exec_get_input(v->exec, j, &info);
      if (s != RLX_OK) continue;
      for (int32_t i = 0; i < n; i++) {
        rlx_exec_slot slot;
        rlx_exec_slot_get(e, is_param, i, &slot);
        if (strcmp(slot.name, info.name) == 0) has[i] = 1;
      }
    }
  }
  return RLX_OK;
}

/* The real graph for `values`; FAILED_PRECONDITION with *out_needed when
 * the hook names another input that must have a value. */
static rlx_status build_graph(const rlx_exec* e, rlx_vi* vi, const rlx_rebuild_value* values,
                              rlx_graph** out, char** out_needed) {
  rlx_error* err = rlx_exec_error(e);
  *out_needed = NULL;
  vi->builds++;
  return vi->hook->build(vi->hook, values, vi->n_values, out, out_needed, err);
}

static rlx_status compile_variant(const rlx_exec* e, rlx_graph* g, vi_variant** out) {
  rlx_error* err = rlx_exec_error(e);
  rlx_compile_options o = *rlx_exec_options(e);
  o.symbol_names = NULL; /* bindings of the deferred graph's symbols do not carry over */
  o.symbol_sizes = NULL;
  o.n_symbols = 0;
  vi_variant* v = calloc(1, sizeof *v);
  RLX_CHECK_ALLOC(err, v);
  rlx_status s = rlx_compile(g, rlx_exec_device_name(e), &o, &v->exec);
  if (s != RLX_OK) rlx_fail(err, s, "compiling for the given input values: %s",
                            rlx_graph_last_error(g));
  if (s == RLX_OK) s = map_leaves(e, v);
  if (s != RLX_OK) {
    variant_free(v);
    return s;
  }
  *out = v;
  return RLX_OK;
}

/* Keeps v, evicting the least recently used variant when full. */
static void keep_variant(rlx_vi* vi, vi_variant* v) {
  if (vi->n_variants == vi->cap_variants) {
    int32_t lru = 0;
    for (int32_t i = 1; i < vi->n_variants; i++)
      if (vi->variants[i]->last_used < vi->variants[lru]->last_used) lru = i;
    if (vi->variants[lru] == vi->cur) vi->cur = NULL;
    variant_free(vi->variants[lru]);
    vi->variants[lru] = vi->variants[--vi->n_variants];
  }
  vi->variants[vi->n_variants++] = v;
}

/* The variant for the current values: found by key, or built (learning
 * further value inputs from the hook as it names them). */
static rlx_status variant_for_values(rlx_exec* e, rlx_vi* vi, vi_variant** out) {
  rlx_error* err = rlx_exec_error(e);
  for (;;) {
    uint8_t* key = NULL;
    size_t n = 0;
    rlx_rebuild_value* values = NULL;
    RLX_RETURN_IF_ERROR(make_key(e, vi, &key, &n, &values));
    vi_variant* v = find_variant(vi, key, n);
    if (v) {
      free(key);
      free(values);
      *out = v;
      return RLX_OK;
    }
    rlx_graph* g = NULL;
    char* needed = NULL;
    rlx_status s = build_graph(e, vi, values, &g, &needed);
    free(values);
    rlx_exec_slot slot;
    if (s == RLX_FAILED_PRECONDITION && needed && !is_value_input(vi, needed) &&
        find_input(e, needed, &slot) >= 0) {
      free(key);
      s = add_value_name(vi, needed, err); /* the key grows: look again */
      free(needed);
      RLX_RETURN_IF_ERROR(s);
      continue;
    }
    free(needed);
    if (s == RLX_OK) s = compile_variant(e, g, &v);
    rlx_graph_destroy(g);
    if (s != RLX_OK) {
      free(key);
      return s;
    }
    v->key = key;
    v->key_bytes = n;
    keep_variant(vi, v);
    *out = v;
    return RLX_OK;
  }
}

/* ------------------------------------------------------------ running */

static rlx_status inner_fail(rlx_exec* e, const vi_variant* v, rlx_status s) {
  return rlx_fail(rlx_exec_error(e), s, "%s", rlx_exec_last_error(v->exec));
}

/* Params set since the variant last got them (a variant built later gets
 * every param set so far). */
static rlx_status forward_params(rlx_exec* e, vi_variant* v) {
  uint64_t version = rlx_exec_params_version(e);
  if (v->params_version == version && version != 0) return RLX_OK;
  int32_t n = rlx_exec_slot_count(e, 1);
  for (int32_t i = 0; i < n; i++) {
    rlx_exec_slot p;
    rlx_exec_slot_get(e, 1, i, &p);
    if (!p.set || !v->has_param[i] || (v->params_version && p.version <= v->params_version))
      continue;
    rlx_status s = rlx_exec_set_param(v->exec, p.name, p.dtype, p.data, p.bytes);
    if (s != RLX_OK) return inner_fail(e, v, s);
  }
  v->params_version = version;
  return RLX_OK;
}

/* Every input set on the owner that the variant still has (the value
 * inputs are constants in it). */
static rlx_status forward_inputs(rlx_exec* e, rlx_vi* vi, vi_variant* v) {
  int32_t n = rlx_exec_slot_count(e, 0);
  for (int32_t i = 0; i < n; i++) {
    rlx_exec_slot in;
    rlx_exec_slot_get(e, 0, i, &in);
    if (!in.set || !v->has_input[i] || is_value_input(vi, in.name)) continue;
    rlx_status s = rlx_exec_set_input(v->exec, in.name, in.dtype, in.shape, in.rank, in.data,
                                      in.bytes);
    if (s != RLX_OK) return inner_fail(e, v, s);
  }
  return RLX_OK;
}

static rlx_status forward_selection(rlx_exec* e, vi_variant* v) {
  int32_t n = rlx_exec_output_count(v->exec);
  const uint8_t* sel = rlx_exec_selection(e);
  int32_t* picked = malloc(sizeof(int32_t) * (size_t)(n + 1));
  RLX_CHECK_ALLOC(rlx_exec_error(e), picked);
  int32_t k = 0;
  for (int32_t i = 0; i < n; i++)
    if (sel[i]) picked[k++] = i;
  rlx_status s = rlx_exec_select_outputs(v->exec, picked, k == n ? -1 : k);
  free(picked);
  return s == RLX_OK ? RLX_OK : inner_fail(e, v, s);
}

rlx_status rlx_vi_run(rlx_exec* e, rlx_vi* vi) {
  vi_variant* v = NULL;
  RLX_RETURN_IF_ERROR(variant_for_values(e, vi, &v));
  v->last_used = ++vi->clock;
  vi->cur = v;
  RLX_RETURN_IF_ERROR(forward_params(e, v));
  RLX_RETURN_IF_ERROR(forward_inputs(e, vi, v));
  RLX_RETURN_IF_ERROR(forward_selection(e, v));
  rlx_status s = rlx_exec_run(v->exec);
  return s == RLX_OK ? RLX_OK : inner_fail(e, v, s);
}

const rlx_exec* rlx_vi_current(const rlx_vi* vi) { return vi && vi->cur ? vi->cur->exec : NULL; }
int32_t rlx_vi_variant_count(const rlx_vi* vi) { return vi ? vi->n_variants : 0; }
int64_t rlx_vi_build_count(const rlx_vi* vi) { return vi ? vi->builds : 0; }

/* ------------------------------------------------------------ clones */

static rlx_status clone_variant(const vi_variant* v, int32_t n_inputs, int32_t n_params,
                                vi_variant** out, rlx_error* err) {
  vi_variant* c = calloc(1, sizeof *c);
  RLX_CHECK_ALLOC(err, c);
  c->key = malloc(v->key_bytes + 1);
  c->has_input = malloc((size_t)n_inputs + 1);
  c->has_param = malloc((size_t)n_params + 1);
  rlx_status s = c->key && c->has_input && c->has_param
                     ? rlx_exec_clone(v->exec, &c->exec)
                     : rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  if (s != RLX_OK) {
    if (!c->exec && c->key && c->has_input && c->has_param)
      rlx_fail(err, s, "%s", rlx_exec_last_error(v->exec));
    variant_free(c);
    return s;
  }
  memcpy(c->key, v->key, v->key_bytes);
  c->key_bytes = v->key_bytes;
  memcpy(c->has_input, v->has_input, (size_t)n_inputs);
  memcpy(c->has_param, v->has_param, (size_t)n_params);
  c->last_used = v->last_used;
  c->params_version = v->params_version; /* the clone's params are the same, same versions */
  *out = c;
  return RLX_OK;
}

rlx_status rlx_vi_clone(const rlx_vi* vi, const rlx_exec* owner, rlx_vi** out, rlx_error* err) {
  *out = NULL;
  rlx_vi* c = calloc(1, sizeof *c);
  RLX_CHECK_ALLOC(err, c);
  c->hook = vi->hook;
  rlx_rebuild_hook_ref(c->hook);
  c->cap_variants = vi->cap_variants;
  c->clock = vi->clock;
  c->variants = calloc((size_t)c->cap_variants, sizeof *c->variants);
  rlx_status s = c->variants ? RLX_OK : rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (int32_t k = 0; s == RLX_OK && k < vi->n_values; k++)
    s = add_value_name(c, vi->value_names[k], err);
  int32_t ni = rlx_exec_slot_count(owner, 0), np = rlx_exec_slot_count(owner, 1);
  for (int32_t i = 0; s == RLX_OK && i < vi->n_variants; i++) {
    s = clone_variant(vi->variants[i], ni, np, &c->variants[i], err);
    if (s == RLX_OK) c->n_variants++;
  }
  if (s != RLX_OK) {
    rlx_vi_destroy(c);
    return s;
  }
  *out = c;
  return RLX_OK;
}
