/* rlx_llm_load: a checkpoint folder (config.json + safetensors) to a graph
 * whose params the checkpoint fills. Every param is checked against the
 * checkpoint at load time (present, float, the shape the config implies),
 * so a mismatched folder fails before anything is compiled. Weights are
 * converted to f32 when set: the graph computes in f32 (rlx_compile's
 * precision option turns it to bf16 / f16 compute). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm.h"

struct rlx_llm {
  rlx_llm_config config;
  rlx_graph* graph;
  rlx_safetensors* weights; /* a checkpoint folder, or */
  rlx_gguf* gguf;           /* a GGUF file */
  float* rope_divisors;     /* GGUF's rope_freqs.weight, or NULL */
  int64_t table_rows;
  llm_source src;           /* how the graph was built from a GGUF file */
  /* the cache form's device-state pairs (rlx_llm_cache_compile_options) */
  char* state_names;        /* 2 * num_layers names of STATE_NAME bytes */
  const char** state_inputs;
  int32_t* state_outputs;
  rlx_error err;
};

#define STATE_NAME 32

void rlx_llm_destroy(rlx_llm* m) {
  if (!m) return;
  rlx_graph_destroy(m->graph);
  rlx_safetensors_close(m->weights);
  rlx_gguf_close(m->gguf);
  free(m->rope_divisors);
  free(m->state_names);
  free(m->state_inputs);
  free(m->state_outputs);
  free(m);
}

const char* rlx_llm_last_error(const rlx_llm* m) { return m ? m->err.msg : "llm: NULL model"; }
const rlx_llm_config* rlx_llm_get_config(const rlx_llm* m) { return m ? &m->config : NULL; }
rlx_graph* rlx_llm_graph(rlx_llm* m) { return m ? m->graph : NULL; }

static int is_rope_table(const char* name) {
  return strcmp(name, "rope.cos") == 0 || strcmp(name, "rope.sin") == 0;
}

