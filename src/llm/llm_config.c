/* rlx_llm_config from a Hugging Face config.json, parsed with json-c (the
 * JSON library the safetensors reader uses, see src/io/safetensors.c). The
 * defaults are those of the architectures' published configs: fields a
 * config.json may leave out take them; everything else is required. */
#include "llm/llm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"

#ifdef RLX_HAVE_JSONC
#include <json.h>
#endif

rlx_status rlx_llm_report(rlx_status s, const rlx_error* err, char** out) {
  if (!out) return s;
  *out = NULL;
  if (s == RLX_OK) return s;
  size_t n = strlen(err->msg) + 1;
  *out = malloc(n);
  if (*out) memcpy(*out, err->msg, n);
  return s;
}

/* ------------------------------------------------------------------ checks */

/* Bounds far above real models (Llama 3 405B: hidden 16384, 126 layers,
 * vocab 128256), low enough that products of them stay in int64. */
#define LLM_MAX_DIM (1ll << 20)
#define LLM_MAX_VOCAB (1ll << 24)
#define LLM_MAX_LAYERS 1024

static rlx_status bad(rlx_error* err, const char* field, long long v, const char* why) {
  return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: %s = %lld: %s", field, v, why);
}

static rlx_status check_rope(const rlx_llm_config* c, rlx_error* err) {
  if (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: rope_theta = %g: expected > 1",
                    c->rope_theta);
  if (c->rope_scaling == RLX_LLM_ROPE_NONE) return RLX_OK;
  if (!(c->rope_factor > 0.0) || !isfinite(c->rope_factor))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: rope_scaling.factor = %g: expected > 0",
                    c->rope_factor);
  if (c->rope_scaling != RLX_LLM_ROPE_LLAMA3) return RLX_OK;
  if (!(c->rope_low_freq_factor > 0.0) || !(c->rope_high_freq_factor > c->rope_low_freq_factor) ||
      !isfinite(c->rope_high_freq_factor) || c->rope_original_max_positions < 1)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "llm config: rope_scaling llama3 needs 0 < low_freq_factor (%g) < "
                    "high_freq_factor (%g) and original_max_position_embeddings (%lld) >= 1",
                    c->rope_low_freq_factor, c->rope_high_freq_factor,
                    (long long)c->rope_original_max_positions);
  return RLX_OK;
}

/* Gemma-2's extras: caps and scales finite and >= 0 (0 = off). */
static rlx_status check_extras(const rlx_llm_config* c, rlx_error* err) {
  const struct {
    const char* name;
    float v;
  } f[] = {{"attn_logit_softcapping", c->attn_logit_softcap},
           {"final_logit_softcapping", c->final_logit_softcap},
           {"query_pre_attn_scalar", c->query_pre_attn_scalar},
           {"embed_scale", c->embed_scale}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (!(f[i].v >= 0.0f) || !isfinite(f[i].v))
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: %s = %g: expected >= 0 (0 = off)",
                      f[i].name, (double)f[i].v);
  if (c->sliding_window_pattern < 0 || c->sliding_window_pattern > LLM_MAX_LAYERS)
    return bad(err, "sliding_window_pattern", c->sliding_window_pattern, "expected 0 .. 1024");
  return RLX_OK;
}

