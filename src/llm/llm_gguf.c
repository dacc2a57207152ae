/* LLMs from a GGUF file: the config from its metadata, the HF name of each
 * param mapped to the GGUF tensor name, and each tensor checked and
 * converted for its param. The key and tensor names are those of
 * llama.cpp's converter (gguf-py's constants: "{arch}.block_count",
 * "blk.N.attn_q.weight", ...). GGUF dims run fastest first, so an HF
 * [out, in] weight has dims [in, out]; a quantized one stores each of its
 * out rows as in / block blocks, DequantMatMul's W layout as is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/quant.h"
#include "llm/llm.h"

/* ------------------------------------------------------------------ names */

static const struct {
  const char* hf;
  const char* gguf;
} k_layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
}, k_model_names[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

static rlx_status copy_name(const char* name, char* out, size_t cap) {
  int w = snprintf(out, cap, "%s", name);
  return w >= 0 && (size_t)w < cap ? RLX_OK : RLX_INVALID_ARGUMENT;
}

rlx_status llm_gguf_name(const char* hf, char* out, size_t cap) {
  for (size_t i = 0; i < sizeof k_model_names / sizeof k_model_names[0]; i++)
    if (strcmp(hf, k_model_names[i].hf) == 0) return copy_name(k_model_names[i].gguf, out, cap);
  int layer = -1, used = 0;
  if (sscanf(hf, "model.layers.%d.%n", &layer, &used) == 1 && used > 0)
    for (size_t i = 0; i < sizeof k_layer_names / sizeof k_layer_names[0]; i++)
      if (strcmp(hf + used, k_layer_names[i].hf) == 0) {
        int w = snprintf(out, cap, "blk.%d.%s", layer, k_layer_names[i].gguf);
        return w >= 0 && (size_t)w < cap ? RLX_OK : RLX_INVALID_ARGUMENT;
      }
  return copy_name(hf, out, cap);
}

/* ggml type ids (gguf-py's GGMLQuantizationType) of the GGUF schemes. */
static const struct {
  uint32_t ggml;
  rlx_quant_scheme scheme;
} k_ggml_schemes[] = {
    {2, RLX_QUANT_Q4_0},  {3, RLX_QUANT_Q4_1},  {6, RLX_QUANT_Q5_0},  {7, RLX_QUANT_Q5_1},
    {8, RLX_QUANT_Q8_0},  {10, RLX_QUANT_Q2_K}, {11, RLX_QUANT_Q3_K}, {12, RLX_QUANT_Q4_K},
    {13, RLX_QUANT_Q5_K}, {14, RLX_QUANT_Q6_K},
};

int32_t llm_ggml_scheme(uint32_t ggml_type) {
  for (size_t i = 0; i < sizeof k_ggml_schemes / sizeof k_ggml_schemes[0]; i++)
    if (k_ggml_schemes[i].ggml == ggml_type) return (int32_t)k_ggml_schemes[i].scheme;
  return -1;
}

enum { GGML_F32 = 0, GGML_F16 = 1, GGML_BF16 = 30 };

/* ------------------------------------------------------------------ metadata */

typedef struct kv_reader {
  rlx_gguf* g;
  const char* arch;
  rlx_error* err;
  rlx_status st; /* the first failure; later reads are no-ops */
} kv_reader;

/* Index of "{arch}.<suffix>", -1 when absent (or after a failure). */
static int64_t arch_key(kv_reader* r, const char* suffix, char* key, size_t cap) {
  snprintf(key, cap, "%s.%s", r->arch, suffix);
  return r->st == RLX_OK ? rlx_gguf_find_key(r->g, key) : -1;
}

static int64_t kv_int(kv_reader* r, const char* suffix, int64_t fallback, int required) {
  char key[160];
  int64_t i = arch_key(r, suffix, key, sizeof key), v = fallback;
  if (r->st != RLX_OK) return fallback;
  if (i < 0) {
    if (required)
      r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm gguf: missing key '%s'", key);
    return fallback;
  }
  rlx_gguf_type type;
  if (rlx_gguf_kv_type(r->g, i, &type) == RLX_OK && type == RLX_GGUF_ARRAY) {
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm gguf: key '%s' is an array (per-layer values are not supported)", key);
    return fallback;
  }
  if (rlx_gguf_get_i64(r->g, i, &v) != RLX_OK)
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm gguf: key '%s': %s", key,
                     rlx_gguf_last_error(r->g));
  return v;
}