static void shape_text(const int64_t* shape, int32_t rank, char* buf, size_t cap) {
  size_t at = (size_t)snprintf(buf, cap, "[");
  for (int32_t d = 0; d < rank && at < cap; d++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (at < cap) snprintf(buf + at, cap - at, "]");
}

/* The checkpoint tensor behind param p: present, float, same shape. */
static rlx_status check_weight(rlx_llm* m, const rlx_value_info* p, rlx_safetensors_tensor* t) {
  /* GPT-2 checkpoints saved from GPT2Model (openai-community/gpt2) name
   * their tensors without GPT2LMHeadModel's "transformer." */
  int found = rlx_safetensors_find(m->weights, p->name, t) == RLX_OK;
  if (!found && strncmp(p->name, "transformer.", 12) == 0)
    found = rlx_safetensors_find(m->weights, p->name + 12, t) == RLX_OK;
  if (!found)
    return rlx_fail(&m->err, RLX_NOT_FOUND, "llm: the checkpoint has no tensor '%s'", p->name);
  if (!rlx_dtype_is_float(t->dtype) || t->dtype == RLX_F8E4M3FN || t->dtype == RLX_F8E5M2)
    return rlx_fail(&m->err, RLX_UNIMPLEMENTED,
                    "llm: tensor '%s' is %s (expected f32, f16, bf16 or f64)", p->name,
                    rlx_dtype_name(t->dtype));
  int same = t->rank == p->rank;
  for (int32_t d = 0; same && d < p->rank; d++) same = t->shape[d] == p->shape[d];
  if (!same) {
    char have[160], want[160];
    shape_text(t->shape, t->rank, have, sizeof have);
    shape_text(p->shape, p->rank, want, sizeof want);
    return rlx_fail(&m->err, RLX_INVALID_ARGUMENT,
                    "llm: tensor '%s' has shape %s; the config needs %s", p->name, have, want);
  }
  return RLX_OK;
}

static rlx_status check_weights(rlx_llm* m) {
  for (int32_t i = 0; i < rlx_graph_param_count(m->graph); i++) {
    rlx_value_info p;
    rlx_safetensors_tensor t;
    rlx_gguf_tensor_info gt;
    RLX_RETURN_IF_ERROR(rlx_graph_get_param(m->graph, i, &p));
    if (is_rope_table(p.name)) continue;
    RLX_RETURN_IF_ERROR(m->gguf ? llm_gguf_check(m->gguf, &p, &gt, &m->err)
                                : check_weight(m, &p, &t));
  }
  return RLX_OK;
}

/* The scheme of a GGUF tensor by name, for the builder (-1: float or absent;
 * an absent one is reported by check_weights). */
static int32_t gguf_scheme_of(void* ctx, const char* name) {
  rlx_gguf* g = ctx;
  rlx_gguf_tensor_info t;
  int64_t i = rlx_gguf_find_tensor(g, name);
  if (i < 0 || rlx_gguf_tensor(g, i, &t) != RLX_OK) return -1;
  return llm_ggml_scheme(t.type);
}

static int is_gguf_file(const char* path) {
  unsigned char magic[4] = {0};
  FILE* f = fopen(path, "rb");
  if (!f) return 0;
  size_t n = fread(magic, 1, 4, f);
  fclose(f);
  return n == 4 && memcmp(magic, "GGUF", 4) == 0;
}

static rlx_status load_gguf(rlx_llm* m, const char* path, const rlx_llm_options* o) {
  char* why = NULL;
  rlx_status s = rlx_gguf_open(path, &m->gguf, &why);
  if (s != RLX_OK) {
    rlx_fail(&m->err, s, "%s", why ? why : "llm: out of host memory");
    rlx_free(why);
    return s;
  }
  m->src = (llm_source){1, RLX_ROPE_NEOX, gguf_scheme_of, m->gguf};
  RLX_RETURN_IF_ERROR(
      llm_gguf_config(m->gguf, &m->config, &m->rope_divisors, &m->src.rope_style, &m->err));
  RLX_RETURN_IF_ERROR(rlx_llm_build_from(&m->config, o, &m->src, &m->graph, &m->err));
  m->table_rows = rlx_llm_table_rows(&m->config, o);
  return check_weights(m);
}

static rlx_status load_into(rlx_llm* m, const char* path, const rlx_llm_options* o) {
  if (is_gguf_file(path)) return load_gguf(m, path, o);
  char* why = NULL;
  rlx_status s = rlx_llm_config_load(path, &m->config, &why);
  if (s == RLX_OK) s = rlx_llm_build_graph(&m->config, o, &m->graph, &why);
  if (s == RLX_OK) s = rlx_safetensors_open(path, &m->weights, &why);
  if (s != RLX_OK) {
    rlx_fail(&m->err, s, "%s", why ? why : "llm: out of host memory");
    rlx_free(why);
    return s;
  }
  m->table_rows = rlx_llm_table_rows(&m->config, o);
  return check_weights(m);
}

rlx_status rlx_llm_load(const char* path, const rlx_llm_options* o, rlx_llm** out,
                        char** out_error) {
  rlx_error err = {{0}};
  if (!path || !out)
    return rlx_llm_report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "llm: NULL path or out"), &err,
                          out_error);
  *out = NULL;
  rlx_llm* m = calloc(1, sizeof *m);
  if (!m)
    return rlx_llm_report(rlx_fail(&err, RLX_RESOURCE_EXHAUSTED, "out of host memory"), &err,
                          out_error);
  rlx_status s = load_into(m, path, o);
  if (s != RLX_OK) {
    err = m->err;
    rlx_llm_destroy(m);
    return rlx_llm_report(s, &err, out_error);
  }
  *out = m;
  return rlx_llm_report(RLX_OK, &err, out_error);
}

/* ------------------------------------------------------------------ binding */

static rlx_status set_tables(rlx_llm* m, rlx_exec* e) {
  int64_t n = m->table_rows * (m->config.head_dim / 2);
  float* cos_t = malloc((size_t)n * sizeof *cos_t);
  float* sin_t = malloc((size_t)n * sizeof *sin_t);
  rlx_status s = cos_t && sin_t ? RLX_OK : rlx_fail(&m->err, RLX_RESOURCE_EXHAUSTED,
                                                    "out of host memory for the RoPE tables");
  if (s == RLX_OK)
    s = rlx_llm_rope_tables_from(&m->config, m->rope_divisors, m->table_rows, cos_t, sin_t);
  size_t bytes = (size_t)n * sizeof(float);
  if (s == RLX_OK) s = rlx_exec_set_param(e, "rope.cos", RLX_F32, cos_t, bytes);
  if (s == RLX_OK) s = rlx_exec_set_param(e, "rope.sin", RLX_F32, sin_t, bytes);
  if (s != RLX_OK && !m->err.msg[0])
    rlx_fail(&m->err, s, "llm: setting the RoPE tables: %s", rlx_exec_last_error(e));
  free(cos_t);
  free(sin_t);
  return s;
}