rlx_status rlx_llm_config_check(const rlx_llm_config* c, rlx_error* err) {
  if ((unsigned)c->arch > RLX_LLM_GEMMA2) return bad(err, "arch", c->arch, "unknown");
  RLX_RETURN_IF_ERROR(check_extras(c, err));
  if (c->vocab_size < 1 || c->vocab_size > LLM_MAX_VOCAB)
    return bad(err, "vocab_size", c->vocab_size, "expected 1 .. 2^24");
  if (c->hidden_size < 1 || c->hidden_size > LLM_MAX_DIM)
    return bad(err, "hidden_size", c->hidden_size, "expected 1 .. 2^20");
  if (c->intermediate_size < 1 || c->intermediate_size > LLM_MAX_DIM)
    return bad(err, "intermediate_size", c->intermediate_size, "expected 1 .. 2^20");
  if (c->num_layers < 1 || c->num_layers > LLM_MAX_LAYERS)
    return bad(err, "num_hidden_layers", c->num_layers, "expected 1 .. 1024");
  if (c->num_heads < 1 || c->num_heads > 4096)
    return bad(err, "num_attention_heads", c->num_heads, "expected 1 .. 4096");
  if (c->num_kv_heads < 1 || c->num_heads % c->num_kv_heads != 0)
    return bad(err, "num_key_value_heads", c->num_kv_heads,
               "expected a divisor of num_attention_heads");
  if (c->head_dim < 2 || c->head_dim % 2 != 0 || c->head_dim > 4096)
    return bad(err, "head_dim", c->head_dim, "expected an even number 2 .. 4096");
  if (c->sliding_window < 0) return bad(err, "sliding_window", c->sliding_window, "negative");
  if (c->num_experts < 0 || c->num_experts > 1024)
    return bad(err, "num_local_experts", c->num_experts, "expected 0 .. 1024");
  if (c->num_experts > 0 &&
      (c->num_experts_per_tok < 1 || c->num_experts_per_tok > c->num_experts))
    return bad(err, "num_experts_per_tok", c->num_experts_per_tok,
               "expected 1 .. num_local_experts");
  if (c->max_positions < 1) return bad(err, "max_position_embeddings", c->max_positions, "< 1");
  if (!(c->rms_norm_eps > 0.0f) || !isfinite(c->rms_norm_eps))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: rms_norm_eps = %g: expected > 0",
                    (double)c->rms_norm_eps);
  return check_rope(c, err);
}

#ifdef RLX_HAVE_JSONC

/* ------------------------------------------------------------------ fields */

typedef struct reader {
  json_object* root;
  rlx_error* err;
  rlx_status st; /* the first failure; later reads are no-ops */
} reader;

/* The field, or NULL when absent or JSON null (both mean "default"). */
static json_object* field(json_object* obj, const char* name) {
  json_object* v = NULL;
  if (!json_object_object_get_ex(obj, name, &v) || json_object_is_type(v, json_type_null))
    return NULL;
  return v;
}

static int64_t get_int(reader* r, json_object* obj, const char* name, int64_t fallback,
                       int required) {
  if (r->st != RLX_OK) return fallback;
  json_object* v = field(obj, name);
  if (!v) {
    if (required)
      r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm config: missing \"%s\"", name);
    return fallback;
  }
  if (!json_object_is_type(v, json_type_int)) {
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm config: \"%s\" is not an integer", name);
    return fallback;
  }
  return json_object_get_int64(v);
}

static double get_number(reader* r, json_object* obj, const char* name, double fallback) {
  if (r->st != RLX_OK) return fallback;
  json_object* v = field(obj, name);
  if (!v) return fallback;
  if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) {
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm config: \"%s\" is not a number", name);
    return fallback;
  }
  return json_object_get_double(v);
}

static int get_bool(reader* r, json_object* obj, const char* name, int fallback) {
  if (r->st != RLX_OK) return fallback;
  json_object* v = field(obj, name);
  if (!v) return fallback;
  if (!json_object_is_type(v, json_type_boolean)) {
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm config: \"%s\" is not true/false", name);
    return fallback;
  }
  return json_object_get_boolean(v);
}

static const char* get_string(json_object* obj, const char* name) {
  json_object* v = field(obj, name);
  return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* Sizes read as int64 but stored in int32 fields: out of range is refused
 * here rather than wrapped. */
static int32_t narrow(reader* r, const char* name, int64_t v) {
  if (r->st == RLX_OK && (v < INT32_MIN || v > INT32_MAX))
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm config: \"%s\" = %lld is out of range",
                     name, (long long)v);
  return (int32_t)v;
}

/* ------------------------------------------------------------------ architecture */