static int32_t kv_int32(kv_reader* r, const char* suffix, int64_t fallback, int required) {
  int64_t v = kv_int(r, suffix, fallback, required);
  if (r->st == RLX_OK && (v < INT32_MIN || v > INT32_MAX))
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm gguf: key '%s.%s' = %lld is out of range",
                     r->arch, suffix, (long long)v);
  return (int32_t)v;
}

static double kv_number(kv_reader* r, const char* suffix, double fallback, int required) {
  char key[160];
  int64_t i = arch_key(r, suffix, key, sizeof key);
  double v = fallback;
  if (r->st != RLX_OK) return fallback;
  if (i < 0) {
    if (required)
      r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm gguf: missing key '%s'", key);
    return fallback;
  }
  if (rlx_gguf_get_f64(r->g, i, &v) != RLX_OK)
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm gguf: key '%s': %s", key,
                     rlx_gguf_last_error(r->g));
  return v;
}

/* A string key's value (NUL-terminated into buf); "" when absent. */
static void kv_text(kv_reader* r, const char* key, char* buf, size_t cap) {
  buf[0] = '\0';
  int64_t i = r->st == RLX_OK ? rlx_gguf_find_key(r->g, key) : -1;
  if (i < 0) return;
  rlx_gguf_string s;
  if (rlx_gguf_get_string(r->g, i, &s) != RLX_OK) {
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm gguf: key '%s': %s", key,
                     rlx_gguf_last_error(r->g));
    return;
  }
  size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
  memcpy(buf, s.data, n);
  buf[n] = '\0';
}

static const struct {
  const char* name;
  rlx_llm_arch arch;
  rlx_rope_style style;
} k_gguf_archs[] = {
    /* the converter permutes Llama's (and Mistral's) q / k rows into
       adjacent pairs; Qwen keeps the checkpoint's halves */
    {"llama", RLX_LLM_LLAMA, RLX_ROPE_GPTJ},
    {"qwen2", RLX_LLM_QWEN2, RLX_ROPE_NEOX},
    {"qwen3", RLX_LLM_QWEN3, RLX_ROPE_NEOX},
    {"gpt2", RLX_LLM_GPT2, RLX_ROPE_NEOX}, /* no RoPE: learned positions */
    {"gemma2", RLX_LLM_GEMMA2, RLX_ROPE_NEOX},
};

static void read_arch(kv_reader* r, rlx_llm_config* c, rlx_rope_style* style, char* arch,
                      size_t cap) {
  kv_text(r, "general.architecture", arch, cap);
  if (r->st != RLX_OK) return;
  if (!arch[0]) {
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm gguf: missing key 'general.architecture'");
    return;
  }
  for (size_t i = 0; i < sizeof k_gguf_archs / sizeof k_gguf_archs[0]; i++)
    if (strcmp(arch, k_gguf_archs[i].name) == 0) {
      c->arch = k_gguf_archs[i].arch;
      *style = k_gguf_archs[i].style;
      return;
    }
  r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                   "llm gguf: general.architecture '%.64s' is not supported (llama, qwen2, qwen3, "
                   "gpt2, gemma2)",
                   arch);
}

static void read_rope_scaling(kv_reader* r, rlx_llm_config* c) {
  char key[160], type[64];
  arch_key(r, "rope.scaling.type", key, sizeof key);
  kv_text(r, key, type, sizeof type);
  c->rope_scaling = RLX_LLM_ROPE_NONE;
  if (r->st != RLX_OK || !type[0] || strcmp(type, "none") == 0) return;
  if (strcmp(type, "linear") != 0) {
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm gguf: key '%s' = '%.32s' is not supported (none, linear)", key, type);
    return;
  }
  c->rope_scaling = RLX_LLM_ROPE_LINEAR;
  c->rope_factor = kv_number(r, "rope.scaling.factor", 0.0, 1);
}