/* Scratch buffers reused across weights. */
typedef struct llm_scratch {
  void* f32;  /* the converted weight */
  void* raw;  /* an aligned copy of the mapped bytes (the mapping's data
                 need not be aligned to its dtype) */
  size_t f32_cap, raw_cap;
} llm_scratch;

static int reserve(void** p, size_t* cap, size_t bytes) {
  if (bytes <= *cap) return 1;
  void* grown = realloc(*p, bytes);
  if (!grown) return 0;
  *p = grown;
  *cap = bytes;
  return 1;
}

/* One weight, copied out of the mapping and converted to f32. */
static rlx_status set_weight(rlx_llm* m, rlx_exec* e, const rlx_value_info* p, llm_scratch* sc) {
  rlx_safetensors_tensor t;
  RLX_RETURN_IF_ERROR(check_weight(m, p, &t));
  int64_t numel = (int64_t)(t.bytes / rlx_dtype_size(t.dtype));
  size_t bytes = (size_t)numel * sizeof(float);
  if (!reserve(&sc->f32, &sc->f32_cap, bytes ? bytes : 1) ||
      !reserve(&sc->raw, &sc->raw_cap, t.bytes ? (size_t)t.bytes : 1))
    return rlx_fail(&m->err, RLX_RESOURCE_EXHAUSTED, "out of host memory for '%s'", p->name);
  memcpy(sc->raw, t.data, (size_t)t.bytes);
  rlx_status s = rlx_dtype_convert(sc->f32, RLX_F32, sc->raw, t.dtype, numel);
  if (s == RLX_OK) s = rlx_exec_set_param(e, p->name, RLX_F32, sc->f32, bytes);
  if (s != RLX_OK)
    return rlx_fail(&m->err, s, "llm: setting '%s': %s", p->name, rlx_exec_last_error(e));
  return RLX_OK;
}

/* One GGUF weight: the raw blocks for a u8 (DequantMatMul) param, else
 * converted or dequantized to f32. */
static rlx_status set_gguf_weight(rlx_llm* m, rlx_exec* e, const rlx_value_info* p,
                                  llm_scratch* sc) {
  rlx_gguf_tensor_info t;
  RLX_RETURN_IF_ERROR(llm_gguf_check(m->gguf, p, &t, &m->err));
  const void* data = t.data;
  size_t bytes = (size_t)t.bytes;
  if (p->dtype != RLX_U8) {
    bytes = (size_t)t.numel * sizeof(float);
    if (!reserve(&sc->f32, &sc->f32_cap, bytes ? bytes : 1))
      return rlx_fail(&m->err, RLX_RESOURCE_EXHAUSTED, "out of host memory for '%s'", p->name);
    RLX_RETURN_IF_ERROR(llm_gguf_to_f32(&t, sc->f32, &m->err));
    data = sc->f32;
  }
  rlx_status s = rlx_exec_set_param(e, p->name, p->dtype, data, bytes);
  if (s != RLX_OK)
    return rlx_fail(&m->err, s, "llm: setting '%s': %s", p->name, rlx_exec_last_error(e));
  return RLX_OK;
}

/* Bytes of param p in the file (what progress counts). */
static int64_t file_bytes(rlx_llm* m, const rlx_value_info* p) {
  if (m->gguf) {
    int64_t i = rlx_gguf_find_tensor(m->gguf, p->name);
    rlx_gguf_tensor_info t;
    return i >= 0 && rlx_gguf_tensor(m->gguf, i, &t) == RLX_OK ? (int64_t)t.bytes : 0;
  }
  rlx_safetensors_tensor t;
  return rlx_safetensors_find(m->weights, p->name, &t) == RLX_OK ? (int64_t)t.bytes : 0;
}

int32_t rlx_llm_weight_count(const rlx_llm* m) {
  return m ? rlx_graph_param_count(m->graph) : 0;
}