static const struct {
  const char* model_type;
  const char* class_name;
  rlx_llm_arch arch;
} k_archs[] = {
    {"llama", "LlamaForCausalLM", RLX_LLM_LLAMA},
    {"qwen2", "Qwen2ForCausalLM", RLX_LLM_QWEN2},
    {"qwen3", "Qwen3ForCausalLM", RLX_LLM_QWEN3},
    {"mistral", "MistralForCausalLM", RLX_LLM_MISTRAL},
    {"gpt2", "GPT2LMHeadModel", RLX_LLM_GPT2},
    {"gemma2", "Gemma2ForCausalLM", RLX_LLM_GEMMA2},
    /* Mistral with experts (num_local_experts, required) */
    {"mixtral", "MixtralForCausalLM", RLX_LLM_MISTRAL},
};

static void read_arch(reader* r, rlx_llm_config* c) {
  const char* type = get_string(r->root, "model_type");
  const char* cls = NULL;
  json_object* list = field(r->root, "architectures");
  if (list && json_object_is_type(list, json_type_array) && json_object_array_length(list) > 0 &&
      json_object_is_type(json_object_array_get_idx(list, 0), json_type_string))
    cls = json_object_get_string(json_object_array_get_idx(list, 0));
  for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
    if ((type && strcmp(type, k_archs[i].model_type) == 0) ||
        (!type && cls && strcmp(cls, k_archs[i].class_name) == 0)) {
      c->arch = k_archs[i].arch;
      return;
    }
  r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                   "llm config: model_type '%.64s' (architectures[0] '%.64s') is not supported "
                   "(llama, qwen2, qwen3, mistral, mixtral, gpt2, gemma2)",
                   type ? type : "(none)", cls ? cls : "(none)");
}

/* rope_scaling: null, or {"rope_type" (or "type"): "default" | "linear" |
 * "llama3", "factor", ...}. */
static void read_rope_scaling(reader* r, rlx_llm_config* c) {
  json_object* rs = field(r->root, "rope_scaling");
  c->rope_scaling = RLX_LLM_ROPE_NONE;
  if (!rs || r->st != RLX_OK) return;
  if (!json_object_is_type(rs, json_type_object)) {
    r->st = rlx_fail(r->err, RLX_INVALID_ARGUMENT, "llm config: \"rope_scaling\" is not an object");
    return;
  }
  const char* type = get_string(rs, "rope_type");
  if (!type) type = get_string(rs, "type");
  if (!type || strcmp(type, "default") == 0) return;
  if (strcmp(type, "linear") == 0) c->rope_scaling = RLX_LLM_ROPE_LINEAR;
  else if (strcmp(type, "llama3") == 0) c->rope_scaling = RLX_LLM_ROPE_LLAMA3;
  else {
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm config: rope_scaling type '%.64s' is not supported (linear, llama3)",
                     type);
    return;
  }
  c->rope_factor = get_number(r, rs, "factor", 0.0);
  c->rope_low_freq_factor = get_number(r, rs, "low_freq_factor", 1.0);
  c->rope_high_freq_factor = get_number(r, rs, "high_freq_factor", 4.0);
  c->rope_original_max_positions =
      get_int(r, rs, "original_max_position_embeddings", 8192, c->rope_scaling == RLX_LLM_ROPE_LLAMA3);
}

/* The MLP's activation: SiLU for the Llama family; the tanh approximation
 * of GELU for GPT-2 (activation_function "gelu_new") and Gemma-2
 * (hidden_activation "gelu_pytorch_tanh", the same formula). */