/* Gemma-2 as llama.cpp runs it: softcaps 50 / 30 and window 4096 unless
 * the file says otherwise, every other layer sliding from layer 0
 * (sliding_window_pattern 2), the embedding times sqrtf(hidden) in f32,
 * and the score scale of Google's reference: 1 / sqrt(head_dim), except
 * the 27B (46 layers) whose query_pre_attn_scalar is hidden / heads (the
 * converter writes no key for it). The file's norm weights already hold
 * 1 + w (the converter adds the 1). */
static void read_gemma2(kv_reader* r, rlx_llm_config* c) {
  if (c->sliding_window == 0 && r->st == RLX_OK) c->sliding_window = 4096;
  c->sliding_window_pattern = kv_int32(r, "attention.sliding_window_pattern", 2, 0);
  c->attn_logit_softcap = (float)kv_number(r, "attn_logit_softcapping", 50.0, 0);
  c->final_logit_softcap = (float)kv_number(r, "final_logit_softcapping", 30.0, 0);
  c->embed_scale = sqrtf((float)c->hidden_size);
  double swa_theta = kv_number(r, "rope.freq_base_swa", c->rope_theta, 0);
  if (r->st == RLX_OK && swa_theta != c->rope_theta)
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm gguf: key '%s.rope.freq_base_swa' = %g differs from rope.freq_base (a "
                     "second RoPE table for the sliding layers is not supported)",
                     r->arch, swa_theta);
  int64_t heads = c->num_heads > 0 ? c->num_heads : 1;
  c->query_pre_attn_scalar =
      (float)(c->num_layers == 46 ? c->hidden_size / heads : (int64_t)c->head_dim);
}

static void read_sizes(kv_reader* r, rlx_llm_config* c) {
  c->max_positions = kv_int(r, "context_length", 0, 1);
  c->hidden_size = kv_int(r, "embedding_length", 0, 1);
  c->num_layers = kv_int32(r, "block_count", 0, 1);
  c->intermediate_size = kv_int(r, "feed_forward_length", 0, 1);
  c->num_heads = kv_int32(r, "attention.head_count", 0, 1);
  c->num_kv_heads = kv_int32(r, "attention.head_count_kv", c->num_heads, 0);
  int64_t head_dim = c->num_heads > 0 ? c->hidden_size / c->num_heads : 0;
  c->head_dim = kv_int32(r, "attention.key_length", head_dim, 0);
  int64_t value_dim = kv_int(r, "attention.value_length", c->head_dim, 0);
  if (r->st == RLX_OK && value_dim != c->head_dim)
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm gguf: key '%s.attention.value_length' = %lld differs from key_length "
                     "%d (not supported)", r->arch, (long long)value_dim, (int)c->head_dim);
  c->rope_theta = kv_number(r, "rope.freq_base", 10000.0, 0);
  /* GPT-2's LayerNorm eps shares the field */
  const char* eps_key = c->arch == RLX_LLM_GPT2 ? "attention.layer_norm_epsilon"
                                                 : "attention.layer_norm_rms_epsilon";
  c->rms_norm_eps = (float)kv_number(r, eps_key, 0.0, 1);
  c->sliding_window = kv_int32(r, "attention.sliding_window", 0, 0);
  c->num_experts = kv_int32(r, "expert_count", 0, 0); /* Mixtral: ffn_*_exps tensors */
  c->num_experts_per_tok = kv_int32(r, "expert_used_count", 0, c->num_experts > 0);
  if (c->arch == RLX_LLM_GEMMA2) {
    read_gemma2(r, c);
    return;
  }
  char key[160];
  if (arch_key(r, "attention.sliding_window_pattern", key, sizeof key) >= 0)
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm gguf: key '%s' (per-layer windows) is not supported", key);
}