rlx_status rlx_llm_set_weights(rlx_llm* m, rlx_exec* e, int32_t first, int32_t count,
                               int64_t* out_done, int64_t* out_total) {
  if (!m) return RLX_INVALID_ARGUMENT;
  m->err.msg[0] = '\0';
  int32_t n = rlx_graph_param_count(m->graph);
  if (!e) return rlx_fail(&m->err, RLX_INVALID_ARGUMENT, "llm: NULL executable");
  if (first < 0 || count < 0 || first > n || count > n - first)
    return rlx_fail(&m->err, RLX_OUT_OF_RANGE, "llm: weights %d .. %d of %d", (int)first,
                    (int)first + (int)count - 1, (int)n);
  llm_scratch sc = {NULL, NULL, 0, 0};
  rlx_status s = RLX_OK;
  int64_t total = 0, done = 0;
  for (int32_t i = 0; i < n && s == RLX_OK; i++) {
    rlx_value_info p;
    s = rlx_graph_get_param(m->graph, i, &p);
    if (s != RLX_OK) break;
    int64_t bytes = is_rope_table(p.name) ? 0 : file_bytes(m, &p);
    total += bytes;
    if (i < first + count) done += bytes;
    if (i < first || i >= first + count) continue;
    if (!is_rope_table(p.name))
      s = m->gguf ? set_gguf_weight(m, e, &p, &sc) : set_weight(m, e, &p, &sc);
    else if (strcmp(p.name, "rope.cos") == 0)
      s = set_tables(m, e); /* both tables */
  }
  free(sc.f32);
  free(sc.raw);
  if (out_done) *out_done = done;
  if (out_total) *out_total = total;
  return s;
}

rlx_status rlx_llm_set_params(rlx_llm* m, rlx_exec* e) {
  return rlx_llm_set_weights(m, e, 0, rlx_llm_weight_count(m), NULL, NULL);
}

/* ------------------------------------------------------------------ the KV-cache form */

rlx_status rlx_llm_build_cache_graph(rlx_llm* m, const rlx_llm_sampling* s, int32_t all_logits,
                                     rlx_graph** out_graph) {
  if (!m) return RLX_INVALID_ARGUMENT;
  m->err.msg[0] = '\0';
  return rlx_llm_build_cache_from(&m->config, m->table_rows, m->gguf ? &m->src : NULL, s,
                                  all_logits, out_graph, &m->err);
}

int64_t rlx_llm_cache_rows(const rlx_llm* m) { return m ? m->table_rows : 0; }

static void cache_name(char* buf, int32_t i) {
  snprintf(buf, STATE_NAME, "%s_cache.%d", i % 2 ? "v" : "k", (int)(i / 2));
}