static void check_activation(reader* r, const rlx_llm_config* c) {
  const char* key = "hidden_act";
  if (c->arch == RLX_LLM_GPT2) key = "activation_function";
  if (c->arch == RLX_LLM_GEMMA2 && get_string(r->root, "hidden_activation"))
    key = "hidden_activation";
  const char* act = get_string(r->root, key);
  int tanh_gelu = c->arch == RLX_LLM_GPT2 || c->arch == RLX_LLM_GEMMA2;
  int ok = !act || (tanh_gelu ? strcmp(act, "gelu_new") == 0 ||
                                    strcmp(act, "gelu_pytorch_tanh") == 0
                              : strcmp(act, "silu") == 0);
  if (r->st == RLX_OK && !ok)
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED, "llm config: %s '%.32s' is not supported (%s)",
                     key, act, tanh_gelu ? "gelu_new, gelu_pytorch_tanh" : "silu");
}

/* What the builders do not implement is refused, not silently ignored. */
static void refuse_unsupported(reader* r, const rlx_llm_config* c) {
  check_activation(r, c);
  int qwen = c->arch == RLX_LLM_QWEN2 || c->arch == RLX_LLM_QWEN3;
  if (qwen && get_bool(r, r->root, "use_sliding_window", 0) && r->st == RLX_OK)
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm config: Qwen's use_sliding_window (per-layer windows) is not supported");
}

static void read_sizes(reader* r, rlx_llm_config* c) {
  json_object* o = r->root;
  c->vocab_size = get_int(r, o, "vocab_size", 0, 1);
  c->hidden_size = get_int(r, o, "hidden_size", 0, 1);
  c->intermediate_size = get_int(r, o, "intermediate_size", 0, 1);
  c->num_layers = narrow(r, "num_hidden_layers", get_int(r, o, "num_hidden_layers", 0, 1));
  c->num_heads = narrow(r, "num_attention_heads", get_int(r, o, "num_attention_heads", 0, 1));
  c->num_kv_heads =
      narrow(r, "num_key_value_heads", get_int(r, o, "num_key_value_heads", c->num_heads, 0));
  int64_t head_dim = c->num_heads > 0 ? c->hidden_size / c->num_heads : 0;
  c->head_dim = narrow(r, "head_dim", get_int(r, o, "head_dim", head_dim, 0));
  c->max_positions = get_int(r, o, "max_position_embeddings", 2048, 0);
}

/* GPT-2's config names its sizes n_*; every layer is causal over the
 * whole context, the head always tied to wte. */
static void read_gpt2(reader* r, rlx_llm_config* c) {
  json_object* o = r->root;
  c->vocab_size = get_int(r, o, "vocab_size", 0, 1);
  c->hidden_size = get_int(r, o, "n_embd", 0, 1);
  c->num_layers = narrow(r, "n_layer", get_int(r, o, "n_layer", 0, 1));
  c->num_heads = narrow(r, "n_head", get_int(r, o, "n_head", 0, 1));
  c->num_kv_heads = c->num_heads;
  c->head_dim = c->num_heads > 0 ? (int32_t)(c->hidden_size / c->num_heads) : 0;
  /* 4 * n_embd by default; a huge n_embd is refused by the range check
   * below, not multiplied past int64 here */
  int64_t wide = c->hidden_size > 0 && c->hidden_size <= LLM_MAX_DIM ? 4 * c->hidden_size : 0;
  c->intermediate_size = get_int(r, o, "n_inner", wide, 0);
  c->max_positions = get_int(r, o, "n_positions", get_int(r, o, "n_ctx", 1024, 0), 0);
  c->rms_norm_eps = (float)get_number(r, o, "layer_norm_epsilon", 1e-5);
  c->rope_theta = 10000.0; /* no RoPE: learned positions */
  c->tie_word_embeddings = 1;
  c->attention_bias = 1;
  if (r->st == RLX_OK && c->num_heads > 0 && c->hidden_size % c->num_heads != 0)
    r->st = bad(r->err, "n_head", c->num_heads, "does not divide n_embd");
  if (r->st == RLX_OK && (!get_bool(r, o, "scale_attn_weights", 1) ||
                          get_bool(r, o, "scale_attn_by_inverse_layer_idx", 0)))
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm config: GPT-2 scale_attn_weights false or "
                     "scale_attn_by_inverse_layer_idx true is not supported");
  check_activation(r, c);
}