/* vocab_size from token_embd's shape (dims [hidden, vocab]); the head is
 * tied when the file has no output.weight. */
static void read_tensor_facts(kv_reader* r, rlx_llm_config* c) {
  if (r->st != RLX_OK) return;
  int64_t i = rlx_gguf_find_tensor(r->g, "token_embd.weight");
  rlx_gguf_tensor_info t;
  if (i < 0 || rlx_gguf_tensor(r->g, i, &t) != RLX_OK || t.n_dims != 2) {
    r->st = rlx_fail(r->err, i < 0 ? RLX_NOT_FOUND : RLX_INVALID_ARGUMENT,
                     "llm gguf: tensor 'token_embd.weight' is %s", i < 0 ? "missing" : "not 2-D");
    return;
  }
  c->vocab_size = t.dims[1];
  c->tie_word_embeddings = rlx_gguf_find_tensor(r->g, "output.weight") < 0;
  c->attention_bias = rlx_gguf_find_tensor(r->g, "blk.0.attn_q.bias") >= 0 ||
                      c->arch == RLX_LLM_GPT2;
  c->qk_norm = c->arch == RLX_LLM_QWEN3;
}

/* rope_freqs.weight: f32 [head_dim / 2] frequency divisors. */
static void read_rope_divisors(kv_reader* r, const rlx_llm_config* c, float** divisors) {
  *divisors = NULL;
  int64_t i = r->st == RLX_OK ? rlx_gguf_find_tensor(r->g, "rope_freqs.weight") : -1;
  if (i < 0) return;
  rlx_gguf_tensor_info t;
  if (rlx_gguf_tensor(r->g, i, &t) != RLX_OK || t.type != GGML_F32 || t.n_dims != 1 ||
      t.dims[0] != c->head_dim / 2) {
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT,
                     "llm gguf: tensor 'rope_freqs.weight' is not f32 [head_dim / 2 = %d]",
                     (int)(c->head_dim / 2));
    return;
  }
  *divisors = malloc((size_t)t.bytes);
  if (!*divisors) {
    r->st = rlx_fail(r->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    return;
  }
  memcpy(*divisors, t.data, (size_t)t.bytes);
  for (int64_t k = 0; k < t.dims[0] && r->st == RLX_OK; k++)
    if (!((*divisors)[k] > 0.0f))
      r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT,
                       "llm gguf: rope_freqs.weight[%lld] = %g: expected > 0", (long long)k,
                       (double)(*divisors)[k]);
}

rlx_status llm_gguf_config(rlx_gguf* g, rlx_llm_config* out, float** divisors,
                           rlx_rope_style* style, rlx_error* err) {
  rlx_llm_config c;
  memset(&c, 0, sizeof c);
  char arch[64];
  kv_reader r = {g, arch, err, RLX_OK};
  *divisors = NULL;
  read_arch(&r, &c, style, arch, sizeof arch);
  read_sizes(&r, &c);
  read_rope_scaling(&r, &c);
  read_tensor_facts(&r, &c);
  if (r.st == RLX_OK) r.st = rlx_llm_config_check(&c, err);
  read_rope_divisors(&r, &c, divisors);
  if (r.st != RLX_OK) {
    free(*divisors);
    *divisors = NULL;
    return r.st;
  }
  *out = c;
  return RLX_OK;
}

/* ------------------------------------------------------------------ tensors */

