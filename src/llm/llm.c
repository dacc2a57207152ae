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
  rlx_error err;
};

void rlx_llm_destroy(rlx_llm* m) {
  if (!m) return;
  rlx_graph_destroy(m->graph);
  rlx_safetensors_close(m->weights);
  rlx_gguf_close(m->gguf);
  free(m->rope_divisors);
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
  llm_source src = {1, RLX_ROPE_NEOX, gguf_scheme_of, m->gguf};
  RLX_RETURN_IF_ERROR(
      llm_gguf_config(m->gguf, &m->config, &m->rope_divisors, &src.rope_style, &m->err));
  RLX_RETURN_IF_ERROR(rlx_llm_build_from(&m->config, o, &src, &m->graph, &m->err));
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

rlx_status rlx_llm_set_params(rlx_llm* m, rlx_exec* e) {
  if (!m) return RLX_INVALID_ARGUMENT;
  m->err.msg[0] = '\0';
  if (!e) return rlx_fail(&m->err, RLX_INVALID_ARGUMENT, "llm: NULL executable");
  llm_scratch sc = {NULL, NULL, 0, 0};
  rlx_status s = RLX_OK;
  for (int32_t i = 0; i < rlx_graph_param_count(m->graph) && s == RLX_OK; i++) {
    rlx_value_info p;
    s = rlx_graph_get_param(m->graph, i, &p);
    if (s == RLX_OK && !is_rope_table(p.name))
      s = m->gguf ? set_gguf_weight(m, e, &p, &sc) : set_weight(m, e, &p, &sc);
  }
  free(sc.f32);
  free(sc.raw);
  return s == RLX_OK && llm_has_rope(&m->config) ? set_tables(m, e) : s;
}