/* A number that JSON null turns off (0): Gemma-2's softcaps. */
static double get_nullable(reader* r, json_object* obj, const char* name, double fallback) {
  json_object* v = NULL;
  if (json_object_object_get_ex(obj, name, &v) && json_object_is_type(v, json_type_null))
    return 0.0;
  return get_number(r, obj, name, fallback);
}

/* x rounded to the checkpoint's dtype, as HF multiplies in it. */
static float round_to_dtype(float x, const char* torch_dtype) {
  rlx_dtype d = RLX_F32;
  if (torch_dtype && strcmp(torch_dtype, "bfloat16") == 0) d = RLX_BF16;
  if (torch_dtype && strcmp(torch_dtype, "float16") == 0) d = RLX_F16;
  if (d == RLX_F32) return x;
  uint16_t half = 0;
  float back = x;
  if (rlx_dtype_convert(&half, d, &x, RLX_F32, 1) != RLX_OK ||
      rlx_dtype_convert(&back, RLX_F32, &half, d, 1) != RLX_OK)
    return x;
  return back;
}

/* layer_types, when given, must be the alternation the builder makes. */
static void check_layer_types(reader* r, const rlx_llm_config* c) {
  json_object* list = field(r->root, "layer_types");
  if (!list || r->st != RLX_OK) return;
  int ok = json_object_is_type(list, json_type_array) &&
           json_object_array_length(list) == (size_t)c->num_layers;
  for (int32_t i = 0; ok && i < c->num_layers; i++) {
    json_object* t = json_object_array_get_idx(list, (size_t)i);
    const char* want = i % 2 == 0 ? "sliding_attention" : "full_attention";
    ok = json_object_is_type(t, json_type_string) && strcmp(json_object_get_string(t), want) == 0;
  }
  if (!ok)
    r->st = rlx_fail(r->err, RLX_UNIMPLEMENTED,
                     "llm config: layer_types other than sliding / full alternating from layer "
                     "0 are not supported");
}

/* Gemma-2: the published defaults (Gemma2Config) for what a config leaves out. */
static void read_gemma2(reader* r, rlx_llm_config* c) {
  json_object* o = r->root;
  c->rope_theta = get_number(r, o, "rope_theta", 10000.0);
  c->rms_norm_eps = (float)get_number(r, o, "rms_norm_eps", 1e-6);
  c->tie_word_embeddings = get_bool(r, o, "tie_word_embeddings", 1);
  c->attention_bias = get_bool(r, o, "attention_bias", 0);
  c->sliding_window = narrow(r, "sliding_window", get_int(r, o, "sliding_window", 4096, 0));
  c->sliding_window_pattern = 2;
  c->attn_logit_softcap = (float)get_nullable(r, o, "attn_logit_softcapping", 50.0);
  c->final_logit_softcap = (float)get_nullable(r, o, "final_logit_softcapping", 30.0);
  c->query_pre_attn_scalar = (float)get_number(r, o, "query_pre_attn_scalar", 256.0);
  const char* dtype = get_string(o, "torch_dtype");
  if (!dtype) dtype = get_string(o, "dtype");
  c->embed_scale = round_to_dtype(sqrtf((float)c->hidden_size), dtype);
  check_layer_types(r, c);
  check_activation(r, c);
  read_rope_scaling(r, c);
}