static void dims_text(const int64_t* dims, int32_t n, char* buf, size_t cap) {
  size_t at = (size_t)snprintf(buf, cap, "[");
  for (int32_t d = 0; d < n && at < cap; d++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (at < cap) snprintf(buf + at, cap - at, "]");
}

/* The param's row-major shape in GGUF order (fastest first); a u8 param
 * [out, row_bytes] stands for elements [out, in], in = its dims[0]. */
static int same_shape(const rlx_value_info* p, const rlx_gguf_tensor_info* t) {
  if (t->n_dims != p->rank) return 0;
  for (int32_t d = 0; d < p->rank; d++) {
    if (p->dtype == RLX_U8 && d == p->rank - 1) continue; /* checked through the bytes */
    if (t->dims[p->rank - 1 - d] != p->shape[d]) return 0;
  }
  return 1;
}

static rlx_status check_type(const rlx_value_info* p, const rlx_gguf_tensor_info* t,
                             rlx_error* err) {
  int32_t scheme = llm_ggml_scheme(t->type);
  int is_float = t->type == GGML_F32 || t->type == GGML_F16 || t->type == GGML_BF16;
  if (p->dtype == RLX_F32 && (is_float || scheme >= 0)) return RLX_OK;
  uint64_t param_bytes = 1; /* u8 [rows, row_bytes] or [E, rows, row_bytes] */
  for (int32_t d = 0; d < p->rank; d++) param_bytes *= (uint64_t)p->shape[d];
  if (p->dtype == RLX_U8 && scheme >= 0 && t->bytes == param_bytes) return RLX_OK;
  return rlx_fail(err, RLX_UNIMPLEMENTED,
                  "llm gguf: tensor '%s' is %s: not usable for this param (f32, f16, bf16 or a "
                  "GGUF quantization)", p->name, t->type_name ? t->type_name : "of unknown type");
}

rlx_status llm_gguf_check(rlx_gguf* g, const rlx_value_info* p, rlx_gguf_tensor_info* t,
                          rlx_error* err) {
  int64_t i = rlx_gguf_find_tensor(g, p->name);
  if (i < 0) return rlx_fail(err, RLX_NOT_FOUND, "llm gguf: the file has no tensor '%s'", p->name);
  if (rlx_gguf_tensor(g, i, t) != RLX_OK)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm gguf: %s", rlx_gguf_last_error(g));
  if (!same_shape(p, t)) {
    char have[160], want[160];
    int64_t rev[RLX_MAX_RANK];
    for (int32_t d = 0; d < p->rank; d++) rev[d] = p->shape[p->rank - 1 - d];
    dims_text(t->dims, t->n_dims, have, sizeof have);
    dims_text(rev, p->rank, want, sizeof want);
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "llm gguf: tensor '%s' has dims %s; the config needs %s%s", p->name, have,
                    want, p->dtype == RLX_U8 ? " (dims[0] quantized rows)" : "");
  }
  return check_type(p, t, err);
}

/* Every block of a quantized tensor, dequantized on the host (the
 * embedding: Gather reads floats). */
static void dequantize_all(int32_t scheme, const rlx_gguf_tensor_info* t, float* dst) {
  const rlx_quant_info* q = &rlx_quant_table[scheme];
  int64_t blocks = t->numel / q->block;
  const uint8_t* src = t->data;
  for (int64_t b = 0; b < blocks; b++)
    rlx_dequant_group(scheme, src + b * q->block_bytes, q->block, 0.0f, 0, dst + b * q->block);
}

rlx_status llm_gguf_to_f32(const rlx_gguf_tensor_info* t, float* dst, rlx_error* err) {
  int32_t scheme = llm_ggml_scheme(t->type);
  if (scheme >= 0) {
    dequantize_all(scheme, t, dst);
    return RLX_OK;
  }
  size_t bytes = (size_t)t->bytes;
  if (t->type == GGML_F32) { /* the data may be unaligned: a byte copy */
    memcpy(dst, t->data, bytes);
    return RLX_OK;
  }
  rlx_dtype from = t->type == GGML_F16 ? RLX_F16 : RLX_BF16;
  void* aligned = malloc(bytes ? bytes : 1);
  if (!aligned) return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory for '%s'", t->name);
  memcpy(aligned, t->data, bytes);
  rlx_status s = rlx_dtype_convert(dst, RLX_F32, aligned, from, t->numel);
  free(aligned);
  if (s != RLX_OK) return rlx_fail(err, s, "llm gguf: converting '%s' to f32", t->name);
  return RLX_OK;
}