rlx_status rlx_llm_cache_compile_options(rlx_llm* m, rlx_compile_options* o) {
  if (!m) return RLX_INVALID_ARGUMENT;
  if (!o) return rlx_fail(&m->err, RLX_INVALID_ARGUMENT, "llm: NULL compile options");
  int32_t n = 2 * m->config.num_layers;
  if (!m->state_names) {
    m->state_names = malloc((size_t)n * STATE_NAME);
    m->state_inputs = malloc(sizeof(char*) * (size_t)n);
    m->state_outputs = malloc(sizeof(int32_t) * (size_t)n);
    if (!m->state_names || !m->state_inputs || !m->state_outputs)
      return rlx_fail(&m->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    for (int32_t i = 0; i < n; i++) {
      cache_name(m->state_names + (size_t)i * STATE_NAME, i);
      m->state_inputs[i] = m->state_names + (size_t)i * STATE_NAME;
      m->state_outputs[i] = 1 + i;
    }
  }
  o->state_inputs = m->state_inputs;
  o->state_outputs = m->state_outputs;
  o->n_states = n;
  return RLX_OK;
}

rlx_status rlx_llm_cache_reset(rlx_llm* m, rlx_exec* e) {
  if (!m) return RLX_INVALID_ARGUMENT;
  if (!e) return rlx_fail(&m->err, RLX_INVALID_ARGUMENT, "llm: NULL executable");
  const rlx_llm_config* c = &m->config;
  rlx_dim shape[4] = {1, m->table_rows, c->num_kv_heads, c->head_dim};
  size_t bytes = (size_t)m->table_rows * (size_t)c->num_kv_heads * (size_t)c->head_dim * 4;
  float* zeros = calloc(bytes ? bytes : 1, 1);
  if (!zeros) return rlx_fail(&m->err, RLX_RESOURCE_EXHAUSTED, "out of host memory for the caches");
  rlx_status s = RLX_OK;
  for (int32_t i = 0; i < 2 * c->num_layers && s == RLX_OK; i++) {
    char name[STATE_NAME];
    cache_name(name, i);
    s = rlx_exec_set_input(e, name, RLX_F32, shape, 4, zeros, bytes);
    if (s != RLX_OK) rlx_fail(&m->err, s, "llm: zeroing '%s': %s", name, rlx_exec_last_error(e));
  }
  free(zeros);
  return s;
}

/* The size of e's input "recent", or 0 when it has none. */
static int64_t recent_size(const rlx_exec* e) {
  for (int32_t i = 0; i < rlx_exec_input_count(e); i++) {
    rlx_value_info info;
    if (rlx_exec_get_input(e, i, &info) == RLX_OK && strcmp(info.name, "recent") == 0)
      return info.rank == 1 ? info.shape[0] : 0;
  }
  return 0;
}

/* input_ids, positions and the recent tokens of one run, in one buffer. */
static rlx_status set_run_inputs(rlx_llm* m, rlx_exec* e, int64_t* buf, const int64_t* ids,
                                 int64_t n, int64_t chunk, int64_t start, const int64_t* recent,
                                 int64_t n_recent, int64_t n_slots) {
  int64_t* pos = buf + chunk;
  for (int64_t t = 0; t < chunk; t++) {
    buf[t] = t < n ? ids[t] : 0;
    pos[t] = start + t < m->table_rows ? start + t : m->table_rows - 1; /* padding: any row */
  }
  rlx_dim ids_shape[2] = {1, chunk}, one = 1;
  size_t bytes = (size_t)chunk * sizeof(int64_t);
  rlx_status s = rlx_exec_set_input(e, "input_ids", RLX_I64, ids_shape, 2, buf, bytes);
  if (s == RLX_OK) s = rlx_exec_set_input(e, "positions", RLX_I64, &chunk, 1, pos, bytes);
  if (s == RLX_OK) s = rlx_exec_set_input(e, "start", RLX_I64, &one, 1, &start, sizeof start);
  if (s == RLX_OK) s = rlx_exec_set_input(e, "count", RLX_I64, &one, 1, &n, sizeof n);
  if (s == RLX_OK && n_slots > 0) {
    int64_t* slots = pos + chunk;
    int64_t have = recent && n_recent > 0 ? (n_recent < n_slots ? n_recent : n_slots) : 0;
    for (int64_t i = 0; i < n_slots; i++)
      slots[i] = i < have && recent[n_recent - have + i] >= 0 &&
                         recent[n_recent - have + i] < m->config.vocab_size
                     ? recent[n_recent - have + i]
                     : m->config.vocab_size; /* the empty slot */
    s = rlx_exec_set_input(e, "recent", RLX_I64, &n_slots, 1, slots,
                           (size_t)n_slots * sizeof(int64_t));
  }
  return s;
}

rlx_status rlx_llm_cache_run(rlx_llm* m, rlx_exec* e, const int64_t* ids, int64_t n,
                             int64_t chunk, int64_t start, const int64_t* recent,
                             int64_t n_recent) {
  if (!m) return RLX_INVALID_ARGUMENT;
  m->err.msg[0] = '\0';
  if (!e || !ids || n < 1)
    return rlx_fail(&m->err, RLX_INVALID_ARGUMENT, "llm: NULL executable / ids or n %lld < 1",
                    (long long)n);
  if (chunk == 0) chunk = n;
  if (chunk < n || start < 0 || start + n > m->table_rows)
    return rlx_fail(&m->err, RLX_OUT_OF_RANGE,
                    "llm: %lld tokens at position %lld in a chunk of %lld: the cache holds "
                    "positions 0 .. %lld",
                    (long long)n, (long long)start, (long long)chunk,
                    (long long)m->table_rows - 1);
  int64_t n_slots = recent_size(e);
  int64_t* buf = malloc(sizeof(int64_t) * (size_t)(2 * chunk + n_slots));
  if (!buf) return rlx_fail(&m->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  rlx_status s = set_run_inputs(m, e, buf, ids, n, chunk, start, recent, n_recent, n_slots);
  free(buf);
  if (s == RLX_OK) s = rlx_exec_run(e);
  if (s != RLX_OK) rlx_fail(&m->err, s, "llm: %s", rlx_exec_last_error(e));
  return s;
}