static void read_features(reader* r, rlx_llm_config* c) {
  json_object* o = r->root;
  if (c->arch == RLX_LLM_GEMMA2) {
    read_gemma2(r, c);
    return;
  }
  c->rope_theta = get_number(r, o, "rope_theta", 10000.0);
  c->rms_norm_eps = (float)get_number(r, o, "rms_norm_eps", 1e-6);
  c->tie_word_embeddings = get_bool(r, o, "tie_word_embeddings", 0);
  /* Qwen2's q/k/v projections always carry biases; others say so. */
  c->attention_bias = c->arch == RLX_LLM_QWEN2 || get_bool(r, o, "attention_bias", 0);
  c->qk_norm = c->arch == RLX_LLM_QWEN3;
  c->sliding_window = 0;
  if (c->arch == RLX_LLM_MISTRAL)
    c->sliding_window = narrow(r, "sliding_window", get_int(r, o, "sliding_window", 0, 0));
  /* Mixtral: experts in place of the MLP */
  const char* type = get_string(o, "model_type");
  int mixtral = type && strcmp(type, "mixtral") == 0;
  c->num_experts =
      narrow(r, "num_local_experts", get_int(r, o, "num_local_experts", 0, mixtral));
  c->num_experts_per_tok =
      narrow(r, "num_experts_per_tok", get_int(r, o, "num_experts_per_tok", 2, 0));
  read_rope_scaling(r, c);
  refuse_unsupported(r, c);
}

static rlx_status parse_config(const char* text, size_t len, rlx_llm_config* out,
                               rlx_error* err) {
  if (!text || !out) return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: NULL argument");
  if (len > (size_t)INT32_MAX) return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: too long");
  json_tokener* tok = json_tokener_new_ex(64);
  RLX_CHECK_ALLOC(err, tok);
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  json_object* root = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error e = json_tokener_get_error(tok);
  size_t at = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  if (!root || e != json_tokener_success) {
    json_object_put(root);
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: malformed JSON near byte %zu: %s", at,
                    json_tokener_error_desc(e));
  }
  rlx_llm_config c;
  memset(&c, 0, sizeof c);
  reader r = {root, err, RLX_OK};
  if (!json_object_is_type(root, json_type_object))
    r.st = rlx_fail(err, RLX_INVALID_ARGUMENT, "llm config: not a JSON object");
  if (r.st == RLX_OK) read_arch(&r, &c);
  if (r.st == RLX_OK && c.arch == RLX_LLM_GPT2) read_gpt2(&r, &c);
  if (r.st == RLX_OK && c.arch != RLX_LLM_GPT2) read_sizes(&r, &c);
  if (r.st == RLX_OK && c.arch != RLX_LLM_GPT2) read_features(&r, &c);
  json_object_put(root);
  if (r.st == RLX_OK) r.st = rlx_llm_config_check(&c, err);
  if (r.st == RLX_OK) *out = c;
  return r.st;
}

#else /* !RLX_HAVE_JSONC */

static rlx_status parse_config(const char* text, size_t len, rlx_llm_config* out,
                               rlx_error* err) {
  (void)text, (void)len, (void)out;
  return rlx_fail(err, RLX_UNIMPLEMENTED,
                  "llm config: not built (the library was configured without json-c)");
}

#endif

rlx_status rlx_llm_config_parse(const char* json_text, size_t len, rlx_llm_config* out,
                                char** out_error) {
  rlx_error err = {{0}};
  return rlx_llm_report(parse_config(json_text, len, out, &err), &err, out_error);
}

/* config.json is a few kilobytes; the limit only stops a hostile file. */
#define LLM_MAX_CONFIG_BYTES (16ll << 20)

rlx_status rlx_llm_config_load(const char* path, rlx_llm_config* out, char** out_error) {
  rlx_error err = {{0}};
  if (!path || !out)
    return rlx_llm_report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "llm config: NULL argument"), &err,
                          out_error);
  char file[4096];
  struct stat sb;
  int is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
  int w = snprintf(file, sizeof file, is_dir ? "%s/config.json" : "%s", path);
  if (w < 0 || (size_t)w >= sizeof file)
    return rlx_llm_report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "llm config: path too long"), &err,
                          out_error);
  void* text = NULL;
  size_t n = 0;
  rlx_status s = rlx_file_read_all(file, "llm config", LLM_MAX_CONFIG_BYTES, &text, &n, &err);
  if (s == RLX_OK) s = parse_config(text, n, out, &err);
  free(text);
  return rlx_llm_report(s, &err, out_error);
}
